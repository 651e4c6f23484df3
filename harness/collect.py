"""`results/trials.parquet` and `results/checks.parquet` from a run dir's result.json files.

Derived data: analysis can always rebuild them from the trial records.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

TRIAL_COLUMNS = ["trial_id", "campaign", "task", "layer", "difficulty", "agent", "model",
                 "attempt", "substrate", "status", "reward", "n_commands", "cost_usd",
                 "tokens_input", "tokens_output", "seconds", "risk_total", "retries",
                 "error_type", "started_at", "finished_at"]


def _records(run_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((run_dir / "trials").glob("*/result.json")):
        try:
            out.append(json.loads(path.read_text()))
        except ValueError:
            continue
    return out


def trial_row(r: dict[str, Any]) -> dict[str, Any]:
    tokens = r.get("tokens") or {}
    return {
        "trial_id": r["trial_id"], "campaign": r.get("campaign"), "task": r["task"]["name"],
        "layer": r["task"].get("layer"), "difficulty": r["task"].get("difficulty"),
        "agent": r["agent"]["name"], "model": r["agent"].get("model"),
        "attempt": r.get("attempt"), "substrate": r.get("substrate"), "status": r["status"],
        "reward": r.get("reward"), "n_commands": r.get("n_commands"),
        "cost_usd": r.get("cost_usd"), "tokens_input": tokens.get("input"),
        "tokens_output": tokens.get("output"),
        "seconds": sum(v.get("seconds", 0) for v in (r.get("timings") or {}).values()),
        "risk_total": sum((r.get("risk") or {}).values()),
        "retries": len(r.get("retries") or []),
        "error_type": (r.get("error") or {}).get("type"),
        "started_at": r.get("started_at"), "finished_at": r.get("finished_at"),
    }


def check_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for gate, g in (r.get("gates") or {}).items():
        for c in g.get("checks") or []:
            rows.append({"trial_id": r["trial_id"], "task": r["task"]["name"],
                         "agent": r["agent"]["name"], "model": r["agent"].get("model"),
                         "attempt": r.get("attempt"), "gate": gate, "name": c.get("name"),
                         "passed": bool(c.get("passed")), "scored": bool(c.get("scored", True)),
                         "phase": c.get("phase"), "weight": c.get("weight")})
    return rows


def collect(run_dir: Path) -> dict[str, int]:
    """Write both Parquet files atomically; return their row counts."""
    import polars as pl

    records = _records(run_dir)
    out = run_dir / "results"
    out.mkdir(parents=True, exist_ok=True)
    trials = pl.DataFrame([trial_row(r) for r in records],
                          schema_overrides={"reward": pl.Float64, "cost_usd": pl.Float64,
                                            "model": pl.Utf8, "error_type": pl.Utf8},
                          infer_schema_length=None) if records else \
        pl.DataFrame(schema=dict.fromkeys(TRIAL_COLUMNS, pl.Utf8))
    checks = pl.DataFrame([row for r in records for row in check_rows(r)],
                          schema_overrides={"weight": pl.Float64, "phase": pl.Utf8,
                                            "model": pl.Utf8}, infer_schema_length=None)
    for name, df in (("trials", trials), ("checks", checks)):
        tmp = out / f".{name}.parquet.tmp"
        df.write_parquet(tmp)
        os.replace(tmp, out / f"{name}.parquet")
    return {"trials": trials.height, "checks": checks.height}
