"""Real VMs under libvirt/QEMU through the vm substrate's Terraform module (marker: libvirt).

One node is rendered into tmp_path, applied with `terraform`, reached over SSH with the
per-trial key, rebooted through libvirt-python and destroyed; nothing named after the
trial may remain. Boot-to-SSH is compared with a raw `qemu-system-x86_64` (TCG) boot of
the same kernel and image, and both are printed (run with -s to see them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.errors import PreflightError
from harness.substrates.base import Node, TrialSpec
from harness.tools.terraform import render_root, terraform_bin, terraform_env

REPO = Path(__file__).resolve().parents[2]
SSH_TIMEOUT = 180.0
TIMINGS: dict[str, float] = {}


def libvirt_unavailable() -> str | None:
    """Why this host cannot run VMs, or None."""
    if shutil.which("virsh") is None:
        return "virsh not installed"
    proc = subprocess.run(["virsh", "-c", "qemu:///system", "version"], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        return f"libvirtd not reachable: {proc.stderr.strip()[-200:]}"
    try:
        import libvirt  # noqa: F401
    except ImportError:
        return "libvirt-python not installed (pip install -e '.[vm]')"
    return None


pytestmark = [pytest.mark.libvirt,
              pytest.mark.skipif(libvirt_unavailable() is not None,
                                 reason=str(libvirt_unavailable()))]


@dataclass
class FakeNode:
    name: str
    cpus: int = 1
    memory_mb: int = 1024


@dataclass
class FakeTask:
    """Stand-in for the Task model: the attributes the substrate reads."""

    name: str = "vm-smoke"
    nodes: list[FakeNode] = field(default_factory=lambda: [FakeNode("node1")])
    network: str | None = None


def tf(root: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    flags = ["-no-color"] + (["-input=false"] if args[0] != "output" else [])
    proc = subprocess.run([terraform_bin(), *args, *flags], cwd=root,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        text = proc.stderr or proc.stdout
        pytest.fail(f"terraform {args[0]} failed: {text[text.find('Error:'):][:1500]}")
    return proc


@pytest.fixture(scope="module")
def substrate():
    from harness.substrates.hypervisor.image import build_vm_image
    from harness.substrates.libvirt import LibvirtSubstrate

    sub = LibvirtSubstrate()
    build_vm_image()
    try:
        sub.preflight()
    except PreflightError as exc:
        pytest.fail(f"vm preflight: {exc.message}")
    return sub


@contextlib.contextmanager
def applied(substrate, task: FakeTask, tmp_path: Path):
    """Render, init and apply a trial; yield (spec, nodes, apply start); always destroy and
    assert that nothing named after the trial is left."""
    trial_id = f"it-{uuid.uuid4().hex[:8]}"
    spec = TrialSpec(trial_id=trial_id, campaign="pytest", task=task, root=tmp_path / trial_id,
                     image=substrate.prepare(None, log=lambda _: None))
    tf_dir = spec.root / "terraform"
    tf_dir.mkdir(parents=True)
    doc = render_root(substrate.terraform_module(), tf_dir, substrate.terraform_vars(spec),
                      {"libvirt": {"source": "dmacvicar/libvirt", "version": "0.7.6"}})
    (tf_dir / "main.tf.json").write_text(json.dumps(doc, indent=2))
    terraform_env()
    tf(tf_dir, "init")
    try:
        started = time.monotonic()
        tf(tf_dir, "apply", "-auto-approve")
        TIMINGS.setdefault("harness_apply_sec", time.monotonic() - started)
        outputs = json.loads(tf(tf_dir, "output", "-json").stdout)
        yield spec, substrate.nodes(spec, outputs), started
    finally:
        subprocess.run([terraform_bin(), "destroy", "-auto-approve", "-no-color",
                        "-input=false"], cwd=tf_dir, capture_output=True, text=True, timeout=600)
        left = substrate.leftovers(trial=trial_id)
        if left:
            substrate.sweep(trial=trial_id)
    assert left == [], f"leftovers after destroy: {left}"
    assert not list((spec.root / "vm" / "disks").glob("hx-*"))


def test_apply_ssh_exec_reboot_destroy(substrate, tmp_path):
    with applied(substrate, FakeTask(), tmp_path) as (spec, nodes, started):
        assert [n.name for n in nodes] == ["node1"] and nodes[0].primary
        asyncio.run(_exercise(substrate, nodes[0], spec, started))
    assert (spec.root / "vm" / f"hx-{spec.trial_id}-node1-console.log").stat().st_size > 0


@pytest.mark.slow
def test_two_node_cluster_isolated_network(tmp_path):
    """vm-cluster: fixed DHCP addresses, peers by name, cluster-info, no route out."""
    from harness.substrates.libvirt import LibvirtClusterSubstrate

    sub = LibvirtClusterSubstrate()
    task = FakeTask(nodes=[FakeNode("db", memory_mb=768), FakeNode("web", memory_mb=768)])
    with applied(sub, task, tmp_path) as (spec, nodes, started):
        asyncio.run(sub.wait_ready(nodes, SSH_TIMEOUT * 1.5))
        TIMINGS["cluster2_apply_to_ssh_sec"] = time.monotonic() - started
        db, web = nodes
        assert db.primary and not web.primary and db.host != web.host
        check = asyncio.run(sub.exec(db, "hostname; ip -4 -br addr show scope global; "
                                     "ping -c1 -W5 web >/dev/null && echo ping-ok; "
                                     "cat /etc/harness/cluster-info; ip route", timeout=60))
        assert check.ok, check.stderr
        lines = check.stdout.splitlines()
        assert lines[0] == "db" and db.host in lines[1] and "ping-ok" in lines
        assert f"web={web.host}" in lines and f"db_cluster_ip={db.host}" in lines
        assert not any(ln.startswith("default") for ln in lines), check.stdout
        out = asyncio.run(sub.exec(web, "curl -sS -m 5 http://deb.debian.org/ >/dev/null",
                                   timeout=30))
        assert not out.ok


async def _exercise(sub, node: Node, spec: TrialSpec, started: float) -> None:
    await sub.wait_ready([node], SSH_TIMEOUT)
    TIMINGS["harness_apply_to_ssh_sec"] = time.monotonic() - started

    kernel = json.loads((Path(spec.image).parent / "recipe.json").read_text())["kernel"]
    uname = await sub.exec(node, "uname -r", timeout=30)
    assert uname.ok and uname.stdout.strip() == kernel
    state = await sub.exec(node, "systemctl is-system-running --wait; "
                           "systemctl --failed --no-legend", timeout=120)
    assert state.stdout.split()[0] == "running", state.stdout
    env = await sub.exec(node, 'echo "$HX_A:$(hostname):$(id -u)"', timeout=30,
                         env={"HX_A": "a b"})
    assert env.stdout.strip() == "a b:node1:0"
    slow = await sub.exec(node, "echo started; sleep 60", timeout=3)
    assert slow.timed_out and "started" in slow.stdout and slow.seconds < 20

    payload = spec.root / "payload"
    (payload / "sub").mkdir(parents=True)
    (payload / "sub" / "f.txt").write_text("hello vm\n")
    await sub.put(node, payload, "/opt/hx-upload")
    cat = await sub.exec(node, "cat /opt/hx-upload/sub/f.txt", timeout=30)
    assert cat.stdout == "hello vm\n"

    assert await sub.power(node, "status") == "on"
    before = (await sub.exec(node, "cat /proc/sys/kernel/random/boot_id", timeout=30)).stdout
    t0 = time.monotonic()
    await sub.reboot(node)
    TIMINGS["harness_reboot_to_ssh_sec"] = time.monotonic() - t0
    after = (await sub.exec(node, "cat /proc/sys/kernel/random/boot_id", timeout=30)).stdout
    assert after.strip() and after != before


IDENTITY = ("cat /etc/machine-id; ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub; "
            "ip -4 -o addr show scope global | awk '{print $4}'; hostname; "
            "systemctl is-system-running --wait; date +%s.%N")


async def _identity(sub, node: Node) -> tuple[list[str], float, float]:
    await sub.wait_ready([node], SSH_TIMEOUT)
    before = time.time()
    out = await sub.exec(node, IDENTITY, timeout=60)
    assert out.ok, out.stderr
    return out.stdout.split("\n"), before, time.time()


def _served_key(node: Node) -> str:
    """The fingerprint of the host key the node's sshd presents to a new connection."""
    scan = subprocess.run(["ssh-keyscan", "-T", "20", "-t", "ed25519", node.host],
                          capture_output=True, text=True, timeout=60).stdout
    return subprocess.run(["ssh-keygen", "-lf", "-"], input=scan, capture_output=True,
                          text=True, timeout=30).stdout.split()[1]


