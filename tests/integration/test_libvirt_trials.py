"""Real VM trials through the normal Trial path: Terraform, SSH, Ansible, verifier, gates,
teardown (marker: libvirt). One VM trial runs at a time; about 10 minutes under TCG.

- vm-fstab-durability: the oracle through `harness run`'s `run_one` (with the real-reboot
  durability gate), and through Trial on a copy of the task without gates an agent that
  calls the model gateway from the VM with curl (Chat Completions, a streamed Messages
  call, one call without the token).
- vm-raid10-slow-member: the oracle the same way (md RAID10 on five data disks, a dm-delay
  member; the oracle's fix must survive the real reboot of the durability gate).
- the real codex CLI, which only looks, through Trial on vm-fstab-durability without gates
  (its bundle copied in over SSH).
- vm-slurm-cgroup-dropin: the same two ways (one-node Slurm whose slurmd cgroup is capped
  by a TasksMax drop-in that a boot-time unit writes again; the real reboot must not
  bring it back).
- ipmi-power-recovery: a kept 2-node trial; bootstrap powers node1 off through its
  virtual BMC from node0 (ipmitool over lanplus), the oracle powers it on the same way;
  then the substrate's own power() (pyghmi client) cycles node1 and node0 sees it.
After each trial no domain, network, pool, disk or BMC process of the trial remains.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.agents import get_agent
from harness.gateway.wiring import plan_for
from harness.substrates import get_substrate
from harness.task import load_task
from harness.trial import Trial, make_trial_id
from tests.conftest import HostListener, host_addresses
from tests.integration.test_libvirt_substrate import libvirt_unavailable

pytestmark = [pytest.mark.libvirt,
              pytest.mark.skipif(libvirt_unavailable() is not None,
                                 reason=str(libvirt_unavailable()))]

REPO = Path(__file__).resolve().parents[2]
PHASES = {"functional", "durability", "cleanup"}


def assert_clean(sub, trial_id: str, root: Path) -> None:
    assert sub.leftovers(trial=trial_id) == []
    assert not list((root / "vm" / "disks").glob("hx-*"))


def oracle_via_harness_run(tmp_path: Path, name: str) -> dict:
    """`harness run` itself, in a subprocess (the CLI path a user takes): 1.0 in every phase,
    the durability gate's real reboot passed, nothing left."""
    started = time.monotonic()
    proc = subprocess.run([str(Path(sys.executable).parent / "harness"), "run",
                           str(REPO / "tasks" / name), "--agent", "oracle",
                           "--out", str(tmp_path), "--json"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec = json.loads(proc.stdout)
    print(f"\n{name} oracle: {time.monotonic() - started:.0f}s "
          f"{ {k: v['seconds'] for k, v in rec['timings'].items()} }")
    assert rec["status"] == "passed" and rec["reward"] == 1.0, (rec["error"], rec["checks"])
    assert {c["phase"] for c in rec["checks"] if c["scored"]} == PHASES
    durability = rec["gates"]["durability"]
    assert durability["reward"] == 1.0, durability
    assert any(c["name"] == "reboot node0 and come back" and c["passed"]
               for c in durability["checks"])
    assert rec["leaks"] == []
    assert_clean(get_substrate("vm"), rec["trial_id"],
                 tmp_path / "adhoc" / "trials" / rec["trial_id"])
    return rec


def nop_without_gates(tmp_path: Path, name: str, marker: str, agent=None, gateway=None):
    """The nop agent (or `agent`) through Trial on a copy of the task without its gates:
    below 0.5."""
    task_dir = tmp_path / name
    shutil.copytree(REPO / "tasks" / name, task_dir)
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text().split(marker)[0])  # no reboot gate
    task = load_task(task_dir)
    trial_id = make_trial_id(task.name, "nop", 1)
    sub = get_substrate("vm")
    trial = Trial(task=task, agent=agent or get_agent("nop"), substrate=sub,
                  root=tmp_path / "trials" / trial_id, trial_id=trial_id, campaign="vm-pytest",
                  gateway=gateway)
    rec = asyncio.run(trial.run())
    assert rec.status == "failed" and rec.reward is not None and rec.reward < 0.5, \
        (rec.error, rec.checks)
    assert rec.leaks == []
    assert_clean(sub, trial_id, trial.root)
    return trial, rec


def test_fstab_oracle_via_harness_run(tmp_path):
    oracle_via_harness_run(tmp_path, "vm-fstab-durability")


def test_fstab_nop_scores_low_and_its_model_calls_go_through_the_gateway(tmp_path):
    """The agent in the VM calls the model gateway at the trial bridge's address, with the
    token it was given (Chat Completions and a streamed Messages call, scripted model):
    both recorded, the key variables hold the token only; a call without it is refused."""
    conversation = tmp_path / "conversation.yaml"
    conversation.write_text("- run: systemctl status\n- say: done\n")
    chat = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                       "tools": [{"type": "function", "function": {"name": "shell"}}]})
    messages = json.dumps({"model": "m", "max_tokens": 32, "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]})
    calls = [f'curl -sS "$OPENAI_BASE_URL/chat/completions" -H "Authorization: Bearer '
             f'$OPENAI_API_KEY" -H "content-type: application/json" -d {shlex.quote(chat)}',
             f'curl -sS -N "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY"'
             f' -H "content-type: application/json" -d {shlex.quote(messages)}',
             'curl -sS -o /dev/null -w "%{http_code}" "$OPENAI_BASE_URL/models"']
    agent = get_agent("replay", commands=calls, timeout_sec=120)
    trial, rec = nop_without_gates(tmp_path, "vm-fstab-durability", "# the fix must survive",
                                   agent, plan_for(f"scripted:{conversation}"))
    out = [json.loads(x)["stdout_tail"] or "" for x in
           trial.paths.trajectory.read_text().splitlines()]
    assert '"tool_calls"' in out[0] and "systemctl status" in out[0], out[0]
    assert "event: message_stop" in out[1], out[1]
    assert out[2].strip() == "401", out[2]
    records = [json.loads(x) for x in trial.paths.llm.read_text().splitlines()]
    assert [(r["api"], r["status"]) for r in records] == [("chat", 200),
                                                          ("messages", 200)], records
    assert rec.tokens["input"] and rec.tokens["output"], rec.tokens


def test_raid10_oracle_via_harness_run(tmp_path):
    rec = oracle_via_harness_run(tmp_path, "vm-raid10-slow-member")
    assert any(c["name"] == "the array assembles whole from mdadm.conf, as at boot"
               for c in rec["gates"]["durability"]["checks"])


def test_codex_that_only_looks_scores_low(tmp_path):
    """The real codex CLI in a VM: its bundle copied over SSH, run against the gateway's
    scripted model, which only looks at fstab; the look is in the trajectory. (On
    vm-fstab-durability: the CLI path is what is tested, and that task's verifier is quick,
    where raid10's spends a minute on a still-throttled array.)"""
    conversation = tmp_path / "look.yaml"
    conversation.write_text("- run: cat /etc/fstab\n- say: I only looked.\n")
    model = f"scripted:{conversation}"
    trial, rec = nop_without_gates(tmp_path, "vm-fstab-durability", "# the fix must survive",
                                   get_agent("codex", model=model), plan_for(model))
    assert rec.agent.name == "codex" and rec.agent.version[0].isdigit()
    spawned = [json.loads(x) for x in trial.paths.trajectory.read_text().splitlines()]
    assert any(r["source"] == "agent-child" and "cat /etc/fstab" in r["cmd"]
               for r in spawned), spawned
    records = [json.loads(x) for x in trial.paths.llm.read_text().splitlines()]
    assert [r["status"] for r in records] == [200, 200], records


def test_slurm_dropin_oracle_via_harness_run(tmp_path):
    rec = oracle_via_harness_run(tmp_path, "vm-slurm-cgroup-dropin")
    assert any(c["name"] == "a 4-task srun job completes on node0" and c["passed"]
               for c in rec["gates"]["durability"]["checks"])


def test_slurm_dropin_nop_scores_low(tmp_path):
    nop_without_gates(tmp_path, "vm-slurm-cgroup-dropin", "# the fix must survive")


async def power_seen_from_node0(sub, node0, node1) -> None:
    """The harness powers node1 off and on (its own IPMI client); node0 reads each state
    from node1's BMC with ipmitool and the credentials file."""
    status = ". /etc/harness/bmc-credentials; ipmitool -I lanplus -C 3 " \
        '-H "${node1_bmc%:*}" -p "${node1_bmc#*:}" -U "$node1_bmc_user" ' \
        '-P "$node1_bmc_password" chassis power status'
    for action, state in (("off", "is off"), ("on", "is on")):
        assert await sub.power(node1, action) == action
        seen = await sub.exec(node0, status, timeout=30)
        assert state in seen.stdout, seen.stdout + seen.stderr


def test_ipmi_power_recovery_bmc_from_node0(tmp_path):
    task = load_task(REPO / "tasks" / "ipmi-power-recovery")
    trial_id = make_trial_id(task.name, "oracle", 1)
    sub = get_substrate("vm-cluster")
    trial = Trial(task=task, agent=get_agent("oracle"), substrate=sub,
                  root=tmp_path / "trials" / trial_id, trial_id=trial_id,
                  campaign="vm-pytest", keep=True)

    async def scenario():
        rec = await trial.run()
        try:
            assert rec.status == "passed" and rec.reward == 1.0, (rec.error, rec.checks)
            node0, node1 = trial.env.node("node0"), trial.env.node("node1")
            info = await sub.exec(node0, "cat /etc/harness/cluster-info; "
                                  "stat -c %a /etc/harness/bmc-credentials", timeout=30)
            assert f"node1_bmc={node1.extra['bmc']['address']}:" in info.stdout
            assert info.stdout.split()[-1] == "600"
            assert await sub.power(node1, "status") == "on"
            await power_seen_from_node0(sub, node0, node1)
            kept = sub.leftovers(trial=trial_id)  # what teardown must remove
            assert any(x.startswith("bmc ") for x in kept), kept
            listener = HostListener()  # the host answers a VM nothing but DHCP and its BMC
            try:
                res = await sub.exec(node0, listener.probe_script(host_addresses()), 90)
                assert "open:" not in res.stdout, res.stdout
                ping = await sub.exec(node0, f"ping -c1 -W2 {node1.extra['bmc']['address']}",
                                      30)
                assert not ping.ok
            finally:
                listener.close()
        finally:
            leaks = await trial._teardown()
        return leaks

    assert asyncio.run(scenario()) == []
    assert_clean(sub, trial_id, trial.root)


SETUP_TASK = {
    "task.toml": 'version = "1.0"\n[task]\nname = "vm-setup-cache"\n[agent]\ntimeout_sec = 60\n'
                 '[verifier]\ntimeout_sec = 60\n[environment]\ntype = "vm"\nmemory_mb = 512\n',
    "instruction.md": "Nothing to do.\n",
    "environment/setup.sh": "set -eu\necho built >> /var/lib/hx-setup-runs\n"
                            "install -m 644 motd.txt /etc/hx-motd\n",
    "environment/motd.txt": "from setup\n",
    "environment/bootstrap.sh": "echo booted >> /var/lib/hx-bootstrap-runs\n",
    "tests/test.sh": "#!/bin/bash\nok=0\n"
                     "[ \"$(cat /var/lib/hx-setup-runs)\" = built ] && ok=$((ok + 1))\n"
                     "grep -qx 'from setup' /etc/hx-motd && ok=$((ok + 1))\n"
                     "[ \"$(cat /var/lib/hx-bootstrap-runs)\" = booted ] && ok=$((ok + 1))\n"
                     "awk -v ok=$ok 'BEGIN {printf \"%.2f\\n\", ok / 3}' "
                     "> /logs/verifier/reward.txt\n",
}


def test_setup_sh_runs_once_into_a_cached_task_image(tmp_path):
    task_dir = tmp_path / "vm-setup-cache"
    for rel, text in SETUP_TASK.items():
        (task_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (task_dir / rel).write_text(text)
    task = load_task(task_dir)
    sub = get_substrate("vm")
    trial_id = make_trial_id(task.name, "nop", 1)
    trial = Trial(task=task, agent=get_agent("nop"), substrate=sub,
                  root=tmp_path / "trials" / trial_id, trial_id=trial_id, campaign="vm-pytest")
    rec = asyncio.run(trial.run())
    assert rec.status == "passed" and rec.reward == 1.0, (rec.error, rec.checks)
    image = Path(trial.spec.image)
    assert image.name == "disk.qcow2" and image.parent.name.startswith("vm-task-vm-setup-cache-")
    built = (image.parent / "build.json").stat().st_mtime_ns
    from harness.substrates.base import TrialSpec

    again = sub.prepare(TrialSpec("t-again", "vm-pytest", task, tmp_path / "again"))
    assert again == str(image) and (image.parent / "build.json").stat().st_mtime_ns == built
    assert rec.leaks == []
    assert_clean(sub, trial_id, trial.root)
