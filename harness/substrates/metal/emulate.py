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
  power runs the machine: power on starts `python -m harness.substrates.metal.emulate
  power` (it starts the domain and lives while it runs); power off asks the guest to shut
  down over the BMC channel, then stops that helper, which destroys the domain.

Each BMC has two accounts (`accounts.py`): user 2, `elabman` as on CloudLab, the
task-facing one (its password in the pool's vault); user `accounts.HARNESS_USER_ID`, the
harness's own (a random name and password in the secrets directory), for power and
resets only. A reimage restores the BMC from its configuration: ipmi_sim is restarted
without the state it persisted (users, LAN parameters an agent changed in-band); `repair`
does the same with a new harness password.

Files (the BMC's configuration and state hold passwords, so they live with the secrets)::

    $HARNESS_HOME/pools/NAME.yaml, NAME.vault.yml     pool file, task accounts (encrypted)
    $HARNESS_HOME/pools/NAME/                         disks, seeds, consoles, BMC logs, SSH key
    $HARNESS_HOME/secrets/pools/NAME/                 vault password, BMC configs and state,
                                                      harness accounts (0600)

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
from harness.substrates import ipmi, ssh
from harness.substrates.hypervisor import host
from harness.substrates.hypervisor.image import build_vm_image
from harness.substrates.metal import accounts, booted, lease
from harness.substrates.metal.emulated_machine import (
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
    harness_refs,
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
from harness.substrates.metal.pool import Machine, Pool, load_pool, pool_path, pools_dir


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
    _credentials(name, names)
    for node in names:
        _harness_account(name, node)
    conn = host.connect(URI)
    serials: dict[str, int] = {}
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
            serials[node] = serial = _serial_port(name, node, taken)
            dom = domain_name(name, node)
            xml = domain_xml(name, node, memory_mb, files["disk"], files["seed"],
                              (mac(name, node, 0), mac(name, node, 1)), serial,
                              files["console"])
            try:
                conn.lookupByName(dom)
            except libvirt.libvirtError:
                conn.defineXML(xml)
    finally:
        conn.close()
    _write_pool_file(name, names, ip, mgmt_ip, bmc_ip, data_net, mgmt_net, memory_mb)
    pool = load_pool(name)
    _reconfigure(pool, serials)
    ensure_up(pool, log=log)
    for node in fresh:
        save_first_boot(pool, node, log=log)
    return pool


def _reconfigure(pool: Pool, serials: dict[str, int] | None = None) -> None:
    """Write every BMC's configuration; a BMC configured otherwise before (other accounts:
    a pool made before the harness had its own) is stopped and forgets its state, to start
    again from the new configuration (`ensure_bmcs`; its machine keeps running), unless a
    running trial holds the machine: its reset at teardown does it then."""
    busy = _live_leases(pool.name)
    for m in pool.machines:
        changed = _write_bmc_conf(pool, m.name, (serials or {}).get(m.name))
        old = machine_files(pool.name, m.name)["old_state"].exists()
        if (changed or old) and m.name not in busy:
            stop_bmc(pool.name, m.name)
            _wipe_bmc_state(pool.name, m.name)


def upgrade(pool: Pool, log=print) -> Pool:
    """An emulated pool made before the harness had its own BMC account gets one: its pool
    file names it (`bmc.harness`), its secrets hold it, its task-facing account is named
    `elabman`, and its BMCs take the new configuration (`_reconfigure`). Idempotent."""
    if not pool.emulated or all(pool.has_harness_account(m) for m in pool.machines if m.bmc):
        return pool
    names = [m.name for m in pool.machines]
    _credentials(pool.name, names)
    path = pool_path(pool.name)
    text = path.read_text()
    doc = yaml.safe_load(text)
    for m in doc["machines"]:
        _harness_account(pool.name, m["name"])
        m["bmc"].update({"cipher_suite": 3, "user_id": accounts.TASK_USER_ID,
                         "harness": {"user_id": accounts.HARNESS_USER_ID,
                                     **harness_refs(pool.name, m["name"])}})
    header = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(header + yaml.safe_dump(doc, sort_keys=False))
    tmp.replace(path)
    log(f"pool {pool.name}: its BMCs get an account of the harness's own (user id "
        f"{accounts.HARNESS_USER_ID}); the task-facing one is user id "
        f"{accounts.TASK_USER_ID}, {accounts.CLOUDLAB_USER}")
    pool = load_pool(pool.name)
    _reconfigure(pool)
    ensure_bmcs(pool, log=lambda msg: None)
    return pool


def _live_leases(name: str) -> set[str]:
    return {m for m, r in lease.read(name).items() if lease.is_live(r)}


def _harness_account(name: str, node: str, rotate: bool = False) -> None:
    """The machine's harness account in the secrets directory (made once; `rotate`: a new
    password): a random name and password no task is ever given."""
    files = machine_files(name, node)
    if not files["harness_user"].exists():
        write_secret(files["harness_user"], "hx" + secrets.token_hex(4) + "\n")
    if rotate or not files["harness_password"].exists():
        write_secret(files["harness_password"], secrets.token_urlsafe(12)[:16] + "\n")


def _write_bmc_conf(pool: Pool, node: str, serial: int | None = None) -> bool:
    """Write the machine's BMC configuration from the pool (its two accounts, its address,
    its VM channel port: kept, or the one its domain connects to); whether it changed."""
    name, machine = pool.name, pool.machine(node)
    meta = pool.emulation
    mgmt_net = ipaddress.ip_network(meta["management_cidr"])
    files = machine_files(name, node)
    if serial is None:
        serial = _kept_port(files["conf"]) or _domain_port(machine.domain)
    if serial is None:
        raise SubstrateError("baremetal", f"{name}/{node}: neither its BMC configuration nor "
                             f"its domain names the BMC's port; run `harness pool emulate "
                             f"{name}` again")
    users = [{k: c[k] for k in ("user_id", "user", "password")}
             for c in (pool.task_credentials(machine), pool.bmc_credentials(machine))]
    text = lan_conf(node, machine.bmc.address, serial, users, machine.domain,
                    lancontrol(name, node, machine.bmc.address, mgmt_net),
                    booted.files(pool_dir(name), node))
    try:
        if files["conf"].read_text() == text:
            return False
    except OSError:
        pass
    write_secret(files["conf"], text)
    return True


def _domain_port(domain: str | None) -> int | None:
    """The BMC port a machine's domain connects its in-band channel to."""
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    if not domain:
        return None
    conn = host.connect(URI)
    try:
        xml = conn.lookupByName(domain).XMLDesc()
    except libvirt.libvirtError:
        return None
    finally:
        conn.close()
    import re

    m = re.search(r"socket,id=hxbmc,host=127\.0\.0\.1,port=(\d+)", xml)
    return int(m.group(1)) if m else None


def save_first_boot(pool: Pool, node: str, log=print) -> None:
    """Save a machine just booted for the first time (see `booted`): its reimages then
    restore it instead of booting. A failure only leaves its reimages cold."""
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    machine = pool.machine(node)
    creds = pool.bmc_credentials(machine)  # (the harness's own account)
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
    """Per machine the task-facing account (user, password) from the pool's vault; new
    random passwords for new machines, user `elabman` as on CloudLab (pools made before
    named it `hxadmin`). The vault is rewritten encrypted; nothing else holds them but the
    BMC configs."""
    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.parsing.vault import VaultLib, VaultSecret

    lib = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(
        (secret_dir(name) / "vault-pass").read_bytes().strip()))])
    vault = pools_dir() / f"{name}.vault.yml"
    data = yaml.safe_load(lib.decrypt(vault.read_bytes())) if vault.exists() else {}
    for node in names:
        if data.get(f"{node}_bmc_user") in (None, "hxadmin"):
            data[f"{node}_bmc_user"] = accounts.CLOUDLAB_USER
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
                    "cipher_suite": 3, "user_id": accounts.TASK_USER_ID,
                    "user": f"vault:{n}_bmc_user", "password": f"vault:{n}_bmc_password",
                    "harness": {"user_id": accounts.HARNESS_USER_ID,
                                **harness_refs(name, n)}},
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