def _start_record(spec: TrialSpec, node: str = "node1") -> dict:
    return json.loads((spec.root / "vm" / f"start-{node}.json").read_text())


def test_two_trials_from_one_snapshot_are_distinct(substrate, tmp_path):
    """Both nodes are restored from the same template, yet each has its own machine-id,
    host key, address and hostname; the clock is the host's; systemd is running."""
    with applied(substrate, FakeTask(), tmp_path / "a") as (spec_a, nodes_a, _):
        with applied(substrate, FakeTask(nodes=[FakeNode("other")]), tmp_path / "b") as (
                spec_b, nodes_b, _):
            rec_a, rec_b = _start_record(spec_a), _start_record(spec_b, "other")
            assert rec_a["mode"] == rec_b["mode"] == "snapshot", (rec_a, rec_b)
            assert rec_a["template"] == rec_b["template"]
            a, a0, a1 = asyncio.run(_identity(substrate, nodes_a[0]))
            b, b0, b1 = asyncio.run(_identity(substrate, nodes_b[0]))
            # sshd serves the key made at the restore (not the template's, still in memory)
            assert [_served_key(nodes_a[0]), _served_key(nodes_b[0])] == \
                [a[1].split()[1], b[1].split()[1]]
    for lines, node, t0, t1, name in ((a, nodes_a[0], a0, a1, "node1"),
                                      (b, nodes_b[0], b0, b1, "other")):
        machine_id, key, address, hostname, state, clock = lines[:6]
        assert len(machine_id) == 32 and address.split("/")[0] == node.host
        assert hostname == name and state == "running", lines
        assert t0 - 1 <= float(clock) <= t1 + 1, (t0, clock, t1)
    assert a[0] != b[0] and a[1] != b[1] and a[2] != b[2]


