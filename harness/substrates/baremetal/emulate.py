"""Emulated bare metal: a pool of persistent QEMU machines whose BMCs speak real IPMI.

`harness pool emulate NAME --nodes N` makes (idempotently) N machines and writes
`$HARNESS_HOME/pools/NAME.yaml` in the same format as a real pool, so everything built on
pools runs on it. A local stand-in for physical hardware, named as such (`emulated: true`):

- machine `nodeI` is the libvirt domain `hxpool-NAME-nodeI`, booted from the VM base image
  through its own qcow2 overlay (its disk persists across trials, as a machine's does;
  `reimage` makes the overlay new) and a seed disk (root's key, hostname, /etc/hosts);
- two isolated networks: data `hxpd<hash>` (SSH from this host, node to node) and
  management `hxpm<hash>`, where every machine's BMC answers on its own address, port 623;
- the BMC is OpenIPMI's `ipmi_sim` (one process per machine): IPMI 1.5 (`-I lan`) and 2.0
  (`-I lanplus`) over the management network, in-band through QEMU's `ipmi-bmc-extern` +
  `isa-ipmi-kcs` (`/dev/ipmi0` in the guest), SOL on the guest's serial port. Chassis
  power runs the machine: power on starts `python -m harness.substrates.baremetal.emulate
  power` (it starts the domain and lives while it runs); power off asks the guest to shut
  down over the BMC channel, then stops that helper, which destroys the domain.

Files (the BMC's own configuration holds its password, so it lives with the secrets)::

    $HARNESS_HOME/pools/NAME.yaml, NAME.vault.yml     pool file, its credentials (encrypted)
    $HARNESS_HOME/pools/NAME/                         disks, seeds, consoles, BMC logs, SSH key
    $HARNESS_HOME/secrets/pools/NAME/                 vault password, BMC configs (0600)

Machine and network names start `hxpool-`/`hxp`, never `hx-`: trial gc leaves them alone;
`harness pool remove NAME` removes an emulated pool.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from harness import owner
from harness.errors import PreflightError, SubstrateError
from harness.paths import harness_home
from harness.substrates.baremetal import booted, ipmi
from harness.substrates.baremetal.emulated_machine import (
    BMC_HOST,
    DATA_HOST,
    EMU,
    MAKE_DISKS,
    MODULE,
    URI,
    bridges,
    domain_name,
    domain_xml,
    free_tcp_port,
    lan_conf,
    lancontrol,
    mac,
    machine_files,
    network_xml,
    pool_dir,
    secret_dir,
    subnets,
    write_secret,
)
from harness.substrates.baremetal.pool import Pool, load_pool, pool_path, pools_dir
from harness.substrates.libvirt import host, ssh
from harness.substrates.libvirt.image import build_vm_image


def _make_disks(name: str, node: str, hosts: str) -> None:
    """The machine's disk, new (an overlay on the image), and its seed disk."""
    files = machine_files(name, node)
    base = build_vm_image(log=lambda m: None)
    env = {**os.environ, "HX_BASE": str(base), "HX_OVERLAY": str(files["disk"]),
           "HX_SEED": str(files["seed"]), "HX_HOSTNAME": node, "HX_HOSTS": hosts,
           "HX_CLUSTER_INFO": "", "HX_URI": URI,
           "HX_AUTHORIZED_KEYS": (pool_dir(name) / "id_ed25519.pub").read_text().strip()}
    subprocess.run(["sh", str(MAKE_DISKS)], env=env, check=True, capture_output=True)


