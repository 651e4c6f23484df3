"""`harness doctor`: is this host ready? Each check says PASS, WARN or FAIL and the fix."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import asdict, dataclass

from harness.paths import harness_home, provider_mirror, terraform_cli_config

SETUP = "run scripts/setup.sh"


@dataclass
class Check:
    name: str
    status: str  # PASS | WARN | FAIL
    detail: str
    fix: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _docker() -> list[Check]:
    from harness import firewall
    from harness.substrates.docker import engine

    try:
        st = engine.status()
    except Exception as exc:
        return [Check("docker engine", "FAIL", f"not reachable: {exc}"[:200],
                      f"sudo {SETUP} (it starts the harness's own Docker engine)")]
    hardened = st["userns"] and st["cgroupns"] and st["runtime"] == "hx-runc"
    detail = (f"harness engine {st['version']} at {st['host']}: userns-remap "
              f"{'on' if st['userns'] else 'OFF'}, cgroupns "
              f"{'private' if st['cgroupns'] else 'OFF'}, runtime {st['runtime']}")
    checks = [Check("docker engine", "PASS" if hardened else "FAIL", detail,
                    "" if hardened else f"sudo {SETUP}")]
    ok, how = firewall.loaded()
    checks.append(Check("trial firewall", "PASS" if ok else "FAIL", how,
                        "" if ok else f"sudo {SETUP}"))
    from harness.images import docker_base_status

    ok, desc = docker_base_status()
    checks.append(Check("docker base image", "PASS" if ok else "FAIL", desc,
                        "" if ok else "harness image build --kind docker"))
    return checks


def _terraform() -> list[Check]:
    from harness.terraform import PROVIDERS, terraform_version

    try:
        version = terraform_version()
        major, minor = (int(x) for x in version.split(".")[:2])
        status = "PASS" if (major, minor) >= (1, 5) else "FAIL"
        checks = [Check("terraform", status, f"Terraform {version}",
                        "" if status == "PASS" else f"{SETUP} (installs Terraform 1.11)")]
    except Exception as exc:
        checks = [Check("terraform", "FAIL", str(exc)[:200], SETUP)]
    rc = terraform_cli_config()
    checks.append(Check("terraform CLI config", "PASS" if rc.exists() else "FAIL", str(rc),
                        "" if rc.exists() else SETUP))
    for name, p in PROVIDERS.items():
        d = provider_mirror() / "registry.terraform.io" / p["source"] / p["version"]
        found = list(d.glob("linux_amd64/terraform-provider-*")) if d.exists() else []
        missing = "FAIL" if name == "docker" else "WARN"
        checks.append(Check(f"provider {p['source']}", "PASS" if found else missing,
                            str(found[0]) if found else f"missing in {d.parent}",
                            "" if found else f"scripts/providers/{name}.sh"))
    return checks


def _ansible() -> list[Check]:
    checks = []
    try:
        import ansible_runner  # noqa: F401
        from ansible.release import __version__ as core_version

        checks.append(Check("ansible", "PASS", f"ansible-core {core_version} + ansible-runner"))
    except ImportError as exc:
        return [Check("ansible", "FAIL", str(exc), SETUP)]
    try:
        import ansible_collections.community.docker as cd

        checks.append(Check("collection community.docker", "PASS", list(cd.__path__)[0]))
    except ImportError:
        checks.append(Check("collection community.docker", "FAIL", "not installed",
                            "pip install ansible (Galaxy is not used)"))
    return checks


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
        from harness.substrates.libvirt import detect_domain_type

        kind = detect_domain_type()
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
    from harness.substrates.libvirt.host import KVM_DEVICE_FIX, kvm_device_problem

    problem = kvm_device_problem()
    if problem is None:
        return Check("/dev/kvm", "PASS", "root:kvm, group read-write (libvirt's QEMU "
                     "capabilities cache stays valid)")
    return Check("/dev/kvm", "WARN", problem, KVM_DEVICE_FIX)


def _disk() -> Check:
    home = harness_home()
    home.mkdir(parents=True, exist_ok=True)
    free_gb = shutil.disk_usage(home).free / 2**30
    status = "PASS" if free_gb >= 10 else "WARN" if free_gb >= 2 else "FAIL"
    return Check("disk space", status, f"{free_gb:.1f} GiB free under {home}",
                 "" if status == "PASS" else "free space (images and trial disks need ~10 GiB)")


def run_checks() -> list[Check]:
    checks = _docker() + _terraform() + _ansible() + _libvirt() + [_kvm(), _kvm_device(),
                                                                    _disk()]
    return [c for c in checks if c is not None]
