"""Capacity: `harness run` and `campaign apply` refuse a trial no host could hold with the
same check and the same message, on every substrate (containers too: their limits must fit
the host), before anything is built or provisioned."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.placement import Demand, HostPools, default_hosts
from harness.trial.adhoc import run_one

SEED = Path(__file__).resolve().parents[2] / "tasks" / "hello-docker"


def big_task(tmp_path: Path) -> Path:
    task = tmp_path / "big"
    shutil.copytree(SEED, task)
    toml = task / "task.toml"
    nodes = "".join(f'\n[[environment.nodes]]\nname = "n{i}"\nmemory_mb = 8192\n'
                    for i in range(7))
    toml.write_text(toml.read_text() + nodes)
    return task


def test_harness_run_refuses_what_no_host_holds_before_building(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "home"))
    with pytest.raises(InputError) as err:
        run_one(big_task(tmp_path), "nop", out=tmp_path / "runs")
    assert "needs 57344 MiB" in err.value.message and "no host can hold it" in err.value.message
    assert err.value.key == "environment.memory_mb"
    assert not (tmp_path / "runs").exists(), "nothing may be written for a refused trial"


def test_the_same_message_as_the_campaign_queue():
    pools = HostPools(default_hosts())
    with pytest.raises(InputError) as err:
        pools.check([Demand("t1", "big", "nop", "docker", 1, 57344)])
    assert "trial t1 needs 57344 MiB and 1 vCPUs on docker; no host can hold it" \
        in err.value.message
    pools.check([Demand("t2", "small", "nop", "docker", 1, 512)])
