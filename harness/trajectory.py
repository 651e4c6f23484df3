"""Agent trajectories: one JSON line per command an agent ran, and their ATIF export.

`<trial>/agent/trajectory.jsonl` is appended to while the agent runs, one `CommandRecord`
per line, each written with a single `O_APPEND` write then fsynced, so a crash loses at
most the line being written. `read_trajectory` skips such crash residue (a line that is not
JSON, normally the truncated last one) but rejects JSON that is not a record. `to_atif`
renders the Agent Trajectory Interchange Format used by Harbor and Terminal-Bench: one
user step holding the instruction, then one agent step per command with a `shell` tool
call and its output as the observation.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from harness.errors import InputError
from harness.results import write_json_atomic

ATIF_SCHEMA_VERSION = "ATIF-v1.4"
SOURCES = ("agent", "agent-child", "logger")


@dataclass(frozen=True)
class CommandRecord:
    """One command run on a node.

    `ts` is ISO 8601; `source` says who recorded it: `agent` (the agent's own tool call),
    `agent-child` (a process the agent spawned, seen by the node's command logger) or
    `logger` (the command logger, no parent known). Output tails are truncated by the
    recorder, not here.
    """

    ts: str
    node: str
    cmd: str
    exit: int | None = None
    stdout_tail: str | None = None
    stderr_tail: str | None = None
    source: str = "agent"
    pid: int | None = None
    ppid: int | None = None
    uid: int | None = None
    cwd: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object, where: str = "record") -> CommandRecord:
        """Build a record from parsed JSON, ignoring unknown keys (newer writers)."""
        if not isinstance(data, dict):
            raise InputError("expected a JSON object per line", key=where)
        missing = [k for k in ("ts", "node", "cmd") if not isinstance(data.get(k), str)]
        if missing:
            raise InputError(f"missing or non-string {', '.join(missing)}", key=where)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def append_record(path: str | os.PathLike, rec: CommandRecord) -> None:
    """Append one record as a JSON line (one write, then fsync); create parents as needed.

    If a previous writer died mid-line, the new record starts on a fresh line so that only
    the residue is lost.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(rec.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = "\n" + line
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_trajectory(path: str | os.PathLike) -> list[CommandRecord]:
    """All records of a trajectory file; lines that are not JSON (crash residue) skipped."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise InputError("trajectory file not found", file=str(path)) from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        try:
            records.append(CommandRecord.from_dict(data, where=f"line {number}"))
        except (InputError, TypeError) as exc:
            raise InputError(str(exc), file=str(path)) from None
    return records


def to_atif(records: Sequence[CommandRecord], *, trial_id: str, agent_name: str,
            model: str | None, instruction: str, agent_version: str = "unknown",
            final_metrics: dict | None = None) -> dict:
    """An ATIF document for a trial: the instruction, then one agent step per command.

    `final_metrics` (tokens, cost as ATIF names them: `total_prompt_tokens`,
    `total_cost_usd`...) is merged over the computed `total_steps` and command counts.
    """
    steps: list[dict] = [{"step_id": 1, "source": "user", "message": instruction}]
    for number, rec in enumerate(records, start=1):
        call_id = f"call_{number}"
        extra = {k: v for k, v in (("node", rec.node), ("exit", rec.exit),
                                   ("recorded_by", rec.source), ("pid", rec.pid),
                                   ("ppid", rec.ppid), ("uid", rec.uid), ("cwd", rec.cwd))
                 if v is not None}
        steps.append({
            "step_id": len(steps) + 1,
            "timestamp": rec.ts,
            "source": "agent",
            "message": "",
            "tool_calls": [{"tool_call_id": call_id, "function_name": "shell",
                            "arguments": {"command": rec.cmd}}],
            "observation": {"results": [{"source_call_id": call_id,
                                         "content": _output(rec)}]},
            "extra": extra,
        })
    agent = {"name": agent_name, "version": agent_version}
    if model:
        agent["model_name"] = model
    metrics = {
        "total_steps": len(steps),
        "extra": {"n_commands": len(records),
                  "n_failed": sum(1 for r in records if r.exit not in (0, None)),
                  "nodes": sorted({r.node for r in records})},
    }
    metrics.update(final_metrics or {})
    return {
        "schema_version": ATIF_SCHEMA_VERSION,
        "session_id": trial_id,
        "agent": agent,
        "notes": "Steps are the shell commands the harness recorded on the nodes; "
                 "step.extra holds the node, exit status and recorder.",
        "steps": steps,
        "final_metrics": metrics,
    }


def write_atif(path: str | os.PathLike, doc: dict) -> None:
    """Write an ATIF document atomically (temporary file, fsync, `os.replace`)."""
    write_json_atomic(Path(path), doc)


def _output(rec: CommandRecord) -> str:
    parts = [p for p in (rec.stdout_tail, rec.stderr_tail) if p]
    return "\n".join(parts)