def emulate(name: str, nodes: int = 3, memory_mb: int = 512, log=print) -> Pool:
    """Make (or bring back up) the emulated pool `name` with `nodes` machines; idempotent."""
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    if not 1 <= nodes <= 16:
        raise PreflightError(f"--nodes {nodes}: an emulated pool has 1 to 16 machines")
    for tool in ("ipmi_sim", "ipmitool", "qemu-img", "mkfs.ext4"):
        if shutil.which(tool) is None:
            raise PreflightError(f"{tool} not found: run scripts/setup.sh (package openipmi "
                                 "for ipmi_sim)")
    pool_dir(name).mkdir(parents=True, exist_ok=True)
    key = pool_dir(name) / "id_ed25519"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                        f"harness pool {name}", "-f", str(key)], check=True)
    data_net, mgmt_net = subnets(name)
    names = [f"node{i}" for i in range(nodes)]
    ip = {n: str(data_net.network_address + DATA_HOST + i) for i, n in enumerate(names)}
    mgmt_ip = {n: str(mgmt_net.network_address + DATA_HOST + i) for i, n in enumerate(names)}
    bmc_ip = {n: str(mgmt_net.network_address + BMC_HOST + i) for i, n in enumerate(names)}
    hosts = "127.0.0.1\tlocalhost\n" + "".join(f"{ip[n]}\t{n}\n" for n in names)
    vault_pass = secret_dir(name) / "vault-pass"
    if not vault_pass.exists():
        write_secret(vault_pass, secrets.token_urlsafe(24) + "\n")
    creds = _credentials(name, names)
    conn = host.connect(URI)
    try:
        for bridge, net, addrs in ((bridges(name)[0], data_net, ip),
                                   (bridges(name)[1], mgmt_net, mgmt_ip)):
            leases = {mac(name, n, 0 if net is data_net else 1): a for n, a in addrs.items()}
            _ensure_network(conn, bridge, net, leases)
        taken = _ports_of_other_pools(name)
        fresh: list[str] = []
        for node in names:
            files = machine_files(name, node)
            if not files["disk"].exists():  # a machine keeps its disk across runs
                booted.drop(pool_dir(name), node)
                _make_disks(name, node, hosts)
                fresh.append(node)
            files["emu"].write_text(EMU)
            serial = _serial_port(name, node, taken)
            dom = domain_name(name, node)
            xml = domain_xml(name, node, memory_mb, files["disk"], files["seed"],
                              (mac(name, node, 0), mac(name, node, 1)), serial,
                              files["console"])
            try:
                conn.lookupByName(dom)
            except libvirt.libvirtError:
                conn.defineXML(xml)
            write_secret(files["conf"], lan_conf(
                node, bmc_ip[node], serial, creds[node][0], creds[node][1], dom,
                lancontrol(name, node, bmc_ip[node], mgmt_net),
                booted.files(pool_dir(name), node)))
    finally:
        conn.close()
    _write_pool_file(name, names, ip, mgmt_ip, bmc_ip, data_net, mgmt_net, memory_mb)
    pool = load_pool(name)
    ensure_up(pool, log=log)
    for node in fresh:
        save_first_boot(pool, node, log=log)
    return pool


def save_first_boot(pool: Pool, node: str, log=print) -> None:
    """Save a machine just booted for the first time (see `booted`): its reimages then
    restore it instead of booting. A failure only leaves its reimages cold."""
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    machine = pool.machine(node)
    creds = pool.bmc_credentials(machine)
    started = time.monotonic()
    res = asyncio.run(ssh.exec_on(machine.ssh.host, machine.ssh.key_path,
                                  "cat /proc/sys/kernel/random/boot_id", 60))
    if not res.ok:
        raise SubstrateError("baremetal", f"{node}: reading its boot_id failed", res.stderr)
    conn = host.connect(URI)
    try:
        booted.capture(conn, machine.domain, machine_files(pool.name, node)["disk"],
                       pool_dir(pool.name), node, build_vm_image(log=lambda m: None),
                       res.stdout.strip())
    except (libvirt.libvirtError, OSError, subprocess.CalledProcessError) as exc:
        log(f"pool {pool.name}: saving the first boot of {node} failed ({exc}); its "
            "reimages boot")
        booted.drop(pool_dir(pool.name), node)
    finally:
        conn.close()
    ipmi.power(creds, "off", settle=30)  # (the BMC sees the saved machine stop)
    saved_files = booted.files(pool_dir(pool.name), node)
    saved = saved_files["meta"].exists()
    if saved:
        saved_files["marker"].touch()
    ipmi.power(creds, "on")
    booted.settle(machine, timeout=240)
    if saved:
        log(f"pool {pool.name}: {node} saved after its first boot (and restored) in "
            f"{time.monotonic() - started:.0f}s")


