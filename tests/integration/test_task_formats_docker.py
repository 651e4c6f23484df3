"""Harbor-format tasks on the docker substrate, for real (marker: docker): the image WORKDIR,
`[solution.env]` / `[verifier.env]`, size strings, and each network mode in the phase it
is set for, against a stand-in "outside" host.

The outside (`tests/integration/outside.py`): two HTTP servers in a network namespace this
test creates, reached only through the trial's egress path; a "neighbour" stands in for
another trial, a listener on the host for the host itself.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.agents import get_agent
from harness.substrates import get_substrate
from harness.substrates.base import TrialSpec
from harness.task import load_task
from harness.trial import Trial, make_trial_id
from tests.conftest import docker_ready, labeled
from tests.integration.outside import Outside

pytestmark = [pytest.mark.docker,
              pytest.mark.skipif(docker_ready() is not None, reason=str(docker_ready())),
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

TASK = Path(__file__).resolve().parent / "tasks" / "harbor-egress"


def variant(tmp_path: Path, world: Outside, name: str, edit=lambda s: s) -> Path:
    """A copy of the task with its targets written and task.toml edited by `edit`."""
    dest = tmp_path / name
    shutil.copytree(TASK, dest)
    targets = (f"OUTSIDE_A={world.a}\nOUTSIDE_B={world.b}\nHOST_ADDR={world.gw}\n"
               f"HOST_PORT={world.host_port}\nNEIGHBOUR={world.neighbour}\n")
    for part in ("solution", "tests"):
        (dest / part / "targets.env").write_text(targets)
    toml = (dest / "task.toml").read_text().replace('"outside-a.invalid"', f'"{world.a}"')
    (dest / "task.toml").write_text(edit(toml))
    return dest


def reach(rec) -> dict[str, bool]:
    return {c["name"]: c["passed"] for c in rec.checks if not c["scored"]}


def test_harbor_task_workdir_env_tables_and_network_modes(outside, tmp_path):
    allowlist_then_public = variant(tmp_path, outside, "harbor-allowlist")

    def public_then_none(toml: str) -> str:
        toml = toml.replace('network_mode = "no-network"', "allow_internet = true")
        toml = toml.replace('[agent.network]\nmode = "allowlist"',
                            '[agent.network]\nmode = "public"')
        return toml.replace('network_mode = "public"', 'network_mode = "no-network"')

    public_then_closed = variant(tmp_path, outside, "harbor-public", public_then_none)
    trials = []
    for i, path in enumerate((allowlist_then_public, public_then_closed)):
        task = load_task(path)
        assert task.format == "harbor" and task.env.memory_mb == 512
        trial_id = make_trial_id(f"{task.name}-{i}", "oracle", 1)
        trials.append(Trial(task=task, agent=get_agent("oracle"),
                            substrate=get_substrate("docker"),
                            root=tmp_path / "trials" / trial_id, trial_id=trial_id,
                            campaign="pytest"))

    async def both():
        return await asyncio.gather(*(t.run() for t in trials))

    first, second = asyncio.run(both())
    for rec in (first, second):
        assert rec.status == "passed" and rec.reward == 1.0, (rec.error, rec.checks)
        assert rec.leaks == [] and labeled(rec.trial_id) == []
    assert reach(first) == {
        "agent reaches outside-a": True, "agent reaches outside-b": False,
        "agent reaches host": False, "agent reaches neighbour": False,
        "verifier reaches outside-a": True, "verifier reaches outside-b": True,
        "verifier reaches host": False, "verifier reaches neighbour": False}
    assert reach(second) == {
        "agent reaches outside-a": True, "agent reaches outside-b": True,
        "agent reaches host": False, "agent reaches neighbour": False,
        "verifier reaches outside-a": False, "verifier reaches outside-b": False,
        "verifier reaches host": False, "verifier reaches neighbour": False}
    proc = subprocess.run(["nft", "-j", "list", "set", "inet", "harness", "egress_allow"],
                          capture_output=True, text=True)
    assert outside.a not in proc.stdout  # torn down: the trial's elements are gone


IB_TASK = Path(__file__).resolve().parent / "tasks" / "infrabench-cluster"
SSH_IMAGE = ("FROM debian:bookworm\nRUN apt-get update -q && DEBIAN_FRONTEND=noninteractive "
             "apt-get install -y -q --no-install-recommends openssh-server openssh-client "
             "&& rm -rf /var/lib/apt/lists/*\n")


def test_infrabench_runtime_on_docker_nodes_with_sshd(tmp_path):
    """The InfraBench vm-cluster test task as a docker task whose image has an SSH server:
    bootstrap.sh on the primary only, root SSH to node1, syscraft helpers without
    arguments under set -euo pipefail (the VM variant is test_task_formats_vm.py)."""
    from harness.errors import InputError

    task_dir = tmp_path / "infrabench-docker"
    shutil.copytree(IB_TASK, task_dir)
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text().replace('type = "vm-cluster"', 'type = "docker"')
                    .replace('vm_backend = "libvirt"\n', ""))
    (task_dir / "environment" / "Dockerfile").write_text(SSH_IMAGE)
    task = load_task(task_dir)
    assert task.format == "infrabench"
    sub = get_substrate("docker")
    trial_id = make_trial_id(task.name, "oracle", 1)
    try:
        sub.prepare(TrialSpec(trial_id, "pytest", task, tmp_path), log=lambda m: None)
    except InputError as exc:  # no Debian mirror reachable from image builds here
        pytest.skip(f"cannot build an image with openssh-server: {exc}")
    trial = Trial(task=task, agent=get_agent("oracle"), substrate=sub,
                  root=tmp_path / "trials" / trial_id, trial_id=trial_id, campaign="pytest")
    rec = asyncio.run(trial.run())
    assert rec.status == "passed" and rec.reward == 1.0, (rec.error, rec.checks)
    assert rec.leaks == [] and labeled(trial_id) == []
