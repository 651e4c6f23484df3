#!/usr/bin/env python3
"""Campaign throughput on Ray: the same N trivial trials (hello-docker, oracle) through
`campaign apply` with the local executor (the baseline: one controller) and with
`--executor ray` on a local Ray cluster of 1 and of 2 worker nodes (each its own
`$HARNESS_HOME` and hosts file, `--slots` docker slots each; `LocalCluster`), side by side.

Prints per configuration: wall time, trials/min and the ratio to the local baseline at the
same total slots, and what moved: the CPU seconds the `campaign apply` process itself
(the controller, with its children) spent, the whole machine's busy CPU seconds over the
run (other jobs on the machine included), and the bytes shipped back per trial. On one
machine every node shares its cores: a second node adds slots, not CPU, so the ratio is
bounded by the machine; the controller's CPU is what leaves it.

Usage: .venv/bin/python bench/ray_throughput.py [--trials 8] [--slots 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from harness.campaign.executors.ray.localcluster import LocalCluster  # noqa: E402

TASK = REPO / "tasks" / "hello-docker"


def worker_host(i: int, slots: int) -> dict:
    """Worker i's share of this machine's Docker engine: its slots, its own subnet pool."""
    sock = os.environ.get("DOCKER_HOST") or "unix:///run/harness/docker.sock"
    return {"name": f"w{i}", "docker": {"url": sock, "pool": f"10.{230 + i}.0.0/16"},
            "capacity": {"cpus": os.cpu_count() or 1, "memory_mb": 4096,
                         "max_trials": {"docker": slots}}}


def apply(tmp: Path, name: str, n: int, concurrency: int, *extra: str) -> dict:
    camp = tmp / f"{name}.yaml"
    camp.write_text(yaml.safe_dump({"name": name, "tasks": [str(TASK)], "attempts": n,
                                    "agents": [{"name": "oracle"}],
                                    "concurrency": {"total": concurrency,
                                                    "per_substrate": {"docker": concurrency}}}))
    run = tmp / f"run-{name}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy, t = machine_cpu(), time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "harness.cli", "campaign", "apply", str(camp),
                          "--out", str(run), "--json", *extra], capture_output=True,
                         text=True, cwd=REPO)
    secs = time.perf_counter() - t
    after, busy = resource.getrusage(resource.RUSAGE_CHILDREN), machine_cpu() - busy
    if res.returncode != 0:
        raise SystemExit(f"{name}: apply failed: {res.stderr[-2000:]}")
    statuses = json.loads(res.stdout)["statuses"]
    shipped = [e.get("bytes") for e in map(json.loads, (run / "journal.jsonl").read_text()
                                           .splitlines()) if e.get("event") == "finished"]
    shipped = [b for b in shipped if b]
    return {"name": name, "secs": secs, "per_min": n / secs * 60, "statuses": statuses,
            "machine": busy,
            "cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            "bytes": sum(shipped) / len(shipped) if shipped else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--slots", type=int, default=2, help="docker slots per worker node")
    args = ap.parse_args()
    n, s = args.trials, args.slots
    rows = []
    with tempfile.TemporaryDirectory(prefix="hx-bench-ray-") as d:
        tmp = Path(d)
        rows.append((s, apply(tmp, "bench-local-1", n, s)))
        rows.append((2 * s, apply(tmp, "bench-local-2", n, 2 * s)))
        for workers in (1, 2):
            t = time.perf_counter()
            with LocalCluster(tmp / f"cluster{workers}", worker_host, workers=workers,
                              slots=s) as cl:
                up = time.perf_counter() - t
                row = apply(tmp, f"bench-ray-{workers}", n, workers * s, "--executor", "ray",
                            "--address", cl.address)
                row["up"] = up
                rows.append((workers * s, row))
    base = {slots: r for slots, r in rows if r["name"].startswith("bench-local")}
    print(f"{n} trials of hello-docker (oracle), {os.cpu_count()} cores\n")
    print(f"{'configuration':<22} {'slots':>5} {'wall s':>7} {'trials/min':>10} "
          f"{'vs local':>8} {'apply cpu s':>11} {'machine cpu s':>13} {'shipped/trial':>13}")
    for slots, r in rows:
        ratio = r["per_min"] / base[slots]["per_min"]
        shipped = f"{r['bytes'] / 1024:.0f} KiB" if r["bytes"] else "-"
        print(f"{r['name']:<22} {slots:>5} {r['secs']:>7.1f} {r['per_min']:>10.1f} "
              f"{ratio:>7.2f}x {r['cpu']:>11.1f} {r['machine']:>13.1f} {shipped:>13}")
    for _, r in rows:
        if "up" in r:
            print(f"{r['name']}: cluster start {r['up']:.1f} s (not in its wall time)")


def machine_cpu() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat: all but idle, iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
