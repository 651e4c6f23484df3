"""Bare-metal reset overhead on the emulated pool: the time from lease to "agent may start"
for the next trial on a machine, per reset kind, against a raw `virsh reset` + SSH wait of
the same guest.

    python bench/baremetal_reset.py [--pool benchpool] [--runs 1] [--keep]

Harness: `reset.reset` of the machine (the pool's `reimage`: power off through the BMC,
the machine's saved first boot restored, its clock stepped; or, with
`HARNESS_VM_START=cold`, a new disk and a boot; then `power-cycle`: the harness's files
removed over SSH and a chassis power cycle through the BMC), then the wait until SSH
answers and the machine is clean (what `wait_ready` checks before a trial starts).
Raw: `virsh reset` of the same domain and the same SSH wait, nothing else. Prints the
seconds side by side and each ratio to raw. The pool (one machine) is made when missing
and removed afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.substrates import ssh  # noqa: E402
from harness.substrates.metal import emulate, reset  # noqa: E402
from harness.substrates.metal.pool import pool_path  # noqa: E402


def ready(machine) -> None:
    asyncio.run(ssh.wait_ready(machine.ssh.host, machine.ssh.key_path, 300))
    if reset.dirty(machine):
        raise SystemExit(f"{machine.name} is not clean after its reset")


def timed(fn) -> float:
    start = time.monotonic()
    fn()
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="benchpool")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    made = not pool_path(args.pool).exists()
    pool = emulate.emulate(args.pool, nodes=1, log=lambda m: None)
    machine = pool.machines[0]
    results: dict[str, list[float]] = {"raw virsh reset": [], "reimage": [], "power-cycle": []}
    try:
        for _ in range(args.runs):
            results["raw virsh reset"].append(timed(lambda: (subprocess.run(
                ["virsh", "-q", "-c", emulate.URI, "reset", machine.domain], check=True,
                capture_output=True), ready(machine))))
            for kind in ("reimage", "power-cycle"):
                kind_pool = pool.model_copy(update={"reset": kind})
                results[kind].append(timed(lambda p=kind_pool: (
                    reset.reset(p, machine.name, log=lambda m: None), ready(machine))))
    finally:
        if made and not args.keep:
            emulate.remove(args.pool)
    raw = min(results["raw virsh reset"])
    print(f"{'reset':18} {'best s':>8} {'ratio':>6}   (emulated pool, one machine, "
          f"{args.runs} run(s))")
    for kind, secs in results.items():
        print(f"{kind:18} {min(secs):8.1f} {min(secs) / raw:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