BOOT_TIMEOUT = 600.0  # three guests under TCG beside other guests on two cores: minutes


def ensure_up(pool: Pool, log=print, timeout: float = BOOT_TIMEOUT) -> None:
    """Networks active, BMC addresses on the management bridge, every BMC running (which
    powers its machine on), every machine answering SSH with /dev/ipmi0 present (within
    `timeout`: it only bounds a guest that never comes up)."""
    pool = upgrade(pool, log=log)
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
    _ensure_networks(pool)
    for m in pool.machines if only is None else [pool.machine(only)]:
        _ensure_address(pool, m)
        if not _bmc_running(machine_files(pool.name, m.name)["pid"]):
            start_bmc(pool, m, log)


def _ensure_networks(pool: Pool) -> None:
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    conn = host.connect(URI)
    try:
        for bridge in bridges(pool.name):
            net = conn.networkLookupByName(bridge)
            if not net.isActive():
                net.create()
    except libvirt.libvirtError as exc:
        raise PreflightError(f"emulated pool {pool.name}: network missing ({exc}); run "
                             f"`harness pool emulate {pool.name}` again") from None
    finally:
        conn.close()


def _ensure_address(pool: Pool, m: Machine) -> None:
    """The BMC's address on the management bridge (where ipmi_sim binds it)."""
    mgmt_bridge = bridges(pool.name)[1]
    mgmt_net = ipaddress.ip_network(pool.emulation["management_cidr"])
    addr = f"{m.bmc.address}/{mgmt_net.prefixlen}"
    present = subprocess.run(["ip", "-o", "addr", "show", "dev", mgmt_bridge],
                             capture_output=True, text=True).stdout
    if f" {addr} " not in present:
        subprocess.run(["ip", "addr", "add", addr, "dev", mgmt_bridge], check=True)


