"""Per-task images: what decides the cache key, and where setup.sh goes (no builds here;
the real builds run in tests/integration/test_libvirt_trials.py and the docker suites)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import Settings
from harness.errors import PreflightError
from harness.substrates.docker.image import SETUP_STEP, image_tag
from harness.substrates.libvirt.task_image import image_key, task_image
from harness.task import load_task

TOML = """version = "1.0"
[task]
name = "img-demo"
[environment]
type = "vm"
"""


def make(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "img-demo"
    for rel, text in {"task.toml": TOML, "instruction.md": "x\n", "tests/test.sh": "true\n",
                      **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_no_setup_sh_boots_the_base_image(tmp_path):
    task = load_task(make(tmp_path, {"environment/bootstrap.sh": "echo hi\n"}))
    base = tmp_path / "vm-base" / "disk.qcow2"
    assert task_image(base, task) == base


def test_key_follows_setup_files_and_base_but_not_bootstrap(tmp_path):
    base = tmp_path / "vm-base" / "disk.qcow2"
    root = make(tmp_path, {"environment/setup.sh": "apt-get install -y x\n",
                           "environment/app.conf": "a=1\n",
                           "environment/bootstrap.sh": "echo one\n"})
    key = image_key(base, load_task(root))
    (root / "environment" / "bootstrap.sh").write_text("echo two\n")
    assert image_key(base, load_task(root)) == key
    (root / "environment" / "app.conf").write_text("a=2\n")
    changed = image_key(base, load_task(root))
    assert changed != key
    (root / "environment" / "setup.sh").write_text("apt-get install -y y\n")
    assert image_key(base, load_task(root)) not in (key, changed)
    assert image_key(tmp_path / "other" / "disk.qcow2", load_task(root)) != image_key(
        base, load_task(root))


class _Images:
    def get(self, ref):
        return type("Image", (), {"id": f"sha256:{ref}"})()


class _Client:
    images = _Images()


def test_docker_setup_sh_is_the_last_build_step(tmp_path):
    root = make(tmp_path, {"environment/Dockerfile": "FROM debian:bookworm\nRUN true\n"})
    (root / "task.toml").write_text(TOML.replace('"vm"', '"docker"'))
    tag, _, _ = image_tag(_Client(), load_task(root), Settings())
    (root / "environment" / "setup.sh").write_text("echo setup\n")
    tag2, tar_bytes, _ = image_tag(_Client(), load_task(root), Settings())
    assert tag2 != tag
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        dockerfile = tar.extractfile("Dockerfile").read().decode()
        assert "setup.sh" in tar.getnames()
    assert dockerfile.endswith(SETUP_STEP) and dockerfile.startswith("FROM ")


class _Absent:
    def get(self, ref):
        import docker

        raise docker.errors.ImageNotFound(ref)


@pytest.mark.parametrize("line", ["FROM alpine", "FROM alpine AS build\nFROM build"])
def test_an_unmapped_short_image_name_is_refused_before_the_build(tmp_path, line):
    root = make(tmp_path, {"environment/Dockerfile": f"{line}\nRUN true\n"})
    (root / "task.toml").write_text(TOML.replace('"vm"', '"docker"'))
    client = type("Client", (), {"images": _Absent()})()
    with pytest.raises(PreflightError, match=r"base image .alpine. is not present "
                                             r"locally.*image_overrides"):
        image_tag(client, load_task(root), Settings())
