"""Unit tests of the vm substrate's rendering: names, bridge and subnet derivation, module
variables, nodes and inventory. Nothing here touches libvirt (the domain type is pinned)."""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.errors import InputError, SubstrateError
from harness.substrates import ssh
from harness.substrates.base import TrialSpec
from harness.substrates.hypervisor import naming
from harness.substrates.libvirt import LibvirtClusterSubstrate, LibvirtSubstrate

MODULE = Path(__file__).resolve().parents[2] / "harness" / "substrates" / "libvirt" / "terraform"


@dataclass
class FakeNode:
    name: str
    cpus: int | None = None
    memory_mb: int | None = None
    data_disks: list[int] = field(default_factory=list)


@dataclass
class FakeTask:
    """Stand-in for the Task model: only the attributes the substrate reads."""

    name: str = "demo"
    nodes: list[FakeNode] = field(default_factory=lambda: [FakeNode("node1")])
    network: str | None = None


@pytest.fixture
def substrate(monkeypatch) -> LibvirtSubstrate:
    sub = LibvirtClusterSubstrate(domain_type="qemu")
    monkeypatch.setattr("harness.substrates.hypervisor.host.taken_subnets", lambda uri: set())
    return sub


def spec(tmp_path: Path, task: FakeTask | None = None, trial: str = "t-0001") -> TrialSpec:
    return TrialSpec(trial_id=trial, campaign="camp", task=task or FakeTask(), root=tmp_path,
                     image=str(tmp_path / "img" / "disk.qcow2"))


@pytest.mark.parametrize("trial", ["a", "t-0001", "x" * 63, "camp-2026-11-29-task-abc-3"])
def test_bridge_name_fits_ifnamsiz(trial):
    name = naming.bridge_name(trial)
    assert len(name) <= 15
    assert re.fullmatch(r"hx-[0-9a-f]{12}", name)
    assert naming.bridge_name(trial) == name


def test_bridge_names_differ_per_trial():
    names = {naming.bridge_name(f"t-{i}") for i in range(500)}
    assert len(names) == 500


@pytest.mark.parametrize("bad", ["", "-x", "a b", "a_b", "x" * 64, "ünï"])
def test_trial_name_rejects_what_libvirt_cannot_name(bad):
    with pytest.raises(InputError):
        naming.trial_name(bad)


def test_trial_subnet_is_stable_and_skips_taken():
    first = naming.trial_subnet("t-1")
    assert first.prefixlen == 24 and first.subnet_of(naming.SUBNET_POOL)
    assert naming.trial_subnet("t-1") == first
    second = naming.trial_subnet("t-1", {first})
    assert second != first and not second.overlaps(first)
    wide = ipaddress.ip_network("10.128.0.0/10")
    with pytest.raises(InputError):
        naming.trial_subnet("t-1", {wide})


def test_terraform_vars(substrate, tmp_path):
    task = FakeTask(nodes=[FakeNode("db", cpus=2, memory_mb=2048, data_disks=[64, 32]),
                           FakeNode("web")])
    tf = substrate.terraform_vars(spec(tmp_path, task))
    assert tf["trial_id"] == "t-0001"
    assert tf["bridge_name"] == naming.bridge_name("t-0001")
    assert tf["domain_type"] == "qemu"
    assert tf["nodes"] == [{"name": "db", "vcpu": 2, "memory_mb": 2048,
                            "data_disks_mb": [64, 32]},
                           {"name": "web", "vcpu": 1, "memory_mb": 1024}]
    assert tf["base_image"] == str(tmp_path / "img" / "disk.qcow2")
    assert tf["kernel"] == str(tmp_path / "img" / "vmlinuz")
    assert tf["initrd"] == str(tmp_path / "img" / "initrd.img")
    assert tf["disk_dir"] == str(tmp_path / "vm" / "disks")
    assert tf["console_log_dir"] == str(tmp_path / "vm")
    assert ipaddress.ip_network(tf["cidr"]).prefixlen == 24
    assert tf["ssh_public_key"].startswith("ssh-ed25519 ")
    assert ssh.key_path(tmp_path).exists()
    assert substrate.terraform_vars(spec(tmp_path, task))["ssh_public_key"] == tf["ssh_public_key"]
    json.dumps(tf)


