"""The hypervisor side, through libvirt-python: power, leftovers, sweep, the KVM probe.

libvirt-python is imported lazily (the `vm` extra); every call opens its own connection,
so the helpers are safe to run in worker threads (`asyncio.to_thread`).
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import os
import re
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote, urlsplit

from harness import owner
from harness.errors import PreflightError, SubstrateError
from harness.paths import harness_home
from harness.substrates.hypervisor import image
from harness.substrates.hypervisor.naming import PREFIX, bridge_name, resource_prefix

POWER_ACTIONS = ("on", "off", "cycle", "reset", "status")


def connect(uri: str):
    try:
        import libvirt
    except ImportError as exc:
        raise PreflightError("libvirt-python is missing: pip install -e '.[vm]' "
                             "(needs libvirt-dev and pkg-config)") from exc
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # errors raise; no stderr
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise PreflightError(f"libvirtd not reachable at {uri}: {exc}; start it "
                             "(systemctl start libvirtd, or `virtlogd -d; libvirtd -d` "
                             "without an init system)") from exc


LOCAL_NAMES = (None, "", "localhost", "127.0.0.1", "::1", socket.gethostname())


def this_machine(uri: str) -> bool:
    """Whether a libvirt URI reaches the daemon of this machine (`qemu+ssh://...@localhost`
    included): its pool, bridges and VM addresses are then local."""
    return urlsplit(uri).hostname in LOCAL_NAMES


def unreachable(uri: str) -> str | None:
    """None when the daemon at `uri` answers, else why not (one line)."""
    try:
        connect(uri).close()
    except PreflightError as exc:
        return exc.message
    return None


def power(uri: str, domain: str, action: str) -> str:
    """on / off / cycle / reset / status of one domain; returns the resulting state."""
    conn = connect(uri)
    try:
        return power_with(conn, domain, action)
    finally:
        conn.close()


def power_with(conn, domain: str, action: str) -> str:
    """`power` on an open connection (a BMC keeps one: over qemu+ssh each new one is an SSH
    login)."""
    import libvirt

    if action not in POWER_ACTIONS:
        raise SubstrateError("vm", f"unknown power action {action!r}; valid: "
                             f"{', '.join(POWER_ACTIONS)}")
    try:
        dom = conn.lookupByName(domain)
        if action == "on" and not dom.isActive():
            dom.create()
        elif action == "off" and dom.isActive():
            dom.destroy()
        elif action == "cycle":
            if dom.isActive():
                dom.destroy()
            dom.create()
        elif action == "reset":
            dom.reset() if dom.isActive() else dom.create()
        return "on" if dom.isActive() else "off"
    except libvirt.libvirtError as exc:
        raise SubstrateError("vm", f"power {action} {domain}: {exc}") from exc


def reboot(uri: str, domain: str) -> None:
    """Ask the guest to reboot (ACPI); the caller checks that it did."""
    conn = connect(uri)
    try:
        conn.lookupByName(domain).reboot(0)
    finally:
        conn.close()


def matches(name: str, prefixes: list[str]) -> bool:
    """Whether `name` is one of `prefixes` or a resource named after one (`<prefix>-...`)."""
    return any(name == p or name.startswith(p + "-") for p in prefixes)


def disk_paths(conn, xml: str, device: str | None = None) -> list[str]:
    """Paths of a domain's file and pool-volume disks, in the order of its XML (only the
    `<disk device=...>` kind `device` when given; a volume its pool cannot find is left
    out)."""
    paths = []
    for disk in ET.fromstring(xml).iterfind("./devices/disk"):
        src = disk.find("source")
        if src is None or (device and disk.get("device", "disk") != device):
            continue
        if src.get("file"):
            paths.append(src.get("file"))
        elif src.get("pool") and src.get("volume"):
            with contextlib.suppress(Exception):
                pool = conn.storagePoolLookupByName(src.get("pool"))
                paths.append(pool.storageVolLookupByName(src.get("volume")).path())
    return paths


def _domain_disks(conn, dom) -> list[str]:
    """Paths of a domain's file and pool-volume disks."""
    return disk_paths(conn, dom.XMLDesc(0))


def _fields(dom) -> dict[str, str]:
    """The key=value fields of a domain's description (trial, campaign, node, owner)."""
    desc = ""
    with contextlib.suppress(Exception):
        desc = dom.metadata(0, None)  # VIR_DOMAIN_METADATA_DESCRIPTION
    return dict(re.findall(r"(\w+)=(\S*)", desc or ""))


def _descriptions(conn) -> dict[str, dict[str, str]]:
    """Trial prefix -> fields of its domains' descriptions (trial, campaign, owner)."""
    trials: dict[str, dict[str, str]] = {}
    for dom in conn.listAllDomains():
        fields = _fields(dom)
        if dom.name().startswith(PREFIX) and "trial" in fields:
            trials.setdefault(PREFIX + fields["trial"], fields)
    return trials