def _ports_of_other_pools(name: str) -> set[int]:
    """The VM-channel ports the BMCs of every other emulated pool keep in their configs: a
    port is checked free when chosen, but another pool's BMC that is not running at that
    moment (being restarted) would lose it, and its machine's QEMU would then reach this
    pool's BMC."""
    return {port for conf in (harness_home() / "secrets" / "pools").glob("*/*.lan.conf")
            if conf.parent.name != name and (port := _kept_port(conf)) is not None}


def _kept_port(conf: Path) -> int | None:
    """The VM-channel port a BMC config keeps (its `serial 15` line), if any."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in conf.read_text().splitlines():
            if line.strip().startswith("serial 15 "):
                return int(line.split()[3])
    return None


def _serial_port(name: str, node: str, taken: set[int]) -> int:
    """The BMC's VM-channel port of a machine, kept in its BMC config once chosen."""
    kept = _kept_port(machine_files(name, node)["conf"])
    if kept is not None:
        taken.add(kept)
        return kept
    seed = int(hashlib.sha256(f"{name}/{node}".encode()).hexdigest(), 16) % 997
    return free_tcp_port(seed, taken)


def _credentials(name: str, names: list[str]) -> dict[str, tuple[str, str]]:
    """Per machine (user, password) from the pool's vault; new random ones for new machines
    (the vault is rewritten encrypted; nothing else holds them but the BMC configs)."""
    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.parsing.vault import VaultLib, VaultSecret

    lib = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(
        (secret_dir(name) / "vault-pass").read_bytes().strip()))])
    vault = pools_dir() / f"{name}.vault.yml"
    data = yaml.safe_load(lib.decrypt(vault.read_bytes())) if vault.exists() else {}
    for node in names:
        data.setdefault(f"{node}_bmc_user", "hxadmin")
        data.setdefault(f"{node}_bmc_password", secrets.token_urlsafe(12)[:16])
    vault.write_bytes(lib.encrypt(yaml.safe_dump(data).encode()))
    return {n: (data[f"{n}_bmc_user"], data[f"{n}_bmc_password"]) for n in names}


def _ensure_network(conn, bridge: str, cidr, leases: dict[str, str]) -> None:
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    try:
        net = conn.networkLookupByName(bridge)
    except libvirt.libvirtError:
        net = conn.networkDefineXML(network_xml(bridge, cidr, leases))
    if not net.isActive():
        net.create()


def _write_pool_file(name: str, names: list[str], ip: dict, mgmt_ip: dict, bmc_ip: dict,
                     data_net, mgmt_net, memory_mb: int) -> None:
    key = pool_dir(name) / "id_ed25519"
    doc = {
        "reset": "reimage", "emulated": True,
        "vault_file": f"{name}.vault.yml",
        "vault_password_file": str(secret_dir(name) / "vault-pass"),
        "emulation": {"data_cidr": str(data_net), "management_cidr": str(mgmt_net),
                      "memory_mb": memory_mb, "uri": URI},
        "machines": [{
            "name": n, "domain": domain_name(name, n), "tags": ["emulated", "x86_64"],
            "ssh": {"host": ip[n], "port": 22, "user": "root", "key": str(key)},
            "bmc": {"address": bmc_ip[n], "port": 623, "interface": "lanplus",
                    "user": f"vault:{n}_bmc_user", "password": f"vault:{n}_bmc_password"},
            "management_address": mgmt_ip[n]} for n in names],
    }
    path = pool_path(name)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text("# An emulated bare-metal pool (harness pool emulate): QEMU machines with "
                   "ipmi_sim BMCs.\n" + yaml.safe_dump(doc, sort_keys=False))
    tmp.replace(path)


