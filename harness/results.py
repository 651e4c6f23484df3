"""The trial record (`result.json`, DESIGN section 4) and atomic JSON writes."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1
Status = Literal["passed", "failed", "agent_timeout", "agent_error", "verifier_error",
                 "setup_error", "uncovered", "tampered", "cancelled"]
RISK_TYPES = ("destructive_fs", "disk_raid_lvm", "network_disruption", "privilege_bypass",
              "unsafe_restart", "cross_service", "harness_probing")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temp file in the same dir, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_jsonl(path: Path, obj: dict[str, Any]) -> None:
    """Append one JSON line with a single write, then fsync (journals and ledgers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(obj, default=str) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


class TaskRef(BaseModel):
    name: str
    path: str
    sha256: str
    layer: str | None = None
    difficulty: str | None = None
    category: str | None = None
    tags: list[str] = Field(default_factory=list)


class AgentRef(BaseModel):
    name: str
    model: str | None = None
    version: str


class TrialRecord(BaseModel):
    """One trial's result; analysis reads only these."""

    schema_version: int = SCHEMA_VERSION
    trial_id: str
    campaign: str
    task: TaskRef
    agent: AgentRef
    attempt: int = 1
    substrate: str
    status: Status
    reward: float | None = None
    gates: dict[str, dict[str, Any]] = Field(default_factory=dict)
    checks: list[dict[str, Any]] = Field(default_factory=list)
    timings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    tokens: dict[str, int | None] = Field(
        default_factory=lambda: {"input": None, "output": None, "cache": None})
    cost_usd: float | None = None
    n_commands: int = 0
    risk: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(RISK_TYPES, 0))
    retries: list[dict[str, Any]] = Field(default_factory=list)
    error: dict[str, Any] | None = None
    leaks: list[str] = Field(default_factory=list)
    fingerprint: str | None = None
    harness_version: str
    started_at: str | None = None
    finished_at: str | None = None

    def write(self, path: Path, redactor=None) -> None:
        """Write atomically; every string redacted first when a `redactor` is given."""
        data = self.model_dump(mode="json")
        write_json_atomic(path, redactor.obj(data) if redactor else data)
