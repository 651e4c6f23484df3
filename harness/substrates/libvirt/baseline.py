"""The raw baseline VM boots are measured against: the same kernel, initrd, overlay and seed
disk as a trial node, booted by qemu-system-x86_64 alone (user networking, no libvirt, no
Terraform, no Ansible), timed until SSH answers. Used by bench/vm_boot.py and its test."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from harness.errors import SubstrateError
from harness.paths import TERRAFORM_MODULES
from harness.substrates.libvirt import ssh
from harness.substrates.libvirt.image import KERNEL_CMDLINE, build_vm_image, kernel_paths

MAKE_DISKS = TERRAFORM_MODULES / "libvirt_trial" / "files" / "make-disks.sh"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raw_boot_to_ssh(work: Path, accel: str = "tcg", timeout: float = 240.0) -> float:
    """Seconds from starting QEMU to the first successful SSH command in the guest."""
    base = build_vm_image(log=lambda _: None)
    kernel, initrd = kernel_paths(base)
    pub = ssh.ensure_key(work, "hx-raw-baseline")
    env = {**os.environ, "HX_BASE": str(base), "HX_OVERLAY": str(work / "hx-raw.qcow2"),
           "HX_SEED": str(work / "hx-raw-seed.img"), "HX_HOSTNAME": "raw",
           "HX_HOSTS": "127.0.0.1\tlocalhost\n", "HX_CLUSTER_INFO": "",
           "HX_AUTHORIZED_KEYS": pub}
    subprocess.run([str(MAKE_DISKS)], env=env, check=True, capture_output=True)
    port = _free_port()
    started = time.monotonic()
    qemu = subprocess.Popen(
        ["qemu-system-x86_64", "-machine", f"pc,accel={accel}", "-m", "1024", "-smp", "1",
         "-kernel", str(kernel), "-initrd", str(initrd), "-append", KERNEL_CMDLINE,
         "-drive", f"file={work / 'hx-raw.qcow2'},if=virtio,format=qcow2",
         "-drive", f"file={work / 'hx-raw-seed.img'},if=virtio,format=raw",
         "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22",
         "-device", "virtio-net-pci,netdev=n0", "-display", "none",
         "-serial", f"file:{work / 'console.log'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        argv = ssh.ssh_argv("127.0.0.1", ssh.key_path(work), connect_timeout=3)
        while time.monotonic() - started < timeout:
            probe = subprocess.run([*argv[:-1], "-p", str(port), argv[-1], "true"],
                                   capture_output=True, timeout=30)
            if probe.returncode == 0:
                return time.monotonic() - started
            if qemu.poll() is not None:
                raise SubstrateError("vm", "raw qemu exited: "
                                     + qemu.stderr.read().decode()[-500:])
            time.sleep(0.5)
        raise SubstrateError("vm", f"raw qemu guest not reachable over SSH in {timeout:.0f}s")
    finally:
        qemu.kill()
        qemu.wait()