def test_pinned_network_is_used(substrate, tmp_path):
    tf = substrate.terraform_vars(spec(tmp_path, FakeTask(network="192.168.77.0/24")))
    assert tf["cidr"] == "192.168.77.0/24"


def test_vm_takes_one_node_only(tmp_path):
    sub = LibvirtSubstrate(domain_type="qemu")
    with pytest.raises(InputError, match="vm-cluster"):
        sub.terraform_vars(spec(tmp_path, FakeTask(nodes=[FakeNode("a"), FakeNode("b")])))


def test_unknown_substrate_name():
    with pytest.raises(InputError):
        LibvirtSubstrate("docker")


def test_nodes_and_inventory(substrate, tmp_path):
    task = FakeTask(nodes=[FakeNode("db"), FakeNode("web")])
    s = spec(tmp_path, task)
    raw = {"nodes": {"sensitive": False, "type": ["object"],
                     "value": {"web": "10.1.0.11", "db": "10.1.0.10"}}}
    nodes = substrate.nodes(s, raw)
    assert [n.name for n in nodes] == ["db", "web"]
    assert nodes[0].primary and not nodes[1].primary
    assert nodes[1].host == nodes[1].cluster_ip == "10.1.0.11"
    assert nodes[0].extra["domain"] == "hx-t-0001-db"
    assert substrate.nodes(s, {"nodes": {"web": "10.1.0.11", "db": "10.1.0.10"}}) == nodes
    inv = substrate.inventory(s, nodes)
    db = inv["all"]["hosts"]["db"]
    assert db["ansible_host"] == "10.1.0.10"
    assert db["ansible_user"] == "root"
    assert db["ansible_ssh_private_key_file"] == str(ssh.key_path(tmp_path))
    assert "StrictHostKeyChecking=no" in db["ansible_ssh_common_args"]
    assert inv["all"]["children"]["primary"]["hosts"] == {"db": {}}


def test_remote_command_quotes_and_limits():
    line = ssh.remote_command("echo 'a b' && exit 3", 7.2, {"X": "1 2"})
    assert line.startswith("export X='1 2'; exec timeout -k 5 8 bash -c ")
    out = subprocess.run(["bash", "-c", line.replace("exec timeout -k 5 8 ", "")],
                         capture_output=True, text=True)
    assert out.stdout == "a b\n" and out.returncode == 3


def test_module_variables_match_terraform_vars(substrate, tmp_path):
    text = (MODULE / "variables.tf").read_text()
    blocks = dict(re.findall(r'variable "(\w+)" \{(.*?)\n\}', text, re.S))
    for name, body in blocks.items():
        assert "description" in body and "type" in body, name
    required = {name for name, body in blocks.items() if "default" not in body}
    rendered = set(substrate.terraform_vars(spec(tmp_path)))
    assert required <= rendered <= set(blocks)


class FakeDom:
    def __init__(self, name: str, desc: str, disks: list[str]):
        self._name, self._desc, self._disks = name, desc, disks
        self.removed = False

    def name(self):
        return self._name

    def metadata(self, kind, uri):
        return self._desc

    def XMLDesc(self, flags):  # noqa: N802 - libvirt's name
        disks = "".join(f"<disk><source file='{d}'/></disk>" for d in self._disks)
        return f"<domain><devices>{disks}</devices></domain>"

    def destroy(self):
        pass

    def undefineFlags(self, flags):  # noqa: N802
        self.removed = True


class FakeNet:
    def __init__(self, name: str, bridge: str):
        self._name, self._bridge = name, bridge
        self.removed = False

    def name(self):
        return self._name

    def bridgeName(self):  # noqa: N802
        return self._bridge

    def isActive(self):  # noqa: N802
        return True

    def destroy(self):
        pass

    def undefine(self):
        self.removed = True


class FakeConn:
    def __init__(self, doms, nets):
        self.doms, self.nets = doms, nets

    def listAllDomains(self):  # noqa: N802
        return self.doms

    def listAllNetworks(self):  # noqa: N802
        return self.nets

    def listAllStoragePools(self):  # noqa: N802
        return []

    def close(self):
        pass


