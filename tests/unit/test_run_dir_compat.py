"""A run directory written by the harness before the plug-in redesign (the landed code of
2026-11-30, a real two-trial campaign on Docker: hello-docker with oracle and nop; kept in
tests/data/run-before-redesign, trial files as written) still loads: the leaderboard reads
its records, `campaign status` its plan and journal, and `campaign apply` would resume it
without re-running anything (both trials are done with the fingerprints they were
planned with)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness.campaign import read_plan, trial_state
from harness.campaign.ops import campaign_status
from harness.cli.analysis import register

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "run-before-redesign"


@pytest.fixture
def run_dir(tmp_path) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(FIXTURE, dest)
    return dest


def test_the_leaderboard_reads_an_old_run(run_dir):
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["leaderboard", str(run_dir), "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["config"]: r for r in json.loads(res.output)["leaderboard"]}
    assert rows["oracle"]["score"] == 100.0 and rows["nop"]["score"] == 0.0


def test_status_and_resume_of_an_old_run(run_dir):
    status = campaign_status(run_dir)
    assert (status["state"], status["states"], status["running"]) == (
        "finished", {"passed": 1, "failed": 1}, {}), status
    plan = read_plan(run_dir)
    assert [trial_state(run_dir, t) for t in plan["trials"]] == ["done", "done"]
