"""Shared fixtures: seed task copies in tmp_path and real-substrate availability."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

# `scripts/test.sh` runs pytest in two workers (`-n 2 --dist loadfile`). A TCG guest keeps a
# core busy, so VM test modules (marker `libvirt`) run in lanes: one unit of work each (one
# worker, one module after the other). The `vm` lane is queued first, beside the docker and
# unit modules on the other worker; the `cloud` lane (the CloudLab portal on its own
# emulated pool, then the campaign on another machine's libvirt) is queued last, so it
# starts on that worker once the docker and unit modules are done. (The substrate's own
# module balances the two workers: it sits in whichever lane is shorter.) (Two VM lanes beside
# docker oversubscribed the 2 cores: guests missed SSH waits.) In the `vm` lane, the
# bare-metal module comes last: its worker's emulated pool is removed when the session
# ends, and its idle guests must not share the cores with the other VM modules.
VM_LANES = {
    "test_libvirt_substrate.py": "vm", "test_task_formats_vm.py": "vm",
    "test_faults_vm.py": "vm", "test_libvirt_trials.py": "vm", "test_libvirt_campaign.py": "vm",
    "test_baremetal_emulated.py": "vm", "test_cloudlab_portal.py": "cloud",
    "test_libvirt_remote.py": "cloud",
}
POOL_MODULES = {"test_baremetal_emulated.py", "test_cloudlab_portal.py"}

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
        """A node-side shell line printing `open:ADDR` for each address that answers (the
        probes run at once: an address that drops them costs its 3 s timeout once, not one
        after the other)."""
        return "".join(f"(timeout 3 bash -c 'echo > /dev/tcp/{a}/{self.port}' 2>/dev/null "
                       f"&& echo open:{a}) & " for a in addrs) + "wait; true"

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
    """On an xdist worker: queue the `vm` lane first (its pool module last), then the other
    integration modules, then the unit tests, then the `cloud` lane (every worker collects
    in this order; the scheduler hands out in it)."""
    if hasattr(config, "workerinput"):
        def key(item) -> tuple[int, bool]:
            name = item.path.name
            if name in VM_LANES:
                return (0 if VM_LANES[name] == "vm" else 3, name in POOL_MODULES)
            return (1 if item.get_closest_marker("docker") else 2, False)

        items.sort(key=key)


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with the VM modules of a lane as one unit of work."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return VM_LANES.get(Path(path).name, path)

    return Lanes(config, log)


class WorkerClock:
    """Each xdist worker's busy time (setup + call + teardown of its tests) and its two
    largest modules, printed at the end of the run: which lane bounds the suite's wall time,
    and by what (CI's time budget is set by the slower worker)."""

    def __init__(self):
        self.busy: dict[str, dict[str, float]] = {}

    def pytest_runtest_logreport(self, report):
        node = getattr(report, "node", None)
        worker = getattr(getattr(node, "gateway", None), "id", None) or "main"
        module = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
        mods = self.busy.setdefault(worker, {})
        mods[module] = mods.get(module, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter):
        if not self.busy:
            return
        terminalreporter.section("busy time per worker")
        for worker, mods in sorted(self.busy.items()):
            top = sorted(mods.items(), key=lambda kv: -kv[1])[:4]
            terminalreporter.write_line(
                f"{worker}: {sum(mods.values()):.0f} s in {len(mods)} modules; largest: "
                + ", ".join(f"{m} {s:.0f} s" for m, s in top))


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        config.pluginmanager.register(WorkerClock(), "worker-clock")