def test_cold_start_stays_available(substrate, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_VM_START", "cold")
    with applied(substrate, FakeTask(), tmp_path) as (spec, nodes, _):
        lines, _, _ = asyncio.run(_identity(substrate, nodes[0]))
        record = _start_record(spec)
    assert record["mode"] == "cold" and "HARNESS_VM_START" in record["reason"]
    assert lines[3] == "node1" and lines[4] == "running"


def test_raw_qemu_baseline_boot_to_ssh(substrate, tmp_path):
    """The same kernel, initrd, overlay and seed disk, booted by qemu-system-x86_64 alone."""
    from harness.substrates.libvirt.baseline import raw_boot_to_ssh

    TIMINGS["raw_qemu_boot_to_ssh_sec"] = raw_boot_to_ssh(tmp_path, accel="tcg",
                                                          timeout=SSH_TIMEOUT)
    _report()


def _report() -> None:
    rows = [f"  {k:<28} {v:7.1f}" for k, v in TIMINGS.items()]
    if "harness_apply_to_ssh_sec" in TIMINGS:
        ratio = TIMINGS["harness_apply_to_ssh_sec"] / TIMINGS["raw_qemu_boot_to_ssh_sec"]
        rows.append(f"  {'ratio harness/raw':<28} {ratio:7.2f}")
    print("\nvm boot timings (s):\n" + "\n".join(rows))
