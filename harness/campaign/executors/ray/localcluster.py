"""A Ray cluster of one head and N worker nodes on this machine, for tests, the bench and
trying the executor out: every node its own `ray start --block` process group, every worker
its own `$HARNESS_HOME` (linked to this machine's caches: providers, images, tools) with a
hosts file of its own (its share of the one Docker engine: its slots and its own subnet
pool), so each worker is a node with its own engines as far as the harness can tell.

    with LocalCluster(tmp, host_for, workers=2, slots=2) as cluster:
        ... campaign apply RUN --executor ray --address cluster.address ...
        os.kill(cluster.raylet_pid(1), signal.SIGKILL)   # lose worker 1

`stop` ends every process the cluster started (by their process groups and the session
they share), never another Ray on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from harness.paths import REPO_ROOT, harness_home

PRIVATE = {"run", "subnets", "hosts.yaml", "ray-runs", "config.yaml"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_bin() -> str:
    return str(Path(sys.executable).with_name("ray"))


class LocalCluster:
    """Head (no trial slots) + `workers` nodes named w1..wN, worker i's one host
    `host_for(i, slots)` (a hosts-file entry: its engine endpoint with a subnet pool of its
    own, its capacity with `slots` trials)."""

    def __init__(self, root: Path, host_for: Callable[[int, int], dict], workers: int = 2,
                 slots: int = 2):
        self.root, self.slots, self.host_for = Path(root), slots, host_for
        # Ray's sockets live under its temp dir: a unix socket path has at most 107 bytes
        self.tmp = Path(tempfile.mkdtemp(prefix="hxray-", dir="/tmp"))
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.homes: dict[int, Path] = {}
        self.n = workers

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _env(self, **extra: str) -> dict[str, str]:
        path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH"))
                               if p)
        return {**os.environ, "PYTHONPATH": path, "RAY_USAGE_STATS_ENABLED": "0",
                "RAY_TMPDIR": str(self.tmp), **extra}

    def _start(self, name: str, args: list[str], env: dict[str, str]) -> None:
        log = open(self.root / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(
            [_ray_bin(), "start", "--block", f"--temp-dir={self.tmp}",
             "--disable-usage-stats", *args],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._start("head", ["--head", f"--port={self.port}", "--num-cpus=0",
                              "--include-dashboard=false"], self._env())
        self._wait(lambda: self._accepts(), "the head's GCS port")
        for i in range(1, self.n + 1):  # one at a time: a node's socket names are
            self.add_worker(i)            # numbered by the files already there
            self.wait_slots(i * self.slots)

    def home(self, i: int) -> Path:
        """Worker i's `$HARNESS_HOME`: links to this machine's, but its own state."""
        home = self.root / f"w{i}-home"
        if not home.exists():
            home.mkdir(parents=True)
            base = harness_home()
            for entry in base.iterdir():
                if entry.name not in PRIVATE:
                    (home / entry.name).symlink_to(entry)
            (home / "hosts.yaml").write_text(yaml.safe_dump({"hosts": [
                self.host_for(i, self.slots)]}))
        self.homes[i] = home
        return home

    def add_worker(self, i: int) -> None:
        home = self.home(i)
        env = self._env(HARNESS_HOME=str(home), HARNESS_NODE=f"w{i}")
        offer = subprocess.run([sys.executable, "-m", "harness.cli", "campaign",
                                "node-resources"], env=env, capture_output=True, text=True,
                               check=True).stdout.strip()
        base = 20000 + 1000 * i + (self.port % 50) * 20
        ports = [f"--node-manager-port={base}", f"--object-manager-port={base + 1}",
                 f"--dashboard-agent-listen-port={base + 2}",
                 f"--dashboard-agent-grpc-port={base + 3}",
                 f"--metrics-export-port={base + 4}", f"--runtime-env-agent-port={base + 5}",
                 f"--min-worker-port={base + 10}", f"--max-worker-port={base + 19}"]
        self._start(f"w{i}", [f"--address={self.address}", "--num-cpus=1",
                              f"--resources={offer}", *ports], env)

    def _accepts(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def slots_offered(self) -> float:
        """The cluster's `harness_trials` now (asked in a child: this process stays no
        Ray driver)."""
        code = (f"import ray, json; ray.init(address={self.address!r}, "
                "log_to_driver=False, logging_level='ERROR'); "
                "print(json.dumps(ray.available_resources()))")
        out = subprocess.run([sys.executable, "-c", code], env=self._env(),
                             capture_output=True, text=True, timeout=60).stdout
        try:
            return float(json.loads(out.strip().splitlines()[-1]).get("harness_trials", 0))
        except (ValueError, IndexError):
            return 0.0

    def wait_slots(self, n: float, deadline: float = 90.0) -> None:
        self._wait(lambda: self.slots_offered() >= n, f"{n} trial slots", deadline)

    def _wait(self, ready, what: str, deadline: float = 60.0) -> None:
        end = time.monotonic() + deadline
        while not ready():
            gone = [n for n, p in self.procs.items() if p.poll() is not None]
            if gone or time.monotonic() > end:
                if gone:
                    raise RuntimeError(f"local Ray cluster: node {gone[0]} exited (its log: "
                                       f"{self.root / (gone[0] + '.log')})")
                raise TimeoutError(f"local Ray cluster: no {what} after {deadline:.0f} s "
                                   f"(logs in {self.root})")
            time.sleep(0.5)

    def raylet_pid(self, i: int) -> int:
        """The pid of worker i's raylet (a child of its `ray start --block`)."""
        parent = self.procs[f"w{i}"].pid
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat[1]) == parent and b"raylet/raylet" in cmd:
                return int(proc.name)
        raise LookupError(f"worker {i} has no raylet")

    def session_pids(self) -> list[int]:
        """Every live process of the sessions the cluster's nodes lead."""
        sids = {p.pid for p in self.procs.values()}
        out = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[3]) in sids and stat[0] not in "ZX":
                out.append(int(proc.name))
        return out

    def stop(self) -> None:
        """SIGTERM, then SIGKILL, every process of the nodes' sessions."""
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            for pid in self.session_pids():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            end = time.monotonic() + wait
            while self.session_pids() and time.monotonic() < end:
                time.sleep(0.2)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)
