"""Node sizing (node's own value, else [environment], clamped to the host with a warning),
BMC variables and the BMC-related inventory, without libvirt."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.substrates.base import TrialSpec
from harness.substrates.libvirt import LibvirtClusterSubstrate, LibvirtSubstrate, bmc


def task(nodes, cpus=2, memory_mb=768):
    return SimpleNamespace(name="demo", network="10.99.0.0/24", nodes=nodes,
                           env=SimpleNamespace(cpus=cpus, memory_mb=memory_mb))


def node(name, cpus=None, memory_mb=None, bmc=False):
    return SimpleNamespace(name=name, cpus=cpus, memory_mb=memory_mb, bmc=bmc)


def spec(tmp_path: Path, t) -> TrialSpec:
    return TrialSpec(trial_id="t-0002", campaign="vm-unit", task=t, root=tmp_path)


def test_nodes_fall_back_to_environment(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.substrates.libvirt.render.host_memory_mb", lambda: 64000)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    sub = LibvirtClusterSubstrate(domain_type="qemu")
    got = sub._task_nodes(spec(tmp_path, task([node("a"), node("b", cpus=1, memory_mb=512)])))
    assert got == [{"name": "a", "vcpu": 2, "memory_mb": 768},
                   {"name": "b", "vcpu": 1, "memory_mb": 512}]


def test_nodes_clamped_to_host_with_warning(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.substrates.libvirt.render.host_memory_mb", lambda: 4096)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    sub = LibvirtSubstrate(domain_type="qemu")
    with pytest.warns(UserWarning, match="this host gives it 2 and 3072"):
        got = sub._task_nodes(spec(tmp_path, task([node("a")], cpus=16, memory_mb=65536)))
    assert got == [{"name": "a", "vcpu": 2, "memory_mb": 3072}]


def test_bmc_nodes_get_config_vars_and_inventory(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.substrates.hypervisor.image.kernel_paths",
                        lambda disk: (tmp_path / "vmlinuz", tmp_path / "initrd.img"))
    monkeypatch.setattr("harness.substrates.libvirt.render.kernel_paths",
                        lambda disk: (tmp_path / "vmlinuz", tmp_path / "initrd.img"))
    sub = LibvirtClusterSubstrate(domain_type="qemu")
    s = TrialSpec(trial_id="t-0002", campaign="vm-unit", root=tmp_path,
                  task=task([node("node0"), node("node1", bmc=True)]),
                  image=str(tmp_path / "disk.qcow2"))
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "home"))
    tf = sub.terraform_vars(s)
    assert tf["bmc_nodes"] == ["node1"] and tf["trial_root"] == str(tmp_path.resolve())
    cfg_file = bmc.config_path(tmp_path.resolve(), "node1")
    assert oct(cfg_file.stat().st_mode & 0o777) == "0o600"
    password = json.loads(cfg_file.read_text())["password"]
    assert sub.secrets(s) == [password]
    trial_files = [f for f in tmp_path.rglob("*") if f.is_file() and "home" not in f.parts]
    assert not any(password in f.read_text(errors="replace") for f in trial_files)
    nodes = sub.nodes(s, {"nodes": {"node0": "10.99.0.10", "node1": "10.99.0.11"}})
    assert nodes[0].extra["bmc"] is None and nodes[1].extra["bmc"]["address"] == "10.99.0.1"
    hosts = sub.inventory(s, nodes)["all"]["hosts"]
    assert "harness_bmc" not in hosts["node0"]
    assert hosts["node1"]["harness_bmc"].startswith("10.99.0.1:")
    assert sub.inventory(s, nodes)["all"]["vars"]["harness_trial_id"] == "t-0002"


def test_a_task_storage_beyond_the_image_grows_the_root_disk_and_boots_cold(tmp_path):
    """storage_mb (set by the task) above the image's virtual size: root_mb and a cold
    start (snapshot templates have the image's size); at or below it: the image as it is."""
    import subprocess

    disk = tmp_path / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "64M"], check=True)
    sub = LibvirtClusterSubstrate(domain_type="qemu")
    env = SimpleNamespace(cpus=1, memory_mb=512, storage_mb=128,
                          model_fields_set={"storage_mb"})
    t = SimpleNamespace(name="demo", network=None, env=env,
                        nodes=[node("a"), SimpleNamespace(**vars(node("b")), storage_mb=32)])
    s = TrialSpec(trial_id="t-0003", campaign="vm-unit", task=t, root=tmp_path, image=str(disk))
    got = sub._task_nodes(s)
    assert got[0]["root_mb"] == 128 and got[0]["start"] == "cold"
    assert "root_mb" not in got[1] and "start" not in got[1]
    env.model_fields_set = set()  # the default storage_mb is not the task's ask
    assert all("root_mb" not in n for n in sub._task_nodes(s))