def _trial_prefixes(conn, campaign: str | None, trial: str | None, force: bool = False
                    ) -> tuple[list[str] | None, list[str]]:
    """(prefixes to match, None = every `hx-` name; prefixes to spare).

    Trials whose owner process (the tag in the domain description) is alive and is not this
    process are spared, whether named or not, unless `force`.
    """
    if trial == "" or campaign == "":
        raise SubstrateError("vm", "empty trial or campaign filter; pass None to mean all")
    trials = _descriptions(conn)
    live = [] if force else sorted(p for p, f in trials.items()
                                   if owner.foreign_live(f.get("owner", ""), f.get("trial")))
    if trial:
        return [resource_prefix(trial)], live
    if not campaign:
        return None, live
    return sorted(p for p, f in trials.items() if f.get("campaign") == campaign), live


def trial_prefixes(uri: str, campaign: str | None, trial: str | None, force: bool = False
                   ) -> tuple[list[str] | None, list[str]]:
    """`_trial_prefixes` on a connection of its own."""
    conn = connect(uri)
    try:
        return _trial_prefixes(conn, campaign, trial, force)
    finally:
        conn.close()


def running_trial_roots(uri: str, campaign: str | None = None, trial: str | None = None,
                        force: bool = False) -> dict[str, Path]:
    """Trial name -> trial directory of the running domains a sweep may touch.

    The directory is the `root=` of the domain's description (URL-encoded), else found
    from its overlay disk (`<root>/vm/disks/hx-...qcow2`; on another machine's libvirt
    that is the host's directory, not the trial's); the same live-owner rule as
    `leftovers` applies.
    """
    import libvirt

    conn = connect(uri)
    roots: dict[str, Path] = {}
    try:
        prefixes, live = _trial_prefixes(conn, campaign, trial, force)
        for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            name = dom.name()
            if (not name.startswith(PREFIX) or matches(name, live)
                    or (prefixes is not None and not matches(name, prefixes))):
                continue
            fields = _fields(dom)
            trial_name = fields.get("trial")
            if trial_name and fields.get("root"):
                roots.setdefault(trial_name, Path(unquote(fields["root"])))
                continue
            for disk in _domain_disks(conn, dom):
                path = Path(disk)
                if trial_name and path.parent.name == "disks" and path.parent.parent.name == "vm":
                    roots.setdefault(trial_name, path.parent.parent.parent)
                    break
    finally:
        conn.close()
    return roots


def leftovers(uri: str, campaign: str | None = None, trial: str | None = None,
              remove: bool = False, force: bool = False) -> list[str]:
    """Domains, networks, pools, volumes, disks and bridges named `hx-...` (or one trial's)."""
    import libvirt

    conn = connect(uri)
    found: list[str] = []
    try:
        prefixes, live = _trial_prefixes(conn, campaign, trial, force)

        def _owned(name: str) -> bool:
            return (name.startswith(PREFIX) and not matches(name, live)
                    and (prefixes is None or matches(name, prefixes)))

        for dom in conn.listAllDomains():
            if not _owned(dom.name()):
                continue
            disks = [d for d in _domain_disks(conn, dom) if Path(d).name.startswith(PREFIX)]
            found.append(f"domain {dom.name()}")
            found += [f"disk {d}" for d in disks if Path(d).exists()]
            if remove:
                with contextlib.suppress(libvirt.libvirtError):
                    dom.destroy()
                dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM
                                  | libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE)
                for disk in disks:
                    Path(disk).unlink(missing_ok=True)
        bridges = {bridge_name(p.removeprefix(PREFIX)) for p in prefixes or []}
        spared = {bridge_name(p.removeprefix(PREFIX)) for p in live}
        for net in conn.listAllNetworks():
            if not _owned(net.name()):
                continue
            found.append(f"network {net.name()}")
            with contextlib.suppress(libvirt.libvirtError):
                bridges.add(net.bridgeName())
            if remove:
                if net.isActive():
                    net.destroy()
                net.undefine()
        for pool in conn.listAllStoragePools():
            vols = pool.listAllVolumes() if pool.isActive() else []
            for vol in vols:
                if _owned(vol.name()) and f"disk {vol.path()}" not in found:
                    found.append(f"volume {vol.path()}")
                    if remove:
                        with contextlib.suppress(libvirt.libvirtError):
                            vol.delete(0)
            if _owned(pool.name()):
                found.append(f"pool {pool.name()}")
                if remove:
                    if pool.isActive():
                        pool.destroy()
                    pool.undefine()
    finally:
        conn.close()
    for br in host_bridges() if this_machine(uri) else []:  # (another's are libvirt's)
        if br.startswith(PREFIX) and br not in spared and (prefixes is None or br in bridges):
            found.append(f"bridge {br}")
            if remove:
                subprocess.run(["ip", "link", "del", br], capture_output=True)
    return found


