"""Shared fixtures: seed task copies in tmp_path and real-substrate availability."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "tasks"


@pytest.fixture
def seed_task(tmp_path):
    """Copy a seed task into tmp_path and return the copy's path."""

    def copy(name: str) -> Path:
        dest = tmp_path / "tasks" / name
        shutil.copytree(SEED / name, dest)
        return dest

    return copy


def docker_ready() -> str | None:
    """None when a Docker engine and the base image are usable, else the reason."""
    try:
        from harness.images import docker_base_status

        ok, desc = docker_base_status()
        return None if ok else desc
    except Exception as exc:
        return str(exc)


def labeled(trial_id: str) -> list[str]:
    """Every container, network and volume still carrying the trial's label."""
    out = []
    for kind in ("container", "network", "volume"):
        cmd = ["docker", kind, "ls", "-q", "--filter", f"label=harness.trial={trial_id}"]
        if kind == "container":
            cmd.insert(3, "-a")
        out += subprocess.run(cmd, capture_output=True, text=True).stdout.split()
    return out
