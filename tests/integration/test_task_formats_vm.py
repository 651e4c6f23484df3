"""An InfraBench-format vm-cluster task for real (marker: libvirt): bootstrap.sh on the
primary only, password-less root SSH from it to node1, the syscraft cluster-info helpers
called without arguments under `set -euo pipefail`. One cheap 2-node trial (the oracle)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from harness.agents import get_agent
from harness.substrates import get_substrate
from harness.task import load_task
from harness.trial import Trial, make_trial_id
from tests.integration.test_libvirt_substrate import libvirt_unavailable

pytestmark = [pytest.mark.libvirt,
              pytest.mark.skipif(libvirt_unavailable() is not None,
                                 reason=str(libvirt_unavailable()))]

TASK = Path(__file__).resolve().parent / "tasks" / "infrabench-cluster"


def test_infrabench_cluster_bootstrap_on_primary_with_root_ssh(tmp_path):
    task_dir = tmp_path / "infrabench-cluster"
    shutil.copytree(TASK, task_dir)
    task = load_task(task_dir)
    assert task.format == "infrabench" and task.warnings == []
    trial_id = make_trial_id(task.name, "oracle", 1)
    sub = get_substrate("vm-cluster")
    trial = Trial(task=task, agent=get_agent("oracle"), substrate=sub,
                  root=tmp_path / "trials" / trial_id, trial_id=trial_id, campaign="vm-pytest")
    rec = asyncio.run(trial.run())
    assert rec.status == "passed" and rec.reward == 1.0, (rec.error, rec.checks)
    assert rec.leaks == [] and sub.leftovers(trial=trial_id) == []
