"""Loading trial records: discovery, dedupe, normalisation, warnings instead of crashes."""

from __future__ import annotations

import json

import pytest
from analysis_fixtures import check, make_record

from analysis.load import discover, load
from harness.errors import InputError


def test_discovers_campaign_trial_dir_and_file(write_run, tmp_path):
    run = write_run([make_record("t1"), make_record("t2")])
    trial = run / "trials" / "t1__oracle__none__1"
    assert len(discover([run])) == 2
    assert len(discover([trial])) == 1
    assert len(discover([trial / "result.json"])) == 1
    assert len(discover([tmp_path / "runs"])) == 2


def test_same_dir_twice_and_copied_trial_dedupe_by_trial_id(write_run, tmp_path):
    run = write_run([make_record("t1"), make_record("t2")])
    copy = tmp_path / "copy" / "result.json"
    copy.parent.mkdir()
    copy.write_text(json.dumps(make_record("t1")))
    records = load([run, run, copy.parent])
    assert records.trials.height == 2
    assert any("duplicate trial_id" in w and str(copy) in w for w in records.warnings)


def test_missing_dir_and_empty_dir_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such run directory"):
        load([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no result.json found"):
        load([tmp_path / "empty"])


def test_unreadable_and_partial_records_warn_with_their_file(write_run):
    run = write_run([make_record("t1"), make_record("t2", trial_id="partial")])
    bad = run / "trials" / "broken" / "result.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    partial = run / "trials" / "partial" / "result.json"
    data = json.loads(partial.read_text())
    del data["task"], data["reward"]
    partial.write_text(json.dumps(data))
    records = load([run])
    assert records.trials["task"].to_list() == ["t1"]
    assert any(str(bad) in w and "unreadable" in w for w in records.warnings)
    assert any(str(partial) in w and "task.name" in w for w in records.warnings)


def test_missing_optional_keys_do_not_crash(write_run):
    minimal = {"trial_id": "m", "task": {"name": "t"}, "agent": {"name": "a"},
               "status": "failed"}
    records = load([write_run([minimal])])
    row = records.trials.row(0, named=True)
    assert row["reward"] is None and row["cost_usd"] is None and row["risk_destructive_fs"] == 0
    assert any("missing reward" in w for w in records.warnings)


def test_cancelled_is_ignored_with_a_warning(write_run):
    run = write_run([make_record("t1"), make_record("t2", reward=None, status="cancelled")])
    records = load([run])
    assert records.trials["task"].to_list() == ["t1"]
    assert any("cancelled" in w and "result.json" in w for w in records.warnings)


def test_legacy_check_mapping_is_scored(write_run):
    rec = make_record("t1", reward=0.5)
    rec["checks"] = {"a": True, "b": False}
    del rec["gates"]
    records = load([write_run([rec])])
    checks = records.checks.sort("name")
    assert checks["name"].to_list() == ["a", "b"]
    assert checks["scored"].to_list() == [True, True]
    assert checks["gate"].to_list() == ["immediate", "immediate"]


def test_gates_are_read_and_top_level_checks_not_doubled(write_run):
    immediate = [check("key matches cert", True), check("diag", False, scored=False)]
    rec = make_record("t1", reward=1.0, checks=immediate, model="m")
    rec["gates"]["durability"] = {"reward": 0.0, "checks": [check("fix survives restart", False)]}
    records = load([write_run([rec])])
    assert records.checks.height == 3
    assert sorted(records.checks["gate"].to_list()) == ["durability", "immediate", "immediate"]
    assert records.gates.height == 2
    assert records.trials["config"].to_list() == ["oracle/m"]


def test_no_usable_record_is_an_input_error(write_run):
    run = write_run([make_record("t1", reward=None, status="cancelled")])
    with pytest.raises(InputError, match="none of the 1 trial records is usable.*cancelled"):
        load([run])