def _bmc_running(pidfile: Path) -> bool:
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    try:
        return "ipmi_sim" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def ensure_up(pool: Pool, log=print, timeout: float = 240.0) -> None:
    """Networks active, BMC addresses on the management bridge, every BMC running (which
    powers its machine on), every machine answering SSH with /dev/ipmi0 present."""
    ensure_bmcs(pool, log)
    key = pool.machines[0].ssh.key_path

    async def ready() -> None:
        await asyncio.gather(*(ssh.wait_ready(m.ssh.host, key, timeout) for m in pool.machines))
        for m in pool.machines:
            res = await ssh.exec_on(m.ssh.host, key, IPMI_MODULES, 60)
            if not res.ok:
                raise SubstrateError("baremetal", f"{m.name}: in-band IPMI did not come up",
                                     res.stderr)

    log(f"pool {pool.name}: waiting for {len(pool.machines)} machine(s) to answer SSH")
    asyncio.run(ready())


def ensure_bmcs(pool: Pool, log=print, only: str | None = None) -> None:
    """Networks active, BMC addresses on the management bridge, every BMC (or machine
    `only`'s) running, which powers its machine on: what power control needs (a pool left
    by a killed process or a host reboot has none)."""
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    name = pool.name
    data_bridge, mgmt_bridge = bridges(name)
    meta = (yaml.safe_load(pool_path(name).read_text()) or {}).get("emulation") or {}
    mgmt_net = ipaddress.ip_network(meta["management_cidr"])
    conn = host.connect(URI)
    try:
        for bridge in (data_bridge, mgmt_bridge):
            net = conn.networkLookupByName(bridge)
            if not net.isActive():
                net.create()
    except libvirt.libvirtError as exc:
        raise PreflightError(f"emulated pool {name}: network missing ({exc}); run `harness "
                             f"pool emulate {name}` again") from None
    finally:
        conn.close()
    for m in pool.machines if only is None else [pool.machine(only)]:
        addr = f"{m.bmc.address}/{mgmt_net.prefixlen}"
        present = subprocess.run(["ip", "-o", "addr", "show", "dev", mgmt_bridge],
                                 capture_output=True, text=True).stdout
        if f" {addr} " not in present:
            subprocess.run(["ip", "addr", "add", addr, "dev", mgmt_bridge], check=True)
        files = machine_files(name, m.name)
        if not _bmc_running(files["pid"]):
            files["state"].mkdir(parents=True, exist_ok=True)
            log(f"pool {name}: starting the BMC of {m.name} ({m.bmc.address}:623)")
            with open(files["log"], "ab") as out:
                proc = subprocess.Popen(
                    ["ipmi_sim", "-c", str(files["conf"]), "-f", str(files["emu"]),
                     "-s", str(files["state"]), "-n"],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True)
            files["pid"].write_text(f"{proc.pid} {owner.tag()}\n")


# also `sync`: a machine's first boot writes its SSH host key, which a hard reset within
# the page cache's writeback delay would leave empty (sshd then fails on every boot)
IPMI_MODULES = ("sync; printf 'ipmi_si\\nipmi_devintf\\n' > /etc/modules-load.d/hx-ipmi.conf; "
                "modprobe ipmi_si; modprobe ipmi_devintf; "
                "for i in $(seq 1 50); do [ -e /dev/ipmi0 ] && exit 0; sleep 0.2; done; "
                "echo 'no /dev/ipmi0' >&2; exit 1")


