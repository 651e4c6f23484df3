"""The `leaderboard`, `report` and `weights derive` commands, end to end on tmp runs."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest
import typer
from analysis_fixtures import check, make_record
from typer.testing import CliRunner

from harness.cli.analysis import register
from harness.errors import InputError


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def records() -> list[dict]:
    checks_ok = [check("web answers 200", True), check("fix survives restart", True),
                 check("stale marker gone", True)]
    checks_bad = [check("web answers 200", True), check("fix survives restart", False),
                  check("stale marker gone", False)]
    return [make_record("t1", agent="claude", model="sonnet", reward=1.0, checks=checks_ok),
            make_record("t1", agent="claude", model="sonnet", attempt=2, reward=1 / 3,
                        checks=checks_bad),
            make_record("t2", agent="claude", model="sonnet", reward=0.0, cost_usd=1.0),
            make_record("t1", agent="nop", reward=0.0, checks=checks_bad, cost_usd=0.0)]


def invoke(app, *args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_leaderboard_table(app, write_run):
    result = invoke(app, "leaderboard", write_run(records()))
    assert result.exit_code == 0, result.output
    assert "claude/sonnet" in result.stdout and "50.0% (1/2)" in result.stdout
    assert "Durability" in result.stdout


def test_leaderboard_json_csv_parquet(app, write_run, tmp_path):
    csv, parquet = tmp_path / "board.csv", tmp_path / "board.parquet"
    result = invoke(app, "leaderboard", write_run(records()), "--json", "--csv", csv,
                    "--parquet", parquet, "--tau", 1, "--tau", 0.5)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    top = doc["leaderboard"][0]
    assert top["config"] == "claude/sonnet"
    assert top["score"] == pytest.approx(100 * ((1 + 1 / 3) / 2 + 0) / 2)
    assert (top["pass@1_n"], top["trials"], top["bon@0.5_n"]) == (1, 3, 1)
    assert {b["bucket"] for b in doc["lifecycle"]} == {"functional", "durability", "cleanup"}
    assert set(doc["frontier"]) == {"nop", "claude/sonnet"}  # $0 at 0%, $2 at 33%
    assert pl.read_csv(csv)["config"].to_list() == ["claude/sonnet", "nop"]
    assert pl.read_parquet(parquet).height == 2


def test_leaderboard_markdown(app, write_run):
    result = invoke(app, "leaderboard", write_run(records()), "--md")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("## Leaderboard")
    assert "| 1 | claude/sonnet |" in result.stdout


def test_user_mistakes_are_input_errors(app, write_run, tmp_path):
    run = write_run(records())
    for args, text in [((run, "--weights", "heavy"), "unknown weights mode"),
                       ((tmp_path / "missing",), "no such run directory"),
                       ((tmp_path,  "--tasks", tmp_path / "nope"), "no such tasks directory"),
                       ((run, "--tau", 2), "outside (0, 1]")]:
        result = invoke(app, "leaderboard", *args)
        assert isinstance(result.exception, InputError), (args, result.output)
        assert text in str(result.exception)


def test_input_error_is_one_red_line_without_traceback(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = subprocess.run([sys.executable, "-c", "from harness.cli.main import main; main()",
                           "leaderboard", str(empty)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    stderr = " ".join(proc.stderr.split())
    assert stderr.startswith("error:") and "no result.json found" in stderr
    assert "Traceback" not in stderr


def test_weights_derive_then_frozen_leaderboard(app, write_run, task_suite):
    run = write_run(records())
    tasks = task_suite("t1", "t2")
    result = invoke(app, "weights", "derive", run, "--tasks", tasks)
    assert result.exit_code == 0, result.output
    doc = json.loads((tasks / "t1" / "tests" / "weights.json").read_text())
    assert doc["version"] == 1 and doc["population"]["trials"] == 3
    invoke(app, "weights", "derive", run, "--tasks", tasks)
    assert json.loads((tasks / "t1" / "tests" / "weights.json").read_text())["version"] == 2
    result = invoke(app, "leaderboard", run, "--tasks", tasks, "--json")
    assert json.loads(result.stdout)["weights"] == "frozen"


def test_warnings_name_the_file(app, write_run):
    run = write_run(records())
    bad = run / "trials" / "bad" / "result.json"
    bad.parent.mkdir()
    bad.write_text("{")
    result = invoke(app, "leaderboard", run, "--json")
    assert result.exit_code == 0
    assert str(bad) in result.stderr and "unreadable" in result.stderr


def test_report_writes_self_contained_html(app, write_run, tmp_path):
    out = tmp_path / "out" / "report.html"
    result = invoke(app, "report", write_run(records()), "-o", out)
    assert result.exit_code == 0, result.output
    html = out.read_text()
    for chart in ("heatmap", "funnel", "scatter"):
        assert f'id="{chart}"' in html
    assert "https://" not in html and "src=" not in html


def test_breakdowns_by_layer_gate_task_and_check(app, write_run):
    result = invoke(app, "leaderboard", write_run(records()), "--md", "--by", "layer",
                    "--by", "gate", "--by", "task", "--by", "check", "--weights", "derive")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for title in ("Check pass rate by layer", "by gate", "by task", "p_c and weight w_c"):
        assert title in out
    assert "| t1 | immediate | stale marker gone | Cleanup | yes | 0.333 (1/3) | 0.767 |" in out
    bad = invoke(app, "leaderboard", write_run(records()), "--by", "colour")
    assert isinstance(bad.exception, InputError) and "valid: bucket" in str(bad.exception)
