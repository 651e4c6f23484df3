"""Find trial records (`result.json`) under run directories and turn them into frames.

A run directory may be a whole campaign (`runs/<campaign>/trials/<trial-id>/result.json`),
a directory of campaigns, or one trial directory; every `result.json` below it is read.
Records are normalised into three Polars frames that the rest of the package works on:

- `trials`: one row per trial (`TRIAL_SCHEMA`), deduplicated by `trial_id`;
- `checks`: one row per check per gate (`CHECK_SCHEMA`); the legacy mapping form
  `{"name": true}` becomes scored checks;
- `gates`: one row per gate with its reward.

Nothing here raises on a bad record: an unreadable, partial or cancelled record becomes a
warning naming its file, and the record is skipped or read as far as it goes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

import polars as pl

from harness.errors import InputError
from harness.results import RISK_TYPES, Status

STATUSES = get_args(Status)

TRIAL_SCHEMA = {
    "trial_id": pl.String, "campaign": pl.String, "task": pl.String, "task_path": pl.String,
    "layer": pl.String, "difficulty": pl.String, "agent": pl.String, "model": pl.String,
    "config": pl.String, "attempt": pl.Int64, "substrate": pl.String, "status": pl.String,
    "reward": pl.Float64, "tokens_input": pl.Int64, "tokens_output": pl.Int64,
    "tokens_cache": pl.Int64, "cost_usd": pl.Float64, "n_commands": pl.Int64,
    "n_retries": pl.Int64, **{f"risk_{t}": pl.Int64 for t in RISK_TYPES},
    "finished_at": pl.String, "file": pl.String,
}
CHECK_SCHEMA = {
    "trial_id": pl.String, "task": pl.String, "config": pl.String, "gate": pl.String,
    "name": pl.String, "passed": pl.Boolean, "scored": pl.Boolean, "phase": pl.String,
    "weight": pl.Float64,
}
GATE_SCHEMA = {"trial_id": pl.String, "gate": pl.String, "reward": pl.Float64}


@dataclass
class Records:
    """The loaded population: trial, check and gate frames plus the warnings raised."""

    trials: pl.DataFrame
    checks: pl.DataFrame
    gates: pl.DataFrame
    warnings: list[str] = field(default_factory=list)
    files: int = 0

    @property
    def tasks(self) -> list[str]:
        """Every task seen in the records, sorted."""
        return sorted(self.trials["task"].unique().to_list())


def config_key(agent: str, model: str | None) -> str:
    """The configuration label: `agent/model`, or just the agent when there is no model."""
    return f"{agent}/{model}" if model else agent


def discover(paths: list[Path]) -> list[Path]:
    """Every `result.json` under the given run dirs (or trial dirs, or files), sorted, unique."""
    found: dict[Path, None] = {}
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise InputError("no such run directory", file=str(path))
        if path.is_file():
            found[path.resolve()] = None
            continue
        for file in sorted(path.rglob("result.json")):
            if file.is_file():
                found[file.resolve()] = None
    return list(found)


def load(paths: list[Path]) -> Records:
    """Discover and read every trial record under `paths`; raise if none is usable."""
    files = discover(paths)
    if not files:
        where = ", ".join(str(p) for p in paths)
        raise InputError("no result.json found (expected runs/<campaign>/trials/<id>/result.json)",
                         file=where)
    warnings: list[str] = []
    records = []
    for file in files:
        try:
            records.append((json.loads(file.read_text()), str(file)))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            warnings.append(f"{file}: unreadable trial record ({exc}); skipped")
    out = from_dicts(records, warnings)
    out.files = len(files)
    if out.trials.is_empty():
        raise InputError(f"none of the {len(files)} trial records is usable; first problem: "
                         f"{warnings[0] if warnings else 'none'}")
    return out


def from_dicts(records: list[tuple[dict, str]], warnings: list[str] | None = None) -> Records:
    """Normalise `(record, file)` pairs into frames; later duplicates of a trial_id lose."""
    warnings = [] if warnings is None else warnings
    trials, checks, gates = [], [], []
    seen: dict[str, str] = {}
    for data, file in records:
        row = _trial_row(data, file, warnings)
        if row is None:
            continue
        if row["trial_id"] in seen:
            warnings.append(f"{file}: duplicate trial_id {row['trial_id']!r} "
                            f"(also in {seen[row['trial_id']]}); skipped")
            continue
        seen[row["trial_id"]] = file
        trials.append(row)
        for gate, reward, items in _gate_items(data, file, warnings):
            gates.append({"trial_id": row["trial_id"], "gate": gate, "reward": reward})
            for check in _checks(items, file, gate, warnings):
                checks.append({"trial_id": row["trial_id"], "task": row["task"],
                               "config": row["config"], "gate": gate, **check})
    return Records(pl.DataFrame(trials, schema=TRIAL_SCHEMA, orient="row"),
                   pl.DataFrame(checks, schema=CHECK_SCHEMA, orient="row"),
                   pl.DataFrame(gates, schema=GATE_SCHEMA, orient="row"), warnings)


def _get(data: dict, *keys: str):
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _number(value, kind=float):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return kind(value)


def _trial_row(data, file: str, warnings: list[str]) -> dict | None:
    if not isinstance(data, dict):
        warnings.append(f"{file}: trial record is not a JSON object; skipped")
        return None
    task, agent = _get(data, "task", "name"), _get(data, "agent", "name")
    status = data.get("status")
    missing = [k for k, v in (("task.name", task), ("agent.name", agent), ("status", status))
               if not isinstance(v, str) or not v]
    if missing:
        warnings.append(f"{file}: partial trial record, missing {', '.join(missing)}; skipped")
        return None
    if status not in STATUSES:
        warnings.append(f"{file}: unknown status {status!r} (valid: {', '.join(STATUSES)}); "
                        "skipped")
        return None
    if status == "cancelled":
        warnings.append(f"{file}: cancelled trial is not scored; ignored")
        return None
    trial_id = data.get("trial_id")
    if not isinstance(trial_id, str) or not trial_id:
        trial_id = Path(file).parent.name
        warnings.append(f"{file}: missing trial_id; using the directory name {trial_id!r}")
    reward = _number(data.get("reward"))
    if "reward" not in data:
        warnings.append(f"{file}: missing reward; counted as 0")
    elif data["reward"] is not None and reward is None:
        warnings.append(f"{file}: reward {data['reward']!r} is not a number; counted as 0")
    model = _get(data, "agent", "model")
    model = model if isinstance(model, str) and model else None
    risk = data.get("risk") if isinstance(data.get("risk"), dict) else {}
    retries = data.get("retries") if isinstance(data.get("retries"), list) else []
    return {
        "trial_id": trial_id, "campaign": data.get("campaign"), "task": task,
        "task_path": _get(data, "task", "path"), "layer": _get(data, "task", "layer"),
        "difficulty": _get(data, "task", "difficulty"), "agent": agent, "model": model,
        "config": config_key(agent, model), "attempt": _number(data.get("attempt"), int),
        "substrate": data.get("substrate"), "status": status, "reward": reward,
        "tokens_input": _number(_get(data, "tokens", "input"), int),
        "tokens_output": _number(_get(data, "tokens", "output"), int),
        "tokens_cache": _number(_get(data, "tokens", "cache"), int),
        "cost_usd": _number(data.get("cost_usd")), "n_commands": _number(data.get("n_commands"),
                                                                          int),
        "n_retries": len(retries),
        **{f"risk_{t}": _number(risk.get(t), int) or 0 for t in RISK_TYPES},
        "finished_at": data.get("finished_at"), "file": file,
    }


def _gate_items(data: dict, file: str, warnings: list[str]):
    """Yield `(gate, reward, raw checks)`; the top-level `checks` are the immediate gate's."""
    gates = data.get("gates")
    if gates is not None and not isinstance(gates, dict):
        warnings.append(f"{file}: gates is not a mapping; ignored")
        gates = None
    gates = dict(gates or {})
    immediate = gates.get("immediate") if isinstance(gates.get("immediate"), dict) else {}
    if data.get("checks") is not None and immediate.get("checks") is None:
        gates["immediate"] = {**immediate, "checks": data["checks"]}
        gates["immediate"].setdefault("reward", data.get("reward"))
    for gate, body in gates.items():
        if not isinstance(body, dict):
            warnings.append(f"{file}: gate {gate!r} is not a mapping; ignored")
            continue
        yield gate, _number(body.get("reward")), body.get("checks")


def _checks(items, file: str, gate: str, warnings: list[str]):
    """Normalise a check list or the legacy `{name: passed}` mapping into check dicts."""
    if items is None:
        return
    if isinstance(items, dict):
        items = [{"name": name, "passed": passed} for name, passed in items.items()]
    if not isinstance(items, list):
        warnings.append(f"{file}: checks of gate {gate!r} are neither a list nor a mapping; "
                        "ignored")
        return
    for item in items:
        name = item.get("name") if isinstance(item, dict) else None
        passed = item.get("passed") if isinstance(item, dict) else None
        if not isinstance(name, str) or not isinstance(passed, (bool, int)):
            warnings.append(f"{file}: malformed check {item!r} in gate {gate!r}; ignored")
            continue
        phase, scored = item.get("phase"), item.get("scored")
        yield {"name": name, "passed": bool(passed), "scored": scored is None or bool(scored),
               "phase": phase.lower() if isinstance(phase, str) else None,
               "weight": _number(item.get("weight"))}
