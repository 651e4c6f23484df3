"""Shared fixtures: seed task copies in tmp_path and real-substrate availability."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

# `scripts/test.sh` runs pytest in parallel workers (`-n 3 --dist loadgroup`). A TCG guest keeps
# a core busy while it boots, so the VM test modules run in two lanes (each lane one worker, one
# module after the other); every other module is one unit of work for whichever worker is free.
VM_LANE_A = {"test_baremetal_emulated.py", "test_libvirt_substrate.py", "test_task_formats_vm.py"}

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
        from harness.substrates.docker.base_image import docker_base_status

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


class HostListener:
    """A TCP service on every host address (what no trial may reach)."""

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server naming)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"host-service")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def probe_script(self, addrs: list[str]) -> str:
        """A node-side shell line printing `open:ADDR` for each address that answers."""
        return "; ".join(f"timeout 3 bash -c 'echo > /dev/tcp/{a}/{self.port}' 2>/dev/null "
                         f"&& echo open:{a}" for a in addrs) + "; true"

    def close(self) -> None:
        self.server.shutdown()


def host_addresses() -> list[str]:
    """The host's IPv4 addresses but loopback (trial bridges' gateways included)."""
    import json

    out = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True).stdout
    return [a["local"] for link in json.loads(out or "[]") for a in link.get("addr_info", [])
            if not a["local"].startswith("127.")]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under `--dist loadgroup`: group tests by module (VM modules by lane) and queue the VM
    lanes first, then the other integration modules, then the unit tests."""
    if config.getoption("dist", "no") != "loadgroup":
        return

    def rank(item) -> int:
        if item.get_closest_marker("libvirt"):
            return 0
        return 1 if item.get_closest_marker("docker") else 2

    for item in items:
        if rank(item) == 0:
            group = "vm-a" if item.path.name in VM_LANE_A else "vm-b"
        else:
            group = str(item.path.relative_to(REPO))
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=rank)
