"""Trajectory JSONL I/O and the ATIF export."""

from __future__ import annotations

import json

import pytest

from harness.errors import InputError
from harness.trajectory import (
    ATIF_SCHEMA_VERSION,
    CommandRecord,
    append_record,
    read_trajectory,
    to_atif,
    write_atif,
)


def _rec(cmd: str, **kw) -> CommandRecord:
    return CommandRecord(ts="2025-01-01T00:00:00Z", node=kw.pop("node", "node1"), cmd=cmd, **kw)


def test_append_and_read_round_trip(tmp_path):
    path = tmp_path / "agent" / "trajectory.jsonl"
    recs = [_rec("ls", exit=0, stdout_tail="a\n", pid=10, ppid=1, uid=0, cwd="/root"),
            _rec("reboot", node="node2", source="agent-child")]
    for rec in recs:
        append_record(path, rec)
    assert read_trajectory(path) == recs
    assert len(path.read_text().splitlines()) == 2


def test_truncated_last_line_is_tolerated_and_next_append_starts_fresh(tmp_path):
    path = tmp_path / "trajectory.jsonl"
    append_record(path, _rec("ls"))
    with open(path, "a") as fh:
        fh.write('{"ts": "2025-01-01T00:00:01Z", "node": "n", "cm')
    assert [r.cmd for r in read_trajectory(path)] == ["ls"]
    append_record(path, _rec("pwd"))
    assert [r.cmd for r in read_trajectory(path)] == ["ls", "pwd"]


def test_unknown_keys_are_ignored_and_bad_records_rejected(tmp_path):
    path = tmp_path / "trajectory.jsonl"
    path.write_text('{"ts": "t", "node": "n", "cmd": "ls", "future": 1}\n[1, 2]\n')
    with pytest.raises(InputError, match="line 2"):
        read_trajectory(path)
    path.write_text('{"ts": "t", "node": "n"}\n')
    with pytest.raises(InputError, match="cmd"):
        read_trajectory(path)


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_trajectory(tmp_path / "nope.jsonl")


def test_to_atif_shape():
    recs = [_rec("cat /etc/hosts", exit=0, stdout_tail="127.0.0.1 localhost", cwd="/"),
            _rec("false", node="node2", exit=1, stderr_tail="boom")]
    doc = to_atif(recs, trial_id="t-1", agent_name="codex", model="gpt-x",
                  instruction="Fix the cluster.", final_metrics={"total_cost_usd": 0.5})
    assert doc["schema_version"] == ATIF_SCHEMA_VERSION == "ATIF-v1.4"
    assert doc["session_id"] == "t-1"
    assert doc["agent"] == {"name": "codex", "version": "unknown", "model_name": "gpt-x"}
    user, first, second = doc["steps"]
    assert user == {"step_id": 1, "source": "user", "message": "Fix the cluster."}
    assert first["step_id"] == 2 and first["source"] == "agent" and first["message"] == ""
    call = first["tool_calls"][0]
    assert call == {"tool_call_id": "call_1", "function_name": "shell",
                    "arguments": {"command": "cat /etc/hosts"}}
    assert first["observation"] == {"results": [{"source_call_id": "call_1",
                                                 "content": "127.0.0.1 localhost"}]}
    assert first["extra"] == {"node": "node1", "exit": 0, "recorded_by": "agent", "cwd": "/"}
    assert second["observation"]["results"][0]["content"] == "boom"
    assert doc["final_metrics"]["total_steps"] == 3
    assert doc["final_metrics"]["total_cost_usd"] == 0.5
    assert doc["final_metrics"]["extra"] == {"n_commands": 2, "n_failed": 1,
                                             "nodes": ["node1", "node2"]}
    json.dumps(doc)


def test_to_atif_without_model_omits_model_name():
    doc = to_atif([], trial_id="t", agent_name="nop", model=None, instruction="x")
    assert "model_name" not in doc["agent"] and len(doc["steps"]) == 1


def test_write_atif_is_atomic(tmp_path):
    path = tmp_path / "agent" / "trajectory.atif.json"
    write_atif(path, {"a": 1})
    write_atif(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == [path.name]
