"""The seed suite on Docker as one campaign (markers: docker, slow): every docker task of
tasks/ with the oracle (reward 1.0) and nop (reward < 0.5) agents, at the concurrency this
machine allows, images shared through the engine's build cache; prints the table.

The three tasks of `test_docker_trials.SEED_DOCKER` are left out here: that test runs their
oracle and nop already (with closer checks of the trial directory). The VM tasks run in
`test_libvirt_campaign` / `test_libvirt_trials`. The naive replays (`tests/naive.yaml`) are
not run in CI (they were run once per task; see tasks/SUITE.md)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from harness.task import discover_tasks, load_task
from tests.conftest import docker_ready
from tests.integration.test_campaign import cli, leftovers, results
from tests.integration.test_docker_trials import SEED_DOCKER

pytestmark = [pytest.mark.docker, pytest.mark.slow,
              pytest.mark.skipif(docker_ready() is not None, reason=str(docker_ready()))]

REPO = Path(__file__).resolve().parents[2]
NAME = "pytest-suite-docker"
CONCURRENCY = 3  # 2 cores: trials spend much of their time waiting on boots and services


def suite_tasks() -> list[Path]:
    tasks = [load_task(p) for p in discover_tasks(REPO / "tasks")]
    return sorted(t.path for t in tasks if t.env.type == "docker" and t.name not in SEED_DOCKER)


@pytest.mark.timeout(2400)
def test_suite_docker_campaign_oracle_passes_nop_fails(tmp_path, capsys):
    tasks = suite_tasks()
    assert len(tasks) >= 10
    camp = tmp_path / "suite.yaml"
    camp.write_text(yaml.safe_dump({
        "name": NAME, "tasks": [str(t) for t in tasks],
        "agents": [{"name": "oracle"}, {"name": "nop"}], "attempts": 1, "retries": 1,
        "concurrency": {"total": CONCURRENCY, "per_substrate": {"docker": CONCURRENCY}}}))
    run_dir = tmp_path / "run"
    start = time.monotonic()
    try:
        res = cli("campaign", "apply", str(camp), "--out", str(run_dir), "--json",
                  timeout=2300)
        elapsed = time.monotonic() - start
        recs = results(run_dir)
        rows = sorted((r["task"]["name"], r["agent"]["name"], r["status"], r["reward"],
                       sum(t["seconds"] for t in r["timings"].values()))
                      for r in recs.values())
        with capsys.disabled():
            print(f"\nsuite campaign: {len(recs)} trials, concurrency {CONCURRENCY}, "
                  f"{elapsed:.0f} s")
            for task, agent, status, reward, wall in rows:
                print(f"  {task:34s} {agent:7s} {status:13s} "
                      f"{'-' if reward is None else f'{reward:.3f}':>6s} {wall:6.1f} s")
        assert res.returncode == 0, res.stderr[-2000:]
        assert len(recs) == 2 * len(tasks)
        for r in recs.values():
            what = (r["trial_id"], r["error"], [c for c in r["checks"] if not c["passed"]])
            if r["agent"]["name"] == "oracle":
                assert (r["status"], r["reward"]) == ("passed", 1.0), what
            else:
                assert r["status"] == "failed" and r["reward"] < 0.5, what
            assert r["leaks"] == [], r["trial_id"]
            phases = {c.get("phase") for c in r["checks"] if c.get("scored", True)}
            assert "functional" in phases, (r["trial_id"], phases)
    finally:
        cli("gc", "--campaign", NAME)
    assert leftovers(NAME) == 0