def start_bmc(pool: Pool, m: Machine, log=print) -> None:
    """Start the machine's ipmi_sim (its configuration says `startnow`: it powers the
    machine on, restoring its saved first boot when a reimage left the marker). Its
    configuration is written again first: its power command names this interpreter and
    module, which a configuration made by an older checkout or another venv may not."""
    files = machine_files(pool.name, m.name)
    _write_bmc_conf(pool, m.name)
    files["state"].mkdir(parents=True, exist_ok=True, mode=0o700)
    log(f"pool {pool.name}: starting the BMC of {m.name} ({m.bmc.address}:623)")
    with open(files["log"], "ab") as out:
        proc = subprocess.Popen(
            ["ipmi_sim", "-c", str(files["conf"]), "-f", str(files["emu"]),
             "-s", str(files["state"]), "-n"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    files["pid"].write_text(f"{proc.pid} {owner.tag()}\n")


def stop_bmc(name: str, node: str, timeout: float = 10.0) -> None:
    """Stop the machine's ipmi_sim and its power-on helper (its process group; the guest,
    if running, keeps running)."""
    pidfile = machine_files(name, node)["pid"]
    if not _bmc_running(pidfile):
        return
    with contextlib.suppress(ProcessLookupError, ValueError, OSError):
        os.killpg(int(pidfile.read_text().split()[0]), signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while _bmc_running(pidfile) and time.monotonic() < deadline:
        time.sleep(0.05)


def _wipe_bmc_state(name: str, node: str) -> None:
    """Forget what the BMC persisted (users, LAN and SOL parameters changed over IPMI,
    in-band or not): its next start reads its configuration only."""
    files = machine_files(name, node)
    for d in (files["state"], files["old_state"]):
        shutil.rmtree(d, ignore_errors=True)


def restore_bmc(pool: Pool, node: str, rotate: bool = False) -> None:
    """The machine's BMC as its configuration says, stopped (the caller starts it): the
    configuration written again from the pool (both accounts; `rotate`: a new harness
    password first), and the state it persisted forgotten."""
    stop_bmc(pool.name, node)
    if rotate:
        _harness_account(pool.name, node, rotate=True)
    _write_bmc_conf(pool, node)
    _wipe_bmc_state(pool.name, node)


def _stop_domain(domain: str | None) -> None:
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    conn = host.connect(URI)
    try:
        dom = conn.lookupByName(domain)
        if dom.isActive():
            dom.destroy()
    except libvirt.libvirtError as exc:
        raise SubstrateError("baremetal", f"domain {domain}: {exc}") from None
    finally:
        conn.close()


def verify_bmc(pool: Pool, node: str, wait: float = 15.0) -> None:
    """The BMC accepts the harness account (BMC answers may take a moment after a start);
    else `ipmi.BmcRefused`."""
    creds = pool.bmc_credentials(pool.machine(node))
    deadline = time.monotonic() + wait
    while True:
        try:
            accounts.check(creds)
            return
        except ipmi.BmcRefused:
            raise
        except SubstrateError as exc:
            if time.monotonic() > deadline:
                text = str(exc).removeprefix("baremetal: ")
                raise ipmi.BmcRefused(f"{text} (after its BMC was restarted)") from None
            time.sleep(0.5)


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


def reimage(pool: Pool, node: str, log=print, rotate: bool = False,
            reset_bmc: bool = True) -> None:
    """Revert a machine to its pristine state, its BMC included, as a reimage service that
    also resets the BMC would: the BMC stopped and the machine powered off, the BMC's
    configuration restored (its accounts and LAN settings: what an agent changed in-band
    is gone; `rotate`: a new harness password), then the saved first boot restored (see
    `booted`) or else a new overlay on the image, and the BMC started, which powers the
    machine on. The harness account must work afterwards (else `ipmi.BmcRefused`).
    `reset_bmc=False` (a CloudLab `reload` within an experiment, which reimages the disk
    only): the BMC keeps its state (accounts made in-band stay) and is not checked."""
    pool = upgrade(pool, log=log)
    machine = pool.machine(node)
    _ensure_networks(pool)
    _ensure_address(pool, machine)
    if reset_bmc:
        restore_bmc(pool, node, rotate=rotate)  # (stops the BMC: no power helper runs now)
    else:
        stop_bmc(pool.name, node)
    _stop_domain(machine.domain)
    creds = pool.bmc_credentials(machine)
    disk = machine_files(pool.name, node)["disk"]
    conn = host.connect(URI)
    try:
        why = booted.unusable(conn, pool_dir(pool.name), node, build_vm_image(log=lambda m: None))
    finally:
        conn.close()
    quiet = lambda msg: None  # noqa: E731
    if why is None:
        booted.stage(pool_dir(pool.name), node, disk)
        try:
            start_bmc(pool, machine, log=quiet)  # powers on: the saved boot is restored
            booted.settle(machine)
            if reset_bmc:
                verify_bmc(pool, node)
            log(f"pool {pool.name}: {node} reimaged (its saved first boot restored"
                + (", its BMC reset)" if reset_bmc else ")"))
            return
        except ipmi.BmcRefused:
            raise
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
    if _bmc_running(machine_files(pool.name, node)["pid"]):
        ipmi.power(creds, "on")
    else:
        start_bmc(pool, machine, log=quiet)  # powers on
    if reset_bmc:
        verify_bmc(pool, node)
    log(f"pool {pool.name}: {node} reimaged" + (" (its BMC reset)" if reset_bmc else ""))


def repair(pool: Pool, node: str, log=print) -> None:
    """Bring back a machine whose BMC refused the harness: its BMC configuration made again
    with a new harness password, ipmi_sim restarted without its persisted state, the
    machine reimaged; the harness account must work afterwards."""
    if _domain_port(pool.machine(node).domain) is None:
        raise PreflightError(f"pool {pool.name}: {node} has no domain any more; run `harness "
                             f"pool emulate {pool.name}` to make it again")
    reimage(pool, node, log=log, rotate=True)


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
