"""`harness doctor` checks of the vm substrates: libvirtd, KVM vs TCG, /dev/kvm."""

from __future__ import annotations

import os
import shutil
import subprocess

from harness.substrates.base import SETUP, Check
from harness.substrates.hypervisor import host


def checks() -> list[Check]:
    out = _libvirt() + [_kvm()]
    device = _kvm_device()
    return out + ([device] if device else [])


def _libvirt() -> list[Check]:
    virsh = shutil.which("virsh")
    if not virsh:
        return [Check("libvirtd", "WARN", "virsh not installed (VM substrates unavailable)",
                      SETUP)]
    proc = subprocess.run([virsh, "-c", "qemu:///system", "version"], capture_output=True,
                          text=True, timeout=20)
    if proc.returncode != 0:
        return [Check("libvirtd", "WARN", "not reachable (VM substrates unavailable)",
                      "virtlogd -d; libvirtd -d   (or scripts/setup.sh)")]
    return [Check("libvirtd", "PASS", proc.stdout.strip().splitlines()[-1][:120])]


def _kvm() -> Check:
    """KVM vs TCG. Nested KVM can pass a BIOS probe and still hang a guest kernel, so the
    decision comes from the vm substrate's own boot probe when it is available."""
    if not os.path.exists("/dev/kvm"):
        return Check("kvm", "WARN", "/dev/kvm missing: VM domains use type=qemu (TCG, slower)")
    try:
        kind = host.detect_domain_type()
    except Exception:
        return Check("kvm", "WARN", "/dev/kvm present; not probed (vm substrate unavailable): "
                     "VM domains default to type=qemu (TCG)")
    if kind == "kvm":
        return Check("kvm", "PASS", "KVM boots a guest: VM domains use type=kvm")
    return Check("kvm", "WARN", "KVM does not boot a guest here (nested): VM domains use "
                 "type=qemu (TCG)")


def _kvm_device() -> Check | None:
    if not os.path.exists("/dev/kvm") or not shutil.which("virsh"):
        return None
    problem = host.kvm_device_problem()
    if problem is None:
        return Check("/dev/kvm", "PASS", "root:kvm, group read-write (libvirt's QEMU "
                     "capabilities cache stays valid)")
    return Check("/dev/kvm", "WARN", problem, host.KVM_DEVICE_FIX)
