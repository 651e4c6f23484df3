#!/usr/bin/env python3
"""Campaign throughput: N trivial trials (hello-docker, oracle) at concurrency 1, 4 and 8,
through `harness campaign apply` and through a raw parallel Docker baseline doing the same
work (network, systemd container, solve, test, remove), side by side.

Prints trials/min for both and the ratio per concurrency level.
Usage: .venv/bin/python bench/campaign_throughput.py [--trials 24] [--levels 1,4,8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trial_overhead import REPO, TASK, harness_run, raw_run  # noqa: E402


def harness_campaign(n: int, concurrency: int, tmp: Path) -> float:
    camp = tmp / f"c{concurrency}.yaml"
    camp.write_text(yaml.safe_dump({
        "name": f"bench-c{concurrency}", "tasks": [str(TASK)], "agents": [{"name": "oracle"}],
        "attempts": n, "concurrency": {"total": concurrency,
                                       "per_substrate": {"docker": concurrency}}}))
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "harness.cli", "campaign", "apply", str(camp),
                          "--out", str(tmp / f"run{concurrency}"), "--json"],
                         capture_output=True, text=True, cwd=REPO)
    secs = time.perf_counter() - t
    summary = json.loads(res.stdout)
    assert summary["statuses"] == {"passed": n}, summary
    return secs


def raw_parallel(n: int, concurrency: int, image: str) -> float:
    client = docker.from_env()
    t = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda i: raw_run(client, image, i, subnet_index=i), range(n)))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=24)
    ap.add_argument("--levels", default="1,4,8")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    client = docker.from_env()
    rows = []
    with tempfile.TemporaryDirectory(prefix="hx-bench-") as tmp:
        harness_run(Path(tmp))  # warm-up: builds/caches the task image
        image = next(i for i in client.images.list(filters={"label": "harness.task-image"})
                     if any(t.startswith("hx-task/hello-docker:") for t in i.tags)).id
        for c in levels:
            h = harness_campaign(args.trials, c, Path(tmp))
            r = raw_parallel(args.trials, c, image)
            rows.append((c, args.trials * 60 / h, args.trials * 60 / r))
    print(f"{args.trials} trials each | trials/min")
    print(f"{'concurrency':>12}{'harness':>10}{'raw':>10}{'harness/raw':>13}")
    for c, h, r in rows:
        print(f"{c:>12}{h:>10.1f}{r:>10.1f}{h / r:>13.2f}")
    print("target: harness/raw >= 0.5 at concurrency 8")


if __name__ == "__main__":
    main()
