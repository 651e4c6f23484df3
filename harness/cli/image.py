"""CLI: `harness image build` - base images built offline (debootstrap)."""

from __future__ import annotations

import typer

image_app = typer.Typer(help="Build the offline base images.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(image_app, name="image")


@image_app.command("build")
def build(
    kind: str = typer.Option("docker", "--kind", help="docker or vm."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when cached."),
) -> None:
    """Build the base image (cached by recipe hash): docker -> harness/debian:bookworm,
    vm -> a qcow2 with the Debian kernel and initrd for direct boot."""
    from harness.errors import InputError

    if kind == "docker":
        from harness.images import build_docker_base

        build_docker_base(force=force)
    elif kind == "vm":
        from harness.substrates.libvirt.image import build_vm_image

        print(build_vm_image(force=force))
    else:
        raise InputError(f"unknown kind {kind!r}; valid: docker, vm", key="--kind")
