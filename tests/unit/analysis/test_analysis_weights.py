"""Difficulty-weighted checks (appendix C) and the frozen sidecar workflow.

Population of task "w": 8 attempts, 8 scored checks. c1..c7 always pass (p = 1,
w = 0.1); the hard check c8 passes in 4 of 8 attempts (p = 0.5, w = 0.6). An attempt that
passes 7 of 8 and misses c8 scores 7/8 = 0.875 uniform and 0.7 / 1.3 = 0.538 weighted.
"""

from __future__ import annotations

import json

import polars as pl
import pytest
from analysis_fixtures import check, make_record

from analysis.load import from_dicts
from analysis.pipeline import analyze, derive_sidecars
from analysis.weights import apply, derive
from harness.errors import InputError

EASY = [f"c{i}" for i in range(1, 8)]


def population(agent: str = "a") -> list[dict]:
    records = []
    for attempt in range(1, 9):
        hard = attempt <= 4
        checks = [check(n, True) for n in EASY] + [check("c8", hard),
                                                   check("diagnostic", False, scored=False)]
        reward = 1.0 if hard else 0.875
        records.append(make_record("w", agent=agent, attempt=attempt, reward=reward,
                                   checks=checks))
    return records


def test_seven_of_eight_missing_the_hardest():
    data = from_dicts([(r, "f") for r in population()])
    weights = derive(data.trials, data.checks)
    by_name = dict(zip(weights["name"], weights["w"], strict=True))
    assert by_name["c1"] == pytest.approx(0.1) and by_name["c8"] == pytest.approx(0.6)
    assert "diagnostic" not in by_name
    trials, missing = apply(data.trials, data.checks, weights)
    missed = trials.filter(pl.col("attempt") == 8).row(0, named=True)
    assert missed["recorded_reward"] == 0.875
    assert missed["reward"] == pytest.approx(0.7 / 1.3)
    assert missed["reward"] == pytest.approx(0.53, abs=0.01)
    assert trials.filter(pl.col("attempt") == 1)["reward"][0] == pytest.approx(1.0)
    assert missing.height == 0


def test_scalar_only_tasks_and_zeroed_trials_keep_their_reward():
    scalar = make_record("s", reward=0.3)
    zeroed = make_record("w", attempt=9, reward=0.0,
                         checks=[check(n, True) for n in EASY] + [check("c8", True)])
    data = from_dicts([(r, "f") for r in [*population(), scalar, zeroed]])
    trials, _ = apply(data.trials, data.checks, derive(data.trials, data.checks))
    rewards = dict(zip(trials["trial_id"], trials["reward"], strict=True))
    assert rewards[scalar["trial_id"]] == 0.3
    assert rewards[zeroed["trial_id"]] == 0.0


def test_derive_writes_versioned_sidecars_and_frozen_is_default(write_run, task_suite):
    run = write_run(population())
    tasks = task_suite("w", "other")
    written, _ = derive_sidecars([run], tasks)
    assert [(w["task"], w["version"], w["population"], w["checks"]) for w in written] == [
        ("w", 1, 8, 8)]
    doc = json.loads((tasks / "w" / "tests" / "weights.json").read_text())
    assert doc["version"] == 1 and doc["population"]["trials"] == 8 and doc["derived_at"]
    assert {c["name"]: c["weight"] for c in doc["checks"]}["c8"] == pytest.approx(0.6)
    assert not (tasks / "other" / "tests" / "weights.json").exists()
    written, _ = derive_sidecars([run], tasks)
    assert written[0]["version"] == 2

    result = analyze([run], tasks_dir=tasks)  # task "other" has no trial: it counts 0
    assert result.weights_mode == "frozen"
    assert result.leaderboard["score"][0] == pytest.approx(100 * (4 + 4 * 0.7 / 1.3) / 8 / 2)
    assert analyze([run], tasks_dir=tasks, weights_mode="uniform").leaderboard["score"][0] == (
        pytest.approx(100 * (4 + 4 * 0.875) / 8 / 2))


def test_frozen_scores_do_not_move_when_configurations_are_added(write_run, task_suite):
    run = write_run(population("a"))
    tasks = task_suite("w")
    derive_sidecars([run], tasks)
    before = analyze([run], tasks_dir=tasks).leaderboard["score"][0]
    newcomer = [make_record("w", agent="b", attempt=k, reward=0.875,
                            checks=[check(n, True) for n in EASY] + [check("c8", False)])
                for k in (1, 2, 3)]
    write_run(newcomer)
    frozen = analyze([run], tasks_dir=tasks).leaderboard
    assert frozen.filter(pl.col("config") == "a")["score"][0] == pytest.approx(before)
    derived = analyze([run], tasks_dir=tasks, weights_mode="derive").leaderboard
    assert derived.filter(pl.col("config") == "a")["score"][0] != pytest.approx(before)


def test_check_missing_from_sidecar_gets_max_weight_and_a_warning(write_run, task_suite):
    run = write_run(population())
    tasks = task_suite("w")
    derive_sidecars([run], tasks)
    extra = make_record("w", agent="b", reward=0.5,
                        checks=[check("c1", True), check("brand new", False)])
    write_run([extra])
    result = analyze([run], tasks_dir=tasks)
    assert any("'brand new'" in w and "1.1" in w for w in result.warnings)
    score = result.trials.filter(pl.col("config") == "b")["reward"][0]
    assert score == pytest.approx(0.1 / (0.1 + 1.1))
    table = result.check_table().filter(pl.col("name") == "brand new")
    assert table["w"][0] == pytest.approx(1.1)


def test_weights_mode_errors(write_run):
    run = write_run(population())
    with pytest.raises(InputError, match="unknown weights mode 'heavy'"):
        analyze([run], weights_mode="heavy")
    with pytest.raises(InputError, match="no weights sidecar"):
        analyze([run], weights_mode="frozen")
    assert analyze([run]).weights_mode == "uniform"


def test_task_name_comes_from_task_toml_else_dir_name(write_run, tmp_path):
    root = tmp_path / "suite"
    (root / "dir-a").mkdir(parents=True)
    (root / "dir-a" / "task.toml").write_text('[task]\nname = "w"\n')
    (root / "dir-b").mkdir()
    (root / "dir-b" / "task.toml").write_text("[metadata]\nlayer = 'L2'\n")
    written, _ = derive_sidecars([write_run(population())], root)
    assert written[0]["path"].endswith("dir-a/tests/weights.json")
    result = analyze([tmp_path / "runs"], tasks_dir=root)
    assert result.tasks == ["dir-b", "w"]
