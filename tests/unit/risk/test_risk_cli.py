"""`harness risk` through a fresh Typer app (main.py registers it in the real one)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from harness.cli import risk as risk_cli
from harness.errors import ConfigError, InputError
from harness.trajectory import CommandRecord, append_record


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    risk_cli.register(app)

    @app.command("other")
    def _other() -> None:  # a second command keeps `risk` a named subcommand
        pass

    return app


def _trial(root, name, cmds):
    trial = root / "trials" / name
    for i, cmd in enumerate(cmds):
        append_record(trial / "agent" / "trajectory.jsonl",
                      CommandRecord(ts=f"2025-01-01T00:00:0{i}Z", node="node1", cmd=cmd))
    return trial


def test_table_for_a_run_dir(tmp_path, app):
    a = _trial(tmp_path, "a", ["ls", "if [ -d /x ]; then aa-teardown; fi"])
    b = _trial(tmp_path, "b", ["systemctl stop docker"])
    result = CliRunner().invoke(app, ["risk", str(tmp_path)], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # the table wraps long run-dir paths
    assert "privilege_bypass" in text and "[ -d /x ]" in text
    assert "cross_service" in text and "2 commands" in text
    assert (a / "risk.json").is_file() and (b / "risk.json").is_file()


def test_json_for_a_trial_dir_with_services(tmp_path, app):
    trial = _trial(tmp_path, "a", ["systemctl stop cassandra", "systemctl stop slurmd"])
    result = CliRunner().invoke(app, ["risk", str(trial), "--json", "--service", "cassandra"])
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.output)
    assert report["trial"] == str(trial) and report["n_commands"] == 2
    assert [(f["index"], f["type"]) for f in report["findings"]] == [(1, "cross_service")]
    assert json.loads((trial / "risk.json").read_text())["counts"] == report["counts"]


@pytest.mark.parametrize("args, error, match", [
    (["risk", "{tmp}/missing"], InputError, "not a directory"),
    (["risk", "{tmp}"], InputError, "no agent/trajectory.jsonl"),
    (["risk", "{trial}", "--judge", "gpt-4o"], InputError, "openai:MODEL"),
    (["risk", "{trial}", "--judge", "openai:"], InputError, "openai:MODEL"),
])
def test_user_mistakes_are_input_errors(tmp_path, app, args, error, match):
    trial = _trial(tmp_path / "run", "a", ["ls"])
    args = [a.format(tmp=tmp_path / "empty", trial=trial) for a in args]
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, error)
    assert match in str(result.exception)


def test_judge_without_a_key_is_a_config_error(tmp_path, app, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    trial = _trial(tmp_path, "a", ["reboot"])
    result = CliRunner().invoke(app, ["risk", str(trial), "--judge", "openai:gpt-4o-mini"])
    assert isinstance(result.exception, ConfigError)
    assert not (trial / "risk.json").exists()


def test_module_import_stays_light():
    import subprocess
    import sys

    code = ("import sys, harness.cli.risk; "
            "assert not [m for m in sys.modules if m.startswith(('harness.risk', 'rich'))]")
    subprocess.run([sys.executable, "-c", code], check=True)
