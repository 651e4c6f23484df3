"""The controller's dead-man switch, for faults a node cannot heal by itself.

A node that is powered off runs no timer, so a power fault's dead-man switch lives on the
controller (`deadman: controller` in the fault's meta/fault.yml): `arm()` starts a detached
watcher, `harness fault deadman TRIAL ID --at T` (its own session, so it outlives a harness
killed with -9). It waits until the fault's deadline, reading the trial's ledger every few
seconds, and exits as soon as the fault is healed or the trial directory is gone; at the
deadline it heals the fault through the same path as `harness fault heal` (power on
through the substrate: the BMC on bare metal) and records `fault.deadman` in the trial's
events. Its output goes to `faults/deadman-<id>.log`.

Node-side dead-man switches (roles/fi_common: a systemd timer that runs the heal script)
stay as they are for faults whose node can still heal itself.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from harness.faults.base import FaultRecord
from harness.faults.ledger import Ledger, ledger_path
from harness.paths import TrialPaths

POLL_SEC = 3.0


def log_path(paths: TrialPaths, fault_id: str) -> Path:
    return paths.root / "faults" / f"deadman-{fault_id}.log"


def arm(paths: TrialPaths, rec: FaultRecord) -> None:
    """Start the watcher of one fault, detached (`setsid --fork`: init reaps it, not us)."""
    deadline = time.time() + rec.deadman_sec
    log = log_path(paths, rec.id)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        subprocess.run(
            ["setsid", "--fork", sys.executable, "-m", "harness.cli", "fault", "deadman",
             str(paths.root.resolve()), rec.id, "--at", f"{deadline:.3f}"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, close_fds=True,
            cwd="/", check=True, timeout=30)


def _active(ledger: Ledger, fault_id: str) -> bool:
    rec = ledger.records().get(fault_id)
    return rec is not None and rec.active


def still_active_at(paths: TrialPaths, fault_id: str, deadline: float) -> bool:
    """Wait until the deadline; whether the fault is still active then (False as soon as
    it is healed or the trial directory is gone)."""
    ledger = Ledger(ledger_path(paths))
    while True:
        if not ledger.path.exists() or not _active(ledger, fault_id):
            return False
        left = deadline - time.time()
        if left <= 0:
            return True
        time.sleep(min(POLL_SEC, left))


__all__ = ["arm", "log_path", "still_active_at"]