def test_a_power_status_keeps_the_nodes_ssh_master_and_an_action_closes_it(monkeypatch):
    """The integrity checks ask every node's power status before their commands: that
    must not cost the node's SSH master (a new key exchange on a slow guest); a power
    action must close it (the node may go down under it)."""
    import asyncio

    from harness.substrates import ssh
    from harness.substrates.base import Node
    from harness.substrates.hypervisor import host

    closed, asked = [], []
    monkeypatch.setattr(ssh, "close_master", lambda h, key: closed.append(h))
    monkeypatch.setattr(host, "power", lambda uri, dom, action: asked.append(action) or "on")
    sub = LibvirtSubstrate(domain_type="qemu")
    vm = Node(name="node1", host="10.0.0.10", cluster_ip="10.0.0.10", primary=True,
              extra={"domain": "hx-t-node1", "ssh_key": "/tmp/k"})
    assert asyncio.run(sub.power(vm, "status")) == "on" and closed == []
    asyncio.run(sub.power(vm, "cycle"))
    assert closed == ["10.0.0.10"] and asked == ["status", "cycle"]


def test_the_planned_outputs_are_the_modules(tmp_path):
    """Ansible starts during apply on the inventory made from `planned_outputs`; it is
    the inventory apply's outputs give (terraform/outputs.tf), or the early run is lost."""
    sub = LibvirtClusterSubstrate(domain_type="qemu")
    tf_vars = {"trial_id": "t-1", "cidr": "10.7.0.0/24", "bridge_name": "hx-abc",
               "console_log_dir": "/r/vm",
               "nodes": [{"name": "a"}, {"name": "b", "ip": "10.7.0.99"}]}
    assert sub.planned_outputs(tf_vars) == {
        "nodes": {"a": "10.7.0.10", "b": "10.7.0.99"},
        "console_logs": {"a": "/r/vm/hx-t-1-a-console.log", "b": "/r/vm/hx-t-1-b-console.log"},
        "network": {"name": "hx-t-1", "bridge": "hx-abc", "cidr": "10.7.0.0/24"}}
    assert sub.planned_outputs({**tf_vars, "bmc_nodes": ["b"]}) is None  # its port comes later


def test_a_bare_metal_task_gets_a_bmc_on_every_node_and_says_how_to_speak_to_it(
        tmp_path, monkeypatch):
    """A `baremetal` task run on vm-cluster: every node has a BMC (as every machine of it
    does); the credentials file names the interface and cipher suite the task's ipmitool
    uses, the same lines a pool's BMCs give."""
    from harness.substrates.base import Node
    from harness.substrates.common import bmc_credentials_script

    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "home"))  # (the BMC's credentials)
    sub = LibvirtClusterSubstrate(domain_type="qemu")
    bare = task([node("node0"), node("node1")])
    bare.env.type = "baremetal"
    assert sub._bmc_nodes(spec(tmp_path, bare)) == ["node0", "node1"]
    assert sub._bmc_nodes(spec(tmp_path, task([node("a"), node("b", bmc=True)]))) == ["b"]
    cfg = bmc.write_config(tmp_path, "node1", "hx-t-0002-node1", "10.99.0.1")
    script = bmc_credentials_script([
        Node("node1", "hx-t-0002-node1", "10.99.0.2", extra={"bmc": {**cfg, "port": 6230}}),
        Node("node2", "x", "10.99.0.3", extra={"bmc": {
            "address": "10.0.1.12", "port": 623, "user": "u", "password": "p",
            "interface": "lan", "cipher_suite": 3}})], "/etc/harness/bmc-c")
    assert "node1_bmc_interface=lanplus\nnode1_bmc_cipher=3\n" in script
    assert "node2_bmc_interface=lan\n" in script and "node2_bmc_cipher" not in script
