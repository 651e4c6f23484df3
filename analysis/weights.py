"""Difficulty-weighted checks (InfraBench appendix C) and their frozen sidecar files.

For a task whose verifier emits scored checks, each check c gets the weight
`w_c = (1 - p_c) + 0.1`, where p_c is the pass rate of c over every recorded attempt of
that task in the population (all configurations). Weights range from 0.1 (always passed)
to 1.1 (never passed). A trial's weighted reward is
`sum(w_c of passed scored checks) / sum(w_c of scored checks)` over the checks of all its
gates; a check is identified by (task, gate, name). Unscored checks never count. Tasks
with only a scalar reward keep it, and so does a trial the verifier zeroed (an anti-bypass
gate failed): weighting moves partial credit, it never creates it.

Weights are derived once and frozen per task in `<task>/tests/weights.json`; new
configurations do not move published scores. Re-deriving (`harness weights derive`) is an
explicit re-scoring that bumps the sidecar's `version`.
"""

from __future__ import annotations

import json
import os
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from analysis.metrics import NOT_ATTEMPTS
from harness.errors import InputError

FLOOR, MAX_WEIGHT = 0.1, 1.1
FORMAT = "harness-check-weights/1"
SIDECAR = Path("tests") / "weights.json"
MODES = ("frozen", "derive", "uniform")
WEIGHT_SCHEMA = {"task": pl.String, "gate": pl.String, "name": pl.String,
                 "attempts": pl.Int64, "pass_rate": pl.Float64, "w": pl.Float64}


def derive(trials: pl.DataFrame, checks: pl.DataFrame) -> pl.DataFrame:
    """Weights from the population: one row per scored (task, gate, name) with p_c and w."""
    excluded = trials.filter(pl.col("status").is_in(NOT_ATTEMPTS))["trial_id"].implode()
    return (checks.lazy()
            .filter(pl.col("scored") & ~pl.col("trial_id").is_in(excluded))
            .group_by("task", "gate", "name")
            .agg(attempts=pl.len().cast(pl.Int64), pass_rate=pl.col("passed").mean())
            .with_columns(w=((1 - pl.col("pass_rate")) + FLOOR).round(6))
            .select(list(WEIGHT_SCHEMA))
            .sort("task", "gate", "name")
            .collect())


def apply(trials: pl.DataFrame, checks: pl.DataFrame,
          weights: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Re-score `trials` with `weights` (rows for the weighted tasks only).

    Returns the trials, with `reward` replaced where weighting applies and the verifier's
    value kept in `recorded_reward`, and the scored checks of weighted tasks that the
    weights do not list (they were given the maximum weight, 1.1).
    """
    weighted_tasks = weights["task"].unique().implode()
    scored = (checks.lazy()
              .filter(pl.col("scored") & pl.col("task").is_in(weighted_tasks))
              .join(weights.lazy().select("task", "gate", "name", "w"),
                    on=["task", "gate", "name"], how="left"))
    missing = scored.filter(pl.col("w").is_null()).select("task", "gate", "name").unique()
    per_trial = (scored.with_columns(pl.col("w").fill_null(MAX_WEIGHT))
                 .group_by("trial_id")
                 .agg(weighted=(pl.col("w") * pl.col("passed")).sum() / pl.col("w").sum()))
    reward = pl.col("reward")
    rescored = (trials.lazy().join(per_trial, on="trial_id", how="left")
                .with_columns(recorded_reward=reward,
                              reward=pl.when(reward.is_not_null() & (reward > 0)
                                             & pl.col("weighted").is_not_null())
                              .then(pl.col("weighted")).otherwise(reward))
                .drop("weighted"))
    rescored, missing = pl.collect_all([rescored, missing.sort("task", "gate", "name")])
    return rescored, missing


def find_task_dirs(root: Path, warnings: list[str]) -> dict[str, Path]:
    """Task dirs under `root` (each holds a task.toml), by `[task] name` or the dir name."""
    root = Path(root)
    if not root.is_dir():
        raise InputError("no such tasks directory", file=str(root), key="--tasks")
    found: dict[str, Path] = {}
    for toml in sorted(root.rglob("task.toml")):
        if any(part.startswith(".") for part in toml.relative_to(root).parts):
            continue
        name = toml.parent.name
        try:
            declared = tomllib.loads(toml.read_text()).get("task", {}).get("name")
            name = declared if isinstance(declared, str) and declared else name
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            warnings.append(f"{toml}: unreadable task.toml ({exc}); using the dir name {name!r}")
        if name in found:
            warnings.append(f"{toml}: task {name!r} also defined in {found[name]}; ignored")
            continue
        found[name] = toml.parent
    return found


def read_sidecar(path: Path, task: str, warnings: list[str]) -> pl.DataFrame | None:
    """The weights frozen in one sidecar file, or None (with a warning) if unusable."""
    try:
        data = json.loads(path.read_text())
        rows = [{"task": task, "gate": c.get("gate", "immediate"), "name": c["name"],
                 "attempts": c.get("attempts"), "pass_rate": c.get("pass_rate"),
                 "w": float(c["weight"])} for c in data["checks"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        warnings.append(f"{path}: unusable weights sidecar ({exc!r}); task {task!r} keeps its "
                        "recorded reward")
        return None
    return pl.DataFrame(rows, schema=WEIGHT_SCHEMA, orient="row")


def sidecar_dirs(tasks: list[str], task_dirs: dict[str, Path],
                 task_paths: dict[str, str]) -> dict[str, Path]:
    """Where each task's sidecar lives: `--tasks` dirs first, else the record's task path."""
    out = {}
    for task in tasks:
        directory = task_dirs.get(task) or (Path(task_paths[task]) if task_paths.get(task)
                                            else None)
        if directory is not None and (directory / SIDECAR).is_file():
            out[task] = directory / SIDECAR
    return out


def read_sidecars(paths: dict[str, Path], warnings: list[str]) -> pl.DataFrame:
    """All usable sidecars as one weights frame."""
    frames = [f for task, path in paths.items()
              if (f := read_sidecar(path, task, warnings)) is not None]
    return pl.concat(frames) if frames else pl.DataFrame(schema=WEIGHT_SCHEMA)


def write_sidecar(task_dir: Path, task: str, weights: pl.DataFrame, population: int,
                  configurations: list[str]) -> dict:
    """Freeze `weights` (this task's rows) into `<task_dir>/tests/weights.json`.

    The version is the previous sidecar's plus one (1 for the first); the file is replaced
    atomically. Returns the document written.
    """
    path = Path(task_dir) / SIDECAR
    previous = 0
    if path.is_file():
        try:
            previous = int(json.loads(path.read_text()).get("version", 0))
        except (OSError, ValueError, TypeError, AttributeError):
            previous = 0
    doc = {
        "format": FORMAT, "task": task, "version": previous + 1,
        "derived_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "formula": "w = (1 - p) + 0.1, p = pass rate of the check over all recorded attempts",
        "population": {"trials": population, "configurations": sorted(configurations)},
        "checks": [{"gate": r["gate"], "name": r["name"], "weight": r["w"],
                    "pass_rate": round(r["pass_rate"], 6), "attempts": r["attempts"]}
                   for r in weights.sort("gate", "name").iter_rows(named=True)],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)
    return doc
