"""A VM campaign on another machine's libvirt (markers: libvirt, slow): the host `far` is
`qemu+ssh://root@127.0.0.2/system`, which the harness takes for another machine (its name
is not this machine's), so everything goes the remote way for real: the base image and
kernel are copied once into that host's /var/lib/harness/images, the trial's disks and
console logs are made there over SSH, nodes boot cold (snapshot start is local-only), SSH
and Ansible reach the nodes through the host as a jump host, and teardown brings the
console logs back and leaves nothing there. vm-fstab-durability with the oracle (1.0,
through its reboot gate) and a replay agent (< 0.5) that calls the model gateway from the
VM at its bridge's address on the host (relayed over SSH to this machine's gateway);
ipmi-power-recovery's oracle there, its node1 BMC's port relayed from the host's bridge
(`bmc_relay`), and node0 reading the power state the harness sets; and the network modes
per phase (`test_task_formats_vm`) there: the firewall's sets and the allowlist's DNS
answers are that host's."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.agents import get_agent
from harness.paths import harness_home
from harness.placement import load_hosts
from harness.substrates import get_substrate, ssh
from harness.substrates.libvirt import remote
from harness.substrates.libvirt.snapshot import REMOTE_COLD
from harness.task import load_task
from harness.trial import Trial, make_trial_id
from tests.integration.faultcheck import REPO, cli
from tests.integration.test_libvirt_substrate import libvirt_unavailable
from tests.integration.test_libvirt_trials import power_seen_from_node0
from tests.integration.test_task_formats_vm import network_modes_trial

pytestmark = [pytest.mark.libvirt, pytest.mark.slow,
              pytest.mark.skipif(libvirt_unavailable() is not None,
                                 reason=str(libvirt_unavailable()))]

NAME = "pytest-vm-remote"
TASK = "vm-fstab-durability"


def far_host() -> dict:
    key = harness_home() / "ssh" / "id_ed25519"
    return {"name": "far", "libvirt": f"qemu+ssh://root@127.0.0.2/system?keyfile={key}&no_tty=1",
            "capacity": {"cpus": 2, "memory_mb": 12288, "max_trials": {"vm": 1}}}


def far_trials() -> list[str]:
    trials = Path(remote.REMOTE_DIR) / "trials"
    return sorted(p.name for p in trials.iterdir() if NAME in p.name) if trials.exists() else []


def gateway_calls(tmp_path: Path) -> dict:
    """A replay agent whose commands call the model gateway (scripted model) with curl
    from the VM: a Chat Completions call and a streamed Messages call."""
    conversation = tmp_path / "conversation.yaml"
    conversation.write_text("- run: systemctl status\n- say: done\n")
    chat = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                       "tools": [{"type": "function", "function": {"name": "shell"}}]})
    messages = json.dumps({"model": "m", "max_tokens": 32, "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]})
    return {"name": "replay", "model": f"scripted:{conversation}", "kwargs": {"commands": [
        f'curl -sS "$OPENAI_BASE_URL/chat/completions" -H "Authorization: Bearer '
        f'$OPENAI_API_KEY" -H "content-type: application/json" -d {shlex.quote(chat)}',
        f'curl -sS -N "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY"'
        f' -H "content-type: application/json" -d {shlex.quote(messages)}',
        'echo "$OPENAI_BASE_URL"'], "timeout_sec": 120}}


def test_vm_campaign_on_another_machines_libvirt(tmp_path):
    """The oracle, and a replay agent that only calls the model gateway: its calls reach
    this machine's gateway through the relay on the host's bridge (`gateway_relay`)."""
    camp = tmp_path / "c.yaml"
    camp.write_text(yaml.safe_dump({
        "name": NAME, "tasks": [str(REPO / "tasks" / TASK)],
        "agents": [{"name": "oracle"}, gateway_calls(tmp_path)], "attempts": 1,
        "concurrency": 1, "hosts": [far_host()]}))
    run_dir = tmp_path / "run"
    try:
        res = cli("campaign", "apply", str(camp), "--out", str(run_dir), "--json", timeout=1500)
        assert res.returncode == 0, res.stderr[-2000:]
        recs = {p.parent.name: json.loads(p.read_text())
                for p in (run_dir / "trials").glob("*/result.json")}
        assert len(recs) == 2
        for tid, r in recs.items():
            root = run_dir / "trials" / tid
            took = sum(t["seconds"] for t in r["timings"].values())
            print(f"{r['agent']['name']} on {r['host']}: reward {r['reward']} in {took:.0f}s")
            assert r["host"] == "far" and r["leaks"] == []
            if r["agent"]["name"] == "oracle":
                assert (r["status"], r["reward"]) == ("passed", 1.0), r["error"]
                assert r["gates"]["durability"]["reward"] == 1.0, r["gates"]
            else:
                assert r["status"] == "failed" and r["reward"] < 0.5, r["error"]
                out = [json.loads(x)["stdout_tail"] or "" for x in
                       (root / "agent" / "trajectory.jsonl").read_text().splitlines()]
                assert '"tool_calls"' in out[0] and "systemctl status" in out[0], out
                assert "event: message_stop" in out[1], out[1]
                bridge = inputs_gateway(root)  # the bridge's address on the host
                assert not bridge.startswith("127."), bridge
                assert out[2].strip().startswith(f"http://{bridge}:"), (out[2], bridge)
                records = [json.loads(x) for x in
                           (root / "agent" / "llm.jsonl").read_text().splitlines()]
                assert [(c["api"], c["status"]) for c in records] == [
                    ("chat", 200), ("messages", 200)], records
                assert r["tokens"]["input"], r["tokens"]
            tf_vars = json.loads((root / "terraform" / "main.tf.json").read_text())
            inputs = tf_vars["module"]["trial"]
            assert inputs["disk_dir"].startswith(f"{remote.REMOTE_DIR}/trials/hx-"), inputs
            assert inputs["base_image"].startswith(f"{remote.REMOTE_DIR}/images/")
            start = json.loads((root / "vm" / "start-node0.json").read_text())
            assert (start["mode"], start["reason"]) == ("cold", REMOTE_COLD)
            console = root / "vm" / f"hx-{inputs['trial_id']}-node0-console.log"
            assert "Linux version" in console.read_text(errors="replace"), "fetched back"
            jump = ssh.config_path(ssh.key_path(root.resolve())).read_text()
            assert "ProxyCommand ssh" in jump and "root@127.0.0.2" in jump
            assert not list((root / "vm").glob("disks/*")), "no disk is made here"
        staged = Path(inputs["base_image"])
        assert staged.exists() and (staged.parent / f".{staged.name}.staged").exists()
        assert far_trials() == [], "the trial directories on the host are gone"
        assert not list(Path("/tmp").glob("hx-gw-*.sock")), "the relay's socket is gone"
        relays = subprocess.run(["pgrep", "-f", "hx-gw-"], capture_output=True, text=True)
        assert relays.stdout == "", "no relay process is left"
    finally:
        cli("gc", "--hosts", str(camp), "--campaign", NAME)
    sub = get_substrate("vm").on_host(_spec(camp))
    assert sub.leftovers(campaign=NAME) == []
    assert far_trials() == []


def inputs_gateway(root: Path) -> str:
    """The trial bridge's address on the host (its network's gateway), from the trial's
    events."""
    for line in (root / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["name"] == "gateway.open":
            return event["data"]["url"].split("//")[1].rsplit(":", 1)[0]
    raise AssertionError("no gateway.open event")


def _spec(camp: Path):
    return load_hosts(yaml.safe_load(camp.read_text())["hosts"]).hosts[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_vm_network_modes_on_another_machines_libvirt(outside, tmp_path):
    sub = get_substrate("vm").on_host(load_hosts([far_host()]).hosts[0])
    assert sub.remote is not None
    network_modes_trial(outside, tmp_path, sub)


def test_ipmi_power_recovery_with_a_relayed_bmc_on_another_machines_libvirt(tmp_path):
    task = load_task(REPO / "tasks" / "ipmi-power-recovery")
    trial_id = make_trial_id(task.name, "oracle", 1)
    sub = get_substrate("vm-cluster").on_host(load_hosts([far_host()]).hosts[0])
    trial = Trial(task=task, agent=get_agent("oracle"), substrate=sub,
                  root=tmp_path / "trials" / trial_id, trial_id=trial_id,
                  campaign=NAME, keep=True)

    async def scenario():
        rec = await trial.run()
        try:
            assert rec.status == "passed" and rec.reward == 1.0, (rec.error, rec.checks)
            node0, node1 = trial.env.node("node0"), trial.env.node("node1")
            bmc = node1.extra["bmc"]
            assert bmc["local_port"] and bmc["port"] != bmc["local_port"], bmc
            await power_seen_from_node0(sub, node0, node1)
            live = sub.live_nodes(trial=trial_id)  # what gc heals faults on, found here
            assert sorted(n.name for nodes in live.values() for n in nodes) == [
                "node0", "node1"], live
        finally:
            sub.sweep(trial=trial_id)

    try:
        asyncio.run(scenario())
    finally:
        sub.sweep(trial=trial_id, force=True)
    assert sub.leftovers(trial=trial_id) == [] and far_trials() == []


def test_doctor_checks_the_far_host_and_what_is_staged_there(tmp_path):
    """`harness doctor --hosts-file`: the far host's tools, libvirt and QEMU versions,
    firewall and base image; `unstaged` tells a current copy from a missing or old one."""
    far = remote.RemoteHost.from_uri(far_host()["libvirt"])
    disk = tmp_path / "hx-doctor-probe" / "disk.qcow2"
    disk.parent.mkdir()
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "16M"], check=True)
    try:
        assert far.unstaged(disk) == [disk]
        far.stage(disk)
        assert far.unstaged(disk) == []
        os.utime(disk, ns=(disk.stat().st_atime_ns, disk.stat().st_mtime_ns + 10**9))
        assert far.unstaged(disk) == [disk], "a file rebuilt here is copied again"
    finally:
        far.check(f"rm -rf {remote.REMOTE_DIR}/images/hx-doctor-probe", "cleaning up")
    camp = tmp_path / "hosts.yaml"
    camp.write_text(yaml.safe_dump({"hosts": [far_host()]}))
    res = cli("doctor", "--hosts-file", str(camp), "--json", timeout=300)
    checks = {c["name"]: c for c in json.loads(res.stdout) if c["name"].startswith("far: ")}
    assert checks["far: vm"]["status"] == "PASS", checks
    assert checks["far: host tools"]["status"] == "PASS", checks
    versions = checks["far: versions"]
    assert versions["status"] == "PASS" and versions["detail"].startswith("libvirt "), versions
    assert "QEMU" in versions["detail"], versions
    [base] = [c for name, c in checks.items() if name.startswith("far: base image vm-")]
    assert (base["status"], base["detail"].split(":")[0]) in (
        ("PASS", f"staged in {remote.REMOTE_DIR}/images"), ("WARN", "not staged")), base