def power(domain: str, uri: str = URI, save: Path | None = None,
          marker: Path | None = None) -> int:
    """The BMC's power-on command: start the domain, live while it runs; on SIGTERM (the
    BMC's power off after its graceful request) destroy it."""
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    conn = host.connect(uri)
    try:
        dom = conn.lookupByName(domain)
        booted.power_on(dom, conn, save, marker)
        while not stop:
            time.sleep(0.5)
            if not dom.isActive():
                return 0
        if dom.isActive():
            dom.destroy()
    except libvirt.libvirtError as exc:
        print(f"power {domain}: {exc}", file=sys.stderr)
        return 1
    finally:
        conn.close()
    return 0


def reimage(pool: Pool, node: str, log=print) -> None:
    """Revert a machine to its pristine state: power off through its BMC (as a reimage
    service would), then restore its saved first boot (see `booted`), or else a new
    overlay on the image and power on."""
    machine = pool.machine(node)
    creds = pool.bmc_credentials(machine)
    ensure_bmcs(pool, log=lambda msg: None, only=node)
    ipmi.power(creds, "off")  # (returns once the BMC reports off)
    disk = machine_files(pool.name, node)["disk"]
    conn = host.connect(URI)
    try:
        why = booted.unusable(conn, pool_dir(pool.name), node, build_vm_image(log=lambda m: None))
    finally:
        conn.close()
    if why is None:
        booted.stage(pool_dir(pool.name), node, disk)
        try:
            ipmi.power(creds, "on")
            booted.settle(machine)
            log(f"pool {pool.name}: {node} reimaged (its saved first boot restored)")
            return
        except SubstrateError as exc:
            why = f"the restored machine did not answer: {exc}"
            booted.drop(pool_dir(pool.name), node)
            ipmi.power(creds, "off")
        finally:  # (a marker left behind would make a later power-on restore)
            booted.files(pool_dir(pool.name), node)["marker"].unlink(missing_ok=True)
    if why != "no saved first boot":
        log(f"pool {pool.name}: {node}: reimage boots ({why})")
    hosts = "127.0.0.1\tlocalhost\n" + "".join(f"{m.ssh.host}\t{m.name}\n" for m in pool.machines)
    _make_disks(pool.name, node, hosts)
    ipmi.power(creds, "on")
    log(f"pool {pool.name}: {node} reimaged")


def remove(name: str, log=print) -> list[str]:
    """Remove an emulated pool: BMCs, domains, networks, disks, pool file, vault, secrets."""
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    removed = []
    for pidfile in sorted(pool_dir(name).glob("*-bmc.pid")):
        if _bmc_running(pidfile):
            os.killpg(int(pidfile.read_text().split()[0]), signal.SIGKILL)
            removed.append(f"bmc {pidfile.stem}")
    conn = host.connect(URI)
    try:
        for dom in conn.listAllDomains():
            if dom.name().startswith(f"hxpool-{name}-"):
                if dom.isActive():
                    dom.destroy()
                dom.undefine()
                removed.append(f"domain {dom.name()}")
        for bridge in bridges(name):
            try:
                net = conn.networkLookupByName(bridge)
            except libvirt.libvirtError:
                continue
            if net.isActive():
                net.destroy()
            net.undefine()
            removed.append(f"network {bridge}")
    finally:
        conn.close()
    for path in (pool_dir(name), harness_home() / "secrets" / "pools" / name,
                 pools_dir() / f"{name}.leases"):
        if path.exists():
            shutil.rmtree(path)
            removed.append(str(path))
    for path in (pool_path(name), pools_dir() / f"{name}.vault.yml"):
        if path.exists():
            path.unlink()
            removed.append(str(path))
    return removed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    sub = parser.add_subparsers(dest="action", required=True)
    p = sub.add_parser("power", help="the BMC's power-on command (internal)")
    p.add_argument("--domain", required=True)
    p.add_argument("--uri", default=URI)
    p.add_argument("--restore", type=Path, help="the save image a reimage restores")
    p.add_argument("--marker", type=Path, help="present: restore --restore, not boot")
    args = parser.parse_args(argv)
    return power(args.domain, args.uri, args.restore, args.marker)


if __name__ == "__main__":
    sys.exit(main())
