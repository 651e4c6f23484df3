"""The CloudLab Terraform provider (harness/cloudlab, built into the mirror by setup.sh)
against the local portal, whose experiments are REAL emulated bare-metal machines (QEMU
guests with ipmi_sim BMCs). First the provider alone: `terraform apply` makes a profile (a
geni-lib script the harness renders), a 2-node experiment and a powercycle through the node
action; the nodes answer SSH with the experiment's key, by their profile names; `terraform
destroy` terminates it and the machines are reset and released. Every portal response is
checked against the API description's fields, and the token is in no file or output. Then
the cloudlab substrate runs seed tasks through the same provider and portal (markers:
libvirt, slow)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.paths import harness_home
from harness.substrates import ssh
from harness.substrates.cloudlab import experiments, inband, profile
from harness.substrates.cloudlab.machines import PoolMachines
from harness.substrates.cloudlab.portal import Portal
from harness.substrates.cloudlab.portal_http import serve
from harness.substrates.metal import emulate, lease
from harness.substrates.metal.pool import load_pool, pool_path
from tests.integration.test_libvirt_substrate import libvirt_unavailable
from tests.unit.test_cloudlab_portal_api import check_shape

pytestmark = [pytest.mark.libvirt, pytest.mark.slow,
              pytest.mark.skipif(libvirt_unavailable() is not None,
                                 reason=str(libvirt_unavailable())),
              pytest.mark.skipif(shutil.which("ipmi_sim") is None,
                                 reason="ipmi_sim missing (Debian package openipmi)"),
              pytest.mark.skipif(os.geteuid() != 0, reason="BMC addresses need root"),
              pytest.mark.skipif(shutil.which("terraform") is None,
                                 reason="terraform not on PATH (scripts/setup.sh)")]

TOKEN = "portal-token-that-must-not-leak-7f3a"
KINDS = {"create_experiment": "Experiment", "get_experiment": "Experiment",
         "extend_experiment": "Experiment", "patch_experiment": "Experiment",
         "nodes_action": "Experiment", "get_node": "AggregateNode",
         "node_action": "AggregateNode", "create_profile": "Profile", "get_profile": "Profile",
         "patch_profile": "Profile", "version": "Version", "error": "Error"}
ROOT = """
terraform {
  required_providers {
    cloudlab = { source = "harness/cloudlab", version = "0.1.0" }
  }
}
provider "cloudlab" {
  portal_url    = "%(url)s"
  project       = "hxproj"
  poll_interval = "1s"
}
resource "cloudlab_profile" "p" {
  name   = "hx-portal-it"
  script = file("${path.module}/profile.py")
}
resource "cloudlab_experiment" "e" {
  name            = "hx-portal-it"
  profile_name    = cloudlab_profile.p.name
  profile_project = "hxproj"
  bindings        = { n = "2" }
  duration        = 2
  sshpubkey       = file("${path.module}/key.pub")
}
resource "cloudlab_node_action" "cycle" {
  experiment_id = cloudlab_experiment.e.id
  client_id     = "web1"
  action        = "powercycle"
}
output "nodes" {
  value = cloudlab_experiment.e.nodes
}
"""


def terraform(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_LOG")}
    env.update(CLOUDLAB_TOKEN=TOKEN, TF_IN_AUTOMATION="1",
               TF_CLI_CONFIG_FILE=str(harness_home() / "terraform.rc"))
    return subprocess.run(["terraform", f"-chdir={root}", *args, "-no-color"], env=env,
                          capture_output=True, text=True, timeout=1200)


def test_terraform_provider_drives_real_machines_through_the_local_portal(pool_name, tmp_path):
    if not pool_path(pool_name).exists():  # (this module alone: the pool is made here)
        emulate.emulate(pool_name, nodes=3)
    record: list = []
    lines: list[str] = []
    portal = Portal(PoolMachines(pool_name), settle_sec=1.0, log=lines.append)
    server, _ = serve(portal, TOKEN, redirect_slash=True, record=record)
    portal.base_url = f"http://127.0.0.1:{server.server_port}"
    root = tmp_path / "tf"
    root.mkdir()
    (root / "main.tf").write_text(ROOT % {"url": portal.base_url})
    (root / "profile.py").write_text(profile.render(["web0", "web1"]))
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hx-portal-it",
                    "-f", str(root / "key")], check=True)
    outputs = []
    try:
        for args in (("init", "-input=false"), ("apply", "-auto-approve", "-input=false")):
            res = terraform(root, *args)
            outputs.append(res.stdout + res.stderr)
            assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:] + \
                "\n".join(lines[-20:])
        nodes = json.loads(terraform(root, "output", "-json", "nodes").stdout)
        assert [n["client_id"] for n in nodes] == ["web0", "web1"]
        uptime = {}
        for n in nodes:
            assert n["ssh_user"] == "root" and n["ssh_port"] == 22, n
            res = asyncio.run(ssh.exec_on(n["ssh_host"], root / "key",
                                          "hostname; cut -d' ' -f1 /proc/uptime", 60))
            assert res.ok, res.stderr
            name, up = res.stdout.split()
            assert name == n["client_id"]
            uptime[name] = float(up)
        assert uptime["web1"] < uptime["web0"], uptime  # powercycled after web0 was up
        held = lease.read(pool_name)
        assert sorted(r["trial"] for r in held.values()) == [portal.machines.holder(
            portal.find("hxproj,hx-portal-it").id)] * 2
    finally:
        res = terraform(root, "destroy", "-auto-approve", "-input=false")
        outputs.append(res.stdout + res.stderr)
        server.shutdown()
        portal.close()
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert portal.experiments == {} and lease.read(pool_name) == {}
    kinds = {kind for kind, _, _ in record}
    assert {"create_profile", "create_experiment", "get_experiment", "manifests",
            "node_action", "get_node", "redirect"} <= kinds, kinds
    for kind, _, payload in record:
        if kind in KINDS:
            check_shape(KINDS[kind], payload)
        elif kind == "manifests":
            assert all(isinstance(x, str) and "<login" in x for x in payload.values())
    leaked = [p for p in root.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaked == [] and not any(TOKEN in text for text in outputs + lines)


COMPAT_TASK = Path(__file__).resolve().parent / "tasks" / "cloudlab-cluster"
POWER_TASK = Path(__file__).resolve().parents[2] / "tasks" / "baremetal-power-loss"
L3_TASK = Path(__file__).resolve().parents[2] / "tasks" / "etcd-member-loss"


def campaign(tmp_path: Path, env: dict, name: str, task: Path, agents: list[str]) -> dict:
    """`harness campaign apply` of one task on the cloudlab substrate; agent -> record."""
    camp = tmp_path / f"{name}.yaml"
    camp.write_text(json.dumps({"name": name, "tasks": [str(task)], "attempts": 1,
                                "retries": 0, "agents": [{"name": a} for a in agents],
                                "substrate": {"cloudlab": "cloudlab", "baremetal": "cloudlab"}}))
    run_dir = tmp_path / f"run-{name}"
    res = subprocess.run([sys.executable, "-m", "harness.cli", "campaign", "apply", str(camp),
                          "--out", str(run_dir)], env=env, capture_output=True, text=True,
                         timeout=1800)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    recs = {}
    for path in (run_dir / "trials").glob("*/result.json"):
        rec = json.loads(path.read_text())
        recs[rec["agent"]["name"]] = rec
        assert rec["substrate"] == "cloudlab" and rec["leaks"] == [], rec
    return recs


def test_cloudlab_substrate_runs_the_seed_tasks_through_provider_and_portal(pool_name, tmp_path):
    """The cloudlab substrate as a user runs it: a campaign maps the task types to it, each
    trial is one experiment on the local portal (profile rendered from the task's nodes,
    made and terminated by `terraform apply/destroy` with the provider), the nodes get
    in-band BMC accounts. The InfraBench CloudLab task (unmodified) passes with its
    oracle; nothing is left: experiments, records, leases, BMC accounts, gc; the token is
    in no file of the run dirs. (The bare-metal seed tasks on this substrate: the L3 one's
    oracle below, whose bootstrap and fix power a node off and on through its in-band account with
    `ipmitool -I lan` as the L1 task does; the L1 nop in the reuse test; the L1 oracle on
    the emulated pool itself in test_baremetal_emulated.py.)"""
    if not pool_path(pool_name).exists():
        emulate.emulate(pool_name, nodes=3)
    record: list = []
    portal = Portal(PoolMachines(pool_name), settle_sec=1.0, log=lambda line: None)
    server, _ = serve(portal, TOKEN, record=record)
    portal.base_url = f"http://127.0.0.1:{server.server_port}"
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"substrates": {"cloudlab": {
        "portal_url": portal.base_url, "project": "hxci", "poll_interval": "1s"}}}))
    env = {**os.environ, "HARNESS_CONFIG": str(config), "CLOUDLAB_TOKEN": TOKEN}
    try:
        compat = campaign(tmp_path, env, "cl-compat", COMPAT_TASK, ["oracle"])
        assert (compat["oracle"]["status"], compat["oracle"]["reward"]) == ("passed", 1.0), \
            (compat["oracle"]["error"], compat["oracle"]["checks"])
    finally:
        server.shutdown()
        portal.close()
    assert portal.experiments == {} and lease.read(pool_name) == {}
    assert experiments.read() == {}
    gc = subprocess.run([sys.executable, "-m", "harness.cli", "gc", "--campaign", "cl-compat",
                         "--dry-run", "--json"], env=env, capture_output=True, text=True,
                        timeout=300)  # (the other worker's trials are its own)
    assert json.loads(gc.stdout)["total"] == 0, gc.stdout
    for kind, _, payload in record:
        if kind in KINDS:
            check_shape(KINDS[kind], payload)
    pool = load_pool(pool_name)
    for m in pool.machines:  # the trials' in-band BMC accounts are gone (slot disabled)
        asyncio.run(ssh.wait_ready(m.ssh.host, m.ssh.key_path, 240))  # (reimaged at terminate)
        res = asyncio.run(ssh.exec_on(m.ssh.host, m.ssh.key_path,
                                      f"ipmitool user list 1 | awk '$1 == {inband.SLOT}'", 60))
        assert res.ok and inband.NAME not in res.stdout, res.stdout
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], env=env,
                          capture_output=True, text=True, timeout=1800)


def test_reuse_mode_serves_trials_from_one_experiment(pool_name, tmp_path):
    """`harness cloudlab reuse-create` allocates one experiment through the provider and
    makes it a bare-metal pool (in-band BMC accounts in its vault, reset = the portal's
    reload); a trial leases its machines like any pool's (the L1 seed task's nop scores
    low), the machines are reloaded through the portal afterwards; `reuse-remove`
    terminates the experiment and removes the pool."""
    if not pool_path(pool_name).exists():
        emulate.emulate(pool_name, nodes=3)
    record: list = []
    portal = Portal(PoolMachines(pool_name), settle_sec=1.0, log=lambda line: None)
    server, _ = serve(portal, TOKEN, record=record)
    url = f"http://127.0.0.1:{server.server_port}"
    portal.base_url = url
    reuse_pool = f"cl{os.getpid() % 100000}"
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"substrates": {
        "cloudlab": {"portal_url": url, "project": "hxci", "poll_interval": "1s"},
        "baremetal": {"pool": reuse_pool}}}))
    env = {**os.environ, "HARNESS_CONFIG": str(config), "CLOUDLAB_TOKEN": TOKEN}
    try:
        made = cli(env, "cloudlab", "reuse-create", reuse_pool, "--nodes", "2")
        assert made.returncode == 0, made.stdout + made.stderr
        pool = load_pool(reuse_pool)
        assert [m.name for m in pool.machines] == ["node0", "node1"]
        assert all(m.bmc and m.bmc.user.startswith("vault:") for m in pool.machines)
        assert len(portal.experiments) == 1
        camp = tmp_path / "nop.yaml"
        camp.write_text(json.dumps({"name": "cl-reuse", "tasks": [str(POWER_TASK)],
                                    "agents": [{"name": "nop"}], "attempts": 1,
                                    "retries": 0}))
        res = cli(env, "campaign", "apply", str(camp), "--out", str(tmp_path / "run"))
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        [path] = (tmp_path / "run" / "trials").glob("*/result.json")
        rec = json.loads(path.read_text())
        assert rec["substrate"] == "baremetal" and rec["leaks"] == [], rec
        assert rec["status"] == "failed" and rec["reward"] < 0.5, (rec["error"], rec["checks"])
        assert lease.read(reuse_pool) == {}
        reloads = [p for kind, _, p in record if kind == "node_action"]
        assert len(reloads) == 2, reloads  # both machines reloaded after the trial
        assert experiments.stale() == {}  # the pool's experiment is live, not gc's
    finally:
        removed = cli(env, "cloudlab", "reuse-remove", reuse_pool)
        server.shutdown()
        portal.close()
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert portal.experiments == {} and not pool_path(reuse_pool).exists()
    assert experiments.read() == {} and lease.read(pool_name) == {}
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


@pytest.mark.timeout(2400)  # (two 3-node trials; the other lane's guests share the cores)
def test_l3_seed_task_through_the_provider_and_portal(pool_name, tmp_path):
    """The L3 bare-metal seed task (3 nodes, a member's chassis powered off through its
    BMC, here the in-band account's) on the cloudlab substrate: the oracle 1.0, nothing
    left. (Its nop, < 0.5, runs on the same emulated machines in test_baremetal_emulated:
    the verifier is the same; the provider and portal path is what this test adds.)"""
    if not pool_path(pool_name).exists():
        emulate.emulate(pool_name, nodes=3)
    portal = Portal(PoolMachines(pool_name), settle_sec=1.0, log=lambda line: None)
    server, _ = serve(portal, TOKEN)
    portal.base_url = f"http://127.0.0.1:{server.server_port}"
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"substrates": {"cloudlab": {
        "portal_url": portal.base_url, "project": "hxci", "poll_interval": "1s"}}}))
    env = {**os.environ, "HARNESS_CONFIG": str(config), "CLOUDLAB_TOKEN": TOKEN}
    try:
        recs = campaign(tmp_path, env, "cl-l3", L3_TASK, ["oracle"])
    finally:
        server.shutdown()
        portal.close()
    assert (recs["oracle"]["status"], recs["oracle"]["reward"]) == ("passed", 1.0), \
        (recs["oracle"]["error"], recs["oracle"]["checks"])
    assert portal.experiments == {} and lease.read(pool_name) == {}
    assert experiments.read() == {}