def test_sweep_spares_live_trials_and_filters(monkeypatch, tmp_path):
    import os

    from harness.substrates.hypervisor import host

    pytest.importorskip("libvirt", reason="libvirt-python (the vm extra) is not installed")

    def dom(trial, campaign, owner):
        disk = tmp_path / f"hx-{trial}-n1.qcow2"
        disk.write_text("x")
        return FakeDom(f"hx-{trial}-n1", f"harness trial={trial} campaign={campaign} node=n1 "
                       f"owner={owner}", [str(disk)])

    from harness import owner

    def conn():
        doms = [dom("live", "c1", owner.tag(os.getppid())), dom("dead", "c1", 999999999),
                dom("other", "c2", 0), dom("mine", "c2", owner.tag()),
                FakeDom("vm-not-ours", "", [])]
        nets = [FakeNet(f"hx-{t}", naming.bridge_name(t)) for t in ("live", "dead", "other")]
        return FakeConn(doms, nets + [FakeNet("default", "virbr0")])

    monkeypatch.setattr(host, "connect", lambda uri: conn())
    monkeypatch.setattr(host, "host_bridges", lambda: [])
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "home"))
    # another process runs trial "live" (holds its lock); "dead" was owned by a process
    # that is gone; "mine" is this process's own
    lock = tmp_path / "home" / "run" / "trials" / "live.lock"
    lock.parent.mkdir(parents=True)
    runner = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               f"f = open({str(lock)!r}, 'w'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                               "print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    assert runner.stdout.readline().strip() == "held"
    try:
        _check_sweep(host, tmp_path)
    finally:
        runner.kill()
        runner.wait()


def _check_sweep(host, tmp_path):
    everything = host.leftovers("qemu:///system")
    assert "domain hx-live-n1" not in everything and "network hx-live" not in everything
    assert {"domain hx-dead-n1", "domain hx-other-n1", "network hx-dead"} <= set(everything)
    assert not any("vm-not-ours" in x or "default" in x for x in everything)
    assert host.leftovers("qemu:///system", campaign="c1") == [
        "domain hx-dead-n1", f"disk {tmp_path / 'hx-dead-n1.qcow2'}", "network hx-dead"]
    assert host.leftovers("qemu:///system", trial="live") == []  # another live process's
    assert "domain hx-live-n1" in host.leftovers("qemu:///system", trial="live", force=True)
    assert "domain hx-mine-n1" in host.leftovers("qemu:///system", trial="mine")
    removed = host.leftovers("qemu:///system", trial="dead", remove=True)
    assert "network hx-dead" in removed and not (tmp_path / "hx-dead-n1.qcow2").exists()
    with pytest.raises(SubstrateError):
        host.leftovers("qemu:///system", trial="")


def test_module_boots_with_the_images_module_blacklist():
    """The Terraform module and the raw baseline boot guests with one list of drivers left
    out (MODULE_BLACKLIST): a change to one must reach the other."""
    from harness.substrates.hypervisor.image import KERNEL_CMDLINE, MODULE_BLACKLIST
    main = (MODULE / "main.tf").read_text()
    assert f'module_blacklist = "{MODULE_BLACKLIST}"' in main
    assert f"module_blacklist={MODULE_BLACKLIST}" in KERNEL_CMDLINE.split()


def test_control_paths_are_private_short_and_per_trial(tmp_path, monkeypatch):
    """The SSH master sockets: a private directory, one socket per trial and node address,
    short enough for a Unix socket whatever the trial directory's length."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    deep = tmp_path / ("d" * 150) / "trials" / "t-0001" / "ssh" / "id_ed25519"
    other = tmp_path / "x" / "trials" / "t-0002" / "ssh" / "id_ed25519"
    path = ssh.control_path("10.128.3.10", deep)
    assert len(str(path)) < 108 and path.parent.stat().st_mode & 0o777 == 0o700
    assert path != ssh.control_path("10.128.3.11", deep) != ssh.control_path("10.128.3.10",
                                                                              other)
    assert path.name.startswith(ssh._trial_tag("t-0001"))
    argv = ssh.ssh_argv("10.128.3.10", deep, control=path)
    assert argv[argv.index(f"ControlPath={path}") - 2:argv.index(f"ControlPath={path}")] \
        == ["ControlMaster=no", "-o"]
