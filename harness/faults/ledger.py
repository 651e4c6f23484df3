"""The controller-side fault ledger: `<trial>/faults/ledger.jsonl`, append-only, fsync'd.

Every step is one line written before (intent) or after (outcome) it happens, so a
controller killed at any point leaves a ledger that says what may be on the nodes::

    {"ts": ..., "op": "inject", "record": {id, fault, layer, targets, hosts, params, ...}}
    {"ts": ..., "op": "injected", "id": "f1a2b3c", "detail": {host: {...}}}
    {"ts": ..., "op": "inject_failed" | "heal_failed", "id": ..., "error": "..."}
    {"ts": ..., "op": "healed", "id": ..., "changed": {host: bool}}

The node-side half lives on each target: `/run/harness/faults/<id>.json` (the record) and
`/var/lib/harness/faults/<id>/` (heal script, snapshots), written by roles/fi_common.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from harness.faults.base import FaultRecord
from harness.paths import TrialPaths
from harness.results import append_jsonl, now_iso


def ledger_path(paths: TrialPaths) -> Path:
    """Where a trial's fault ledger lives (`faults/ledger.jsonl` in the trial dir)."""
    return paths.root / "faults" / "ledger.jsonl"


class Ledger:
    """Append-only JSON lines; `records()` replays them into the current state."""

    def __init__(self, path: Path):
        self.path = path

    def append(self, op: str, **data: Any) -> None:
        append_jsonl(self.path, {"ts": now_iso(), "op": op, **data})

    def records(self) -> dict[str, FaultRecord]:
        """Every fault ever recorded, in injection order, with its latest status."""
        out: dict[str, FaultRecord] = {}
        if not self.path.exists():
            return out
        for raw in self.path.read_text().splitlines():
            try:
                entry = json.loads(raw)
            except ValueError:
                continue  # a torn last line after kill -9
            op = entry.get("op")
            if op == "inject":
                rec = FaultRecord(**entry["record"])
                out[rec.id] = rec
                continue
            rec = out.get(entry.get("id", ""))
            if rec is None:
                continue
            if op == "injected":
                rec.status, rec.detail = "active", entry.get("detail") or {}
            elif op in ("inject_failed", "heal_failed"):
                rec.status, rec.error = op, entry.get("error")
            elif op == "healed":
                rec.status, rec.error = "healed", None
        return out

    def active(self) -> list[FaultRecord]:
        """Faults that may still be on the nodes, oldest first."""
        return [r for r in self.records().values() if r.active]


class EventLog:
    """Events in `events.jsonl` for callers without a Trial (the `harness fault` CLI)."""

    def __init__(self, paths: TrialPaths):
        self.paths = paths
        self._t0 = time.monotonic()

    def __call__(self, name: str, **data: Any) -> None:
        rec = {"ts": now_iso(), "elapsed_sec": None, "name": name, "data": data}
        with self.paths.events.open("a") as fh:
            fh.write(json.dumps(rec, default=str) + "\n")
