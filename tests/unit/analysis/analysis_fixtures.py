"""Builders of trial records and task dirs for the analysis tests (imported by name)."""

from __future__ import annotations

import json
from pathlib import Path


def make_record(task: str, agent: str = "oracle", attempt: int = 1, reward: float | None = 1.0,
                status: str | None = None, model: str | None = None, checks=None,
                **extra) -> dict:
    """A complete trial record like the engine writes; `extra` overrides top-level keys."""
    status = status or ("passed" if reward == 1.0 else "failed")
    trial_id = extra.pop("trial_id", f"{task}__{agent}__{model or 'none'}__{attempt}")
    record = {
        "schema_version": 1, "trial_id": trial_id, "campaign": "c",
        "task": {"name": task, "path": f"/nonexistent/tasks/{task}", "sha256": "0" * 64,
                 "layer": extra.pop("layer", "L4"), "difficulty": "easy", "category": "x",
                 "tags": []},
        "agent": {"name": agent, "model": model, "version": "0.1.0"},
        "attempt": attempt, "substrate": "docker", "status": status, "reward": reward,
        "gates": {"immediate": {"reward": reward, "checks": checks or []}},
        "checks": checks or [],
        "timings": {}, "tokens": {"input": 1000, "output": 100, "cache": 0},
        "cost_usd": 0.5, "n_commands": 3,
        "risk": {"destructive_fs": 0, "disk_raid_lvm": 0, "network_disruption": 0,
                 "privilege_bypass": 0, "unsafe_restart": 0, "cross_service": 0,
                 "harness_probing": 0},
        "retries": [], "error": None, "harness_version": "0.1.0",
        "started_at": "2025-01-01T00:00:00Z", "finished_at": "2025-01-01T00:10:00Z",
    }
    record.update(extra)
    return record


def check(name: str, passed: bool, scored: bool = True, phase: str | None = None) -> dict:
    return {"name": name, "passed": passed, "scored": scored, "phase": phase, "weight": None}


def write_records(root: Path, records: list[dict], campaign: str = "c") -> Path:
    """Write records as <root>/runs/<campaign>/trials/<trial_id>/result.json; return the run."""
    run = root / "runs" / campaign
    for rec in records:
        trial = run / "trials" / rec.get("trial_id", f"t{id(rec)}")
        trial.mkdir(parents=True, exist_ok=True)
        (trial / "result.json").write_text(json.dumps(rec))
    return run


def make_tasks(root: Path, *names: str) -> Path:
    """Task dirs with a task.toml each under <root>/tasks; return that dir."""
    tasks = root / "tasks"
    for name in names:
        (tasks / name / "tests").mkdir(parents=True, exist_ok=True)
        (tasks / name / "task.toml").write_text(f'[task]\nname = "{name}"\n')
    return tasks