@functools.lru_cache(maxsize=32)
def _virtual_size_mb(path: str, mtime_ns: int) -> int:
    proc = subprocess.run(["qemu-img", "info", "--output", "json", "-U", path],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise PreflightError(f"qemu-img info {path}: {proc.stderr.strip()[-300:]}")
    return int(json.loads(proc.stdout)["virtual-size"]) // (1024 * 1024)


def virtual_size_mb(disk: Path) -> int:
    """The virtual size of a disk image in MiB."""
    return _virtual_size_mb(str(disk), disk.stat().st_mtime_ns)


def host_bridges() -> list[str]:
    net = Path("/sys/class/net")
    return sorted(p.name for p in net.iterdir() if (p / "bridge").exists()) if net.exists() else []


def taken_subnets(uri: str) -> set[ipaddress.IPv4Network]:
    """IPv4 subnets already used by libvirt networks or host interfaces."""
    taken: set[ipaddress.IPv4Network] = set()
    conn = connect(uri)
    try:
        for net in conn.listAllNetworks():
            for ip in ET.fromstring(net.XMLDesc(0)).iterfind("./ip"):
                if ip.get("address") and ip.get("family", "ipv4") == "ipv4":
                    mask = ip.get("netmask") or ip.get("prefix") or "24"
                    taken.add(ipaddress.ip_network(f"{ip.get('address')}/{mask}", strict=False))
    finally:
        conn.close()
    proc = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True)
    if proc.returncode == 0:
        for link in json.loads(proc.stdout or "[]"):
            for a in link.get("addr_info", []):
                taken.add(ipaddress.ip_network(f"{a['local']}/{a['prefixlen']}", strict=False))
    return taken


KVM_DEVICE_FIX = "chgrp kvm /dev/kvm && chmod 0660 /dev/kvm   (or scripts/setup.sh)"


def kvm_device_problem() -> str | None:
    """None when /dev/kvm is as Debian's udev rule leaves it (root:kvm 0660), else what is
    wrong. Without udev it stays root-only 0600: libvirt probes QEMU with KVM (as root),
    then finds /dev/kvm unusable by its qemu user, drops its capabilities cache and
    re-probes QEMU on nearly every API call (a domain start then takes minutes)."""
    import grp
    import stat

    try:
        st = os.stat("/dev/kvm")
        kvm_gid = grp.getgrnam("kvm").gr_gid
    except (OSError, KeyError):
        return None
    if st.st_gid == kvm_gid and stat.S_IMODE(st.st_mode) & 0o060 == 0o060:
        return None
    return (f"/dev/kvm is mode {stat.S_IMODE(st.st_mode):o}, gid {st.st_gid}: libvirt "
            "re-probes QEMU on every call (each VM start takes minutes)")


def kvm_works(kernel: Path, timeout: float = 20.0) -> tuple[bool, str]:
    """Boot `kernel` under KVM up to its "no root" panic; a hang or a failure says no.

    A real-mode probe is not enough: nested KVM here runs a boot sector fine and hangs
    silently once the kernel starts. The answer is cached per host boot and kernel in
    $HARNESS_HOME/kvm-probe.json.
    """
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm missing or not accessible"
    if not kernel.exists():
        return False, f"no kernel to probe KVM with ({kernel})"
    key = Path("/proc/sys/kernel/random/boot_id").read_text().strip() + f":{kernel}"
    cache = harness_home() / "kvm-probe.json"
    with contextlib.suppress(OSError, ValueError, KeyError):
        cached = json.loads(cache.read_text())
        if cached["key"] == key:
            return cached["kvm"], cached["reason"]
    log = harness_home() / "kvm-probe.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    argv = ["qemu-system-x86_64", "-accel", "kvm", "-M", "pc", "-m", "256", "-display", "none",
            "-nodefaults", "-no-user-config", "-no-reboot", "-serial", f"file:{log}",
            "-kernel", str(kernel), "-append", "console=ttyS0 panic=-1 root=/dev/hx-none"]
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        panicked = log.exists() and "Kernel panic" in log.read_text(errors="replace")
        ok = proc.returncode == 0 and panicked
        reason = (f"KVM kernel boot reached its panic in {time.monotonic() - started:.1f}s"
                  if ok else f"KVM kernel boot failed (exit {proc.returncode}): "
                  f"{proc.stderr.strip()[-200:]}")
    except subprocess.TimeoutExpired:
        ok, reason = False, f"KVM kernel boot hung for {timeout:.0f}s (nested KVM?)"
    except FileNotFoundError:
        ok, reason = False, "qemu-system-x86_64 not found"
    cache.write_text(json.dumps({"key": key, "kvm": ok, "reason": reason}))
    return ok, reason


def detect_domain_type() -> str:
    """kvm when the base image's kernel really boots under KVM here, else qemu (TCG).

    HARNESS_VM_DOMAIN_TYPE overrides the probe (cached per host boot by `host.kvm_works`).
    """
    forced = os.environ.get("HARNESS_VM_DOMAIN_TYPE")
    if forced in ("kvm", "qemu"):
        return forced
    kernel, _ = image.kernel_paths(image.image_dir() / "disk.qcow2")
    return "kvm" if kvm_works(kernel)[0] else "qemu"
