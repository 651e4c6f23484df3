"""Foreign-format and network-mode semantics on VMs, for real (marker: libvirt): an
InfraBench vm-cluster task (bootstrap.sh on the primary only, password-less root SSH from
it to node1, the syscraft cluster-info helpers called without arguments under
`set -euo pipefail`; one cheap 2-node oracle trial) and a VM task with a network mode per
phase (and a storage size beyond the image's) against the stand-in outside
(`tests/integration/outside.py`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.agents import get_agent
from harness.substrates import get_substrate
from harness.substrates.hypervisor import naming
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


EGRESS_TASK = Path(__file__).resolve().parent / "tasks" / "vm-egress"


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_vm_network_modes_per_phase(outside, tmp_path):
    """A VM task with no egress while it is set up, an allowlist (outside A) in the agent
    window and public egress for the verifier, against the stand-in outside: allowed and
    denied per mode; the host, the trial's own gateway and another trial never answer;
    DNS through the trial network's resolver only in public mode."""
    network_modes_trial(outside, tmp_path, get_substrate("vm"))


def network_modes_trial(outside, tmp_path, sub) -> None:
    """The vm-egress task's oracle trial on `sub` (bound to a libvirt host), its checks."""
    task_dir = tmp_path / "vm-egress"
    shutil.copytree(EGRESS_TASK, task_dir)
    targets = (f"OUTSIDE_A={outside.a}\nOUTSIDE_B={outside.b}\nHOST_ADDR={outside.gw}\n"
               f"HOST_PORT={outside.host_port}\nNEIGHBOUR={outside.neighbour}\n")
    for part in ("solution", "tests"):
        (task_dir / part / "targets.env").write_text(targets)
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text().replace('"outside-a.invalid"', f'"{outside.a}"'))
    task = load_task(task_dir)
    trial_id = make_trial_id(task.name, "oracle", 1)
    trial = Trial(task=task, agent=get_agent("oracle"), substrate=sub,
                  root=tmp_path / "trials" / trial_id, trial_id=trial_id, campaign="vm-pytest")
    rec = asyncio.run(trial.run())
    assert rec.status == "passed" and rec.reward == 1.0, (rec.error, rec.checks)
    assert {c["name"]: c["passed"] for c in rec.checks if not c["scored"]} == {
        "agent reaches outside-a": True, "agent reaches outside-b": False,
        "agent reaches host": False, "agent reaches gateway": False,
        "agent reaches neighbour": False, "agent resolves via gateway": False,
        "verifier reaches outside-a": True, "verifier reaches outside-b": True,
        "verifier reaches host": False, "verifier reaches gateway": False,
        "verifier reaches neighbour": False, "verifier resolves via gateway": True}
    assert rec.leaks == [] and sub.leftovers(trial=trial_id) == []
    proc = subprocess.run(["nft", "-j", "list", "set", "inet", "harness", "egress_public"],
                          capture_output=True, text=True)
    assert naming.bridge_name(trial_id) not in proc.stdout  # torn down: no egress left
