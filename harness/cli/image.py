"""CLI: `harness image build` - base images built offline (debootstrap)."""

from __future__ import annotations

import typer

image_app = typer.Typer(help="Build the offline base images.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(image_app, name="image")


@image_app.command("build")
def build(
    kind: str = typer.Option(None, "--kind", help="Substrate whose base image to build "
                             "(default: the default substrate)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when cached."),
) -> None:
    """Build a substrate's base image (cached by recipe hash): the docker base
    harness/debian:bookworm, or the VM qcow2 with its kernel and initrd for direct boot."""
    from harness import substrates

    cls = substrates.substrate_class(kind or substrates.default_name())
    print(cls.build_image(force=force))
