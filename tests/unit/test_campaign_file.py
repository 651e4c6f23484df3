"""Campaign files: validation errors name the file and key; ids are deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.campaign import (
    AgentSpec,
    expand,
    load_campaign,
    resolve_tasks,
    trial_id_for,
    write_plan,
)
from harness.errors import ConfigError, InputError, RegistryError
from harness.paths import make_trial_id
from harness.task import discover_tasks, load_task

REPO = Path(__file__).resolve().parents[2]


def camp_file(tmp_path: Path, **doc) -> Path:
    base = {"name": "c1", "tasks": [str(REPO / "tasks/hello-docker")],
            "agents": [{"name": "oracle"}]}
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump({**base, **doc}))
    return path


def test_defaults_and_expansion(tmp_path):
    camp, _ = load_campaign(camp_file(tmp_path, agents=[{"name": "oracle"}, {"name": "nop"}]))
    assert camp.attempts == 3 and camp.retries == 2
    tasks = resolve_tasks(camp, tmp_path)
    trials = expand(camp, tasks)
    assert len(trials) == 6
    assert len({t.trial_id for t in trials}) == 6
    again = expand(camp, tasks)
    assert [t.trial_id for t in trials] == [t.trial_id for t in again]


def test_trial_ids_are_deterministic_and_distinct():
    a = AgentSpec(name="openai", model="gpt-x")
    assert trial_id_for("c", "t", a, 1, 0) == trial_id_for("c", "t", a, 1, 0)
    assert trial_id_for("c", "t", a, 1, 0) != trial_id_for("c", "t", a, 2, 0)
    assert trial_id_for("c", "t", a, 1, 0).startswith("t-openai-gpt-x-1-")


def test_one_trial_id_scheme_for_runs_and_campaigns():
    """`harness run` and a campaign name a trial alike; only the salt differs (drawn, or
    derived from the trial's identity in the campaign)."""
    a = AgentSpec(name="Mini SWE Agent!", model="qwen2.5:0.5b")
    campaign = trial_id_for("c", "Postgres Replica Decommission", a, 2, 0)
    single = make_trial_id("Postgres Replica Decommission", a.name, 2, model=a.model)
    assert campaign.rsplit("-", 1)[0] == single.rsplit("-", 1)[0] \
        == "postgres-replica-decommi-mini-swe-age-qwen2-5-0-5b-2"
    assert make_trial_id("t", "nop", 1) != make_trial_id("t", "nop", 1)  # drawn salts
    assert len(make_trial_id("t" * 80, "a" * 80, 1, model="m" * 80)) <= 63  # a libvirt name


def test_filters_select_by_layer(tmp_path):
    camp, _ = load_campaign(camp_file(tmp_path, tasks=[{"path": str(REPO / "tasks/*"),
                                                        "layer": ["L4"]}]))
    l4 = sorted(p.name for p in discover_tasks(REPO / "tasks")
                if load_task(p).config.metadata.layer == "L4")
    assert "nginx-tls-mismatch" in l4 and "hello-docker" not in l4
    assert sorted(t.name for t in resolve_tasks(camp, tmp_path)) == l4


@pytest.mark.parametrize("doc,err,match", [
    ({"concurrency": 0}, ConfigError, "concurrency.total: must be >= 1 \\(got 0\\)"),
    ({"attempts": 0}, ConfigError, "attempts"),
    ({"colour": "blue"}, ConfigError, "colour: unknown key; valid here: name, tasks"),
    ({"name": "Bad Name"}, ConfigError, "name"),
    ({"agents": [{"name": "oracle", "env": {"KEY": "sk-literal"}}]}, ConfigError,
     "must reference the caller's environment"),
    ({"concurrency": {"total": 2, "per_substrate": {"vm": 0}}}, ConfigError, "must be >= 1"),
    ({"attempts": 100000000}, ConfigError, "attempts: must be <= 100"),
    ({"timeout_multiplier": float("inf")}, ConfigError, "timeout_multiplier"),
    ({"timeout_multiplier": 1000}, ConfigError, "timeout_multiplier: must be <= 100"),
    ({"retries": 10**9}, ConfigError, "retries: must be <= 20"),
    ({"concurrency": {"total": 2, "per_substrat": {}}}, ConfigError,
     "concurrency.per_substrat: unknown key; valid here: total, per_substrate"),
])
def test_bad_campaign_files(tmp_path, doc, err, match):
    with pytest.raises(err, match=match) as exc:
        load_campaign(camp_file(tmp_path, **doc))
    assert str(tmp_path / "campaign.yaml") in str(exc.value)


def test_unknown_task_path(tmp_path):
    camp, _ = load_campaign(camp_file(tmp_path, tasks=["does/not/exist"]))
    with pytest.raises(InputError, match="'does/not/exist' matches no task directory"):
        resolve_tasks(camp, tmp_path)


def test_unknown_agent_lists_valid(tmp_path):
    from harness.campaign.plan import plan_campaign

    with pytest.raises(RegistryError, match="unknown agent 'gpt-magic'; valid: .*oracle"):
        plan_campaign(camp_file(tmp_path, agents=[{"name": "gpt-magic"}]), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_run_dir_of_another_campaign_is_refused(tmp_path):
    camp, text = load_campaign(camp_file(tmp_path))
    trials = expand(camp, resolve_tasks(camp, tmp_path))
    write_plan(tmp_path / "run", camp, text, tmp_path / "campaign.yaml", trials)
    other, text2 = load_campaign(camp_file(tmp_path, name="c2"))
    with pytest.raises(InputError, match="belongs to campaign 'c1', not 'c2'"):
        write_plan(tmp_path / "run", other, text2, tmp_path / "campaign.yaml", trials)


def test_an_agent_listed_twice_is_refused_at_plan_time(tmp_path):
    camp, _ = load_campaign(camp_file(tmp_path, agents=[{"name": "oracle"}, {"name": "nop"},
                                                        {"name": "oracle"}]))
    with pytest.raises(InputError, match=r"agents\[2\] \(oracle\) repeats agents\[0\]"):
        expand(camp, resolve_tasks(camp, tmp_path))
