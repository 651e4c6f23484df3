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
import hashlib
import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

from harness import owner
from harness.errors import PreflightError, SubstrateError
from harness.paths import harness_home
from harness.substrates.baremetal import ipmi
from harness.substrates.baremetal.pool import Pool, load_pool, pool_path, pools_dir
from harness.substrates.libvirt import host, ssh
from harness.substrates.libvirt.image import KERNEL_CMDLINE, build_vm_image, kernel_paths

URI = "qemu:///system"
MODULE = "harness.substrates.baremetal.emulate"
MAKE_DISKS = Path(__file__).resolve().parents[1] / "libvirt" / "terraform" / "files" / \
    "make-disks.sh"
DATA_HOST, BMC_HOST = 10, 100  # data: .10+i; management: node .10+i, its BMC .100+i


def pool_dir(name: str) -> Path:
    return pools_dir() / name


def secret_dir(name: str) -> Path:
    path = harness_home() / "secrets" / "pools" / name
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.chmod(0o700)
    return path


def tag(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:8]


def domain_name(name: str, node: str) -> str:
    return f"hxpool-{name}-{node}"


def bridges(name: str) -> tuple[str, str]:
    return f"hxpd{tag(name)}", f"hxpm{tag(name)}"


def _write_secret(path: Path, data: bytes | str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def _subnets(name: str) -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]:
    """Two /24s for the pool's networks: kept from its pool file, else free ones."""
    path = pool_path(name)
    if path.is_file():
        meta = (yaml.safe_load(path.read_text()) or {}).get("emulation") or {}
        if meta.get("data_cidr") and meta.get("management_cidr"):
            return (ipaddress.ip_network(meta["data_cidr"]),
                    ipaddress.ip_network(meta["management_cidr"]))
    taken = host.taken_subnets(URI)
    start = int(tag(name), 16) % 200
    free = [ipaddress.ip_network(f"10.{250 - (start + k) % 40}.{(start * 7 + k) % 250}.0/24")
            for k in range(400)]
    free = [n for n in free if not any(n.overlaps(t) for t in taken)]
    if len(free) < 2:
        raise PreflightError("no two free /24 subnets for an emulated pool")
    return free[0], free[1]


def _mac(name: str, node: str, nic: int) -> str:
    h = hashlib.sha256(f"{name}/{node}/{nic}".encode()).hexdigest()
    return f"52:54:01:{h[0:2]}:{h[2:4]}:{h[4:6]}"


def _network_xml(bridge: str, cidr: ipaddress.IPv4Network, leases: dict[str, str]) -> str:
    gw = cidr.network_address + 1
    hosts = "".join(f"<host mac='{mac}' ip='{ip}'/>" for mac, ip in leases.items())
    return (f"<network><name>{bridge}</name><bridge name='{bridge}' stp='off'/>"
            f"<ip address='{gw}' prefix='{cidr.prefixlen}'><dhcp>"
            f"<range start='{cidr.network_address + 200}' end='{cidr.network_address + 250}'/>"
            f"{hosts}</dhcp></ip></network>")


def _domain_xml(name: str, node: str, memory_mb: int, disk: Path, seed: Path,
                macs: tuple[str, str], bmc_serial: int, console: Path) -> str:
    kernel, initrd = kernel_paths(build_vm_image(log=lambda m: None))
    data, mgmt = bridges(name)
    return f"""<domain type='{host.detect_domain_type()}'
 xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{domain_name(name, node)}</name>
  <description>harness emulated bare-metal machine pool={name} node={node}</description>
  <memory unit='MiB'>{memory_mb}</memory><vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>{KERNEL_CMDLINE}</cmdline></os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>destroy</on_crash>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
      <source file='{disk}'/><target dev='vda' bus='virtio'/></disk>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/>
      <source file='{seed}'/><target dev='vdb' bus='virtio'/></disk>
    <interface type='network'><source network='{data}'/><mac address='{macs[0]}'/>
      <model type='virtio'/></interface>
    <interface type='network'><source network='{mgmt}'/><mac address='{macs[1]}'/>
      <model type='virtio'/></interface>
    <serial type='tcp'><source mode='bind' host='127.0.0.1' service='{bmc_serial + 1000}'/>
      <protocol type='telnet'/><log file='{console}' append='on'/><target port='0'/></serial>
    <console type='tcp'><source mode='bind' host='127.0.0.1' service='{bmc_serial + 1000}'/>
      <protocol type='telnet'/><target type='serial' port='0'/></console>
    <controller type='usb' model='none'/><memballoon model='none'/>
  </devices>
  <seclabel type='static' model='dac' relabel='no'><label>+0:+0</label></seclabel>
  <qemu:commandline>
    <qemu:arg value='-chardev'/>
    <qemu:arg value='socket,id=hxbmc,host=127.0.0.1,port={bmc_serial},reconnect=2'/>
    <qemu:arg value='-device'/><qemu:arg value='ipmi-bmc-extern,chardev=hxbmc,id=bmc0'/>
    <qemu:arg value='-device'/><qemu:arg value='isa-ipmi-kcs,bmc=bmc0'/>
  </qemu:commandline>
</domain>"""


def _free_tcp_port(seed: int, taken: set[int]) -> int:
    """A port P in 17000-17999 with P and P + 1000 (the serial console) free."""
    for k in range(1000):
        port = 17000 + (seed + k) % 1000
        if port in taken:
            continue
        try:
            for p in (port, port + 1000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        taken.add(port)
        return port
    raise PreflightError("no free TCP ports in 17000-18999 for an emulated BMC")


LANCONTROL = """#!/bin/sh
# ipmi_sim's lan_config_program for {node}: what the BMC reports of its own LAN settings
# (`ipmitool lan print`, in-band or over the network). Read-only: a set is refused.
while [ $# -gt 0 ] && [ "$1" != get ]; do
    case $1 in set|check) echo "the emulated BMC's LAN settings are fixed"; exit 1;; esac
    shift
done
[ $# -gt 0 ] && shift
for parm; do
    case $parm in
        ip_addr) echo "ip_addr:{ip}";;
        ip_addr_src) echo "ip_addr_src:static";;
        mac_addr) echo "mac_addr:{mac}";;
        subnet_mask) echo "subnet_mask:{mask}";;
        default_gw_ip_addr) echo "default_gw_ip_addr:{gw}";;
        *_ip_addr) echo "$parm:0.0.0.0";;
        *_mac_addr) echo "$parm:00:00:00:00:00:00";;
    esac
done
"""


def _lancontrol(name: str, node: str, bmc_ip: str, net: ipaddress.IPv4Network) -> Path:
    """The machine's lan_config_program (its BMC's address, mask, gateway and MAC)."""
    path = pool_dir(name) / f"{node}-lancontrol.sh"
    path.write_text(LANCONTROL.format(node=node, ip=bmc_ip, mac=_mac(name, node, 9),
                                      mask=net.netmask, gw=net.network_address + 1))
    path.chmod(0o755)
    return path


def _lan_conf(node: str, bmc_ip: str, serial_port: int, user: str, password: str,
              domain: str, lancontrol: Path) -> str:
    power = (f"{sys.executable} -W ignore::RuntimeWarning -m {MODULE} power --domain {domain} "
             f"--uri {URI}")
    return f"""name "{node}"
set_working_mc 0x20
  startlan 1
    addr {bmc_ip} 623
    lan_config_program "{lancontrol}"
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid {hashlib.md5(domain.encode()).hexdigest()}
  endlan
  serial 15 127.0.0.1 {serial_port} codec VM
  sol "telnet:127.0.0.1:{serial_port + 1000}" 115200
  startcmd "{power}"
  startnow true
  poweroff_wait 20
  kill_wait 10
  user 2 true "{user}" "{password}" admin 10 md5 md2 straight
"""


EMU = """mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
sel_enable 0x20 1000 0x0a
mc_enable 0x20
"""


def _machine_files(name: str, node: str) -> dict[str, Path]:
    d = pool_dir(name)
    return {"disk": d / f"{node}.qcow2", "seed": d / f"{node}-seed.img",
            "console": d / f"{node}-console.log", "pid": d / f"{node}-bmc.pid",
            "log": d / f"{node}-bmc.log", "state": d / f"{node}-bmc-state",
            "conf": secret_dir(name) / f"{node}.lan.conf", "emu": d / "bmc.emu"}


def _make_disks(name: str, node: str, hosts: str) -> None:
    """The machine's disk, new (an overlay on the image), and its seed disk."""
    files = _machine_files(name, node)
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
    data_net, mgmt_net = _subnets(name)
    names = [f"node{i}" for i in range(nodes)]
    ip = {n: str(data_net.network_address + DATA_HOST + i) for i, n in enumerate(names)}
    mgmt_ip = {n: str(mgmt_net.network_address + DATA_HOST + i) for i, n in enumerate(names)}
    bmc_ip = {n: str(mgmt_net.network_address + BMC_HOST + i) for i, n in enumerate(names)}
    hosts = "127.0.0.1\tlocalhost\n" + "".join(f"{ip[n]}\t{n}\n" for n in names)
    vault_pass = secret_dir(name) / "vault-pass"
    if not vault_pass.exists():
        _write_secret(vault_pass, secrets.token_urlsafe(24) + "\n")
    creds = _credentials(name, names)
    conn = host.connect(URI)
    try:
        for bridge, net, addrs in ((bridges(name)[0], data_net, ip),
                                   (bridges(name)[1], mgmt_net, mgmt_ip)):
            leases = {_mac(name, n, 0 if net is data_net else 1): a for n, a in addrs.items()}
            _ensure_network(conn, bridge, net, leases)
        taken: set[int] = set()
        for node in names:
            files = _machine_files(name, node)
            if not files["disk"].exists():  # a machine keeps its disk across runs
                _make_disks(name, node, hosts)
            files["emu"].write_text(EMU)
            serial = _serial_port(name, node, taken)
            dom = domain_name(name, node)
            xml = _domain_xml(name, node, memory_mb, files["disk"], files["seed"],
                              (_mac(name, node, 0), _mac(name, node, 1)), serial,
                              files["console"])
            try:
                conn.lookupByName(dom)
            except libvirt.libvirtError:
                conn.defineXML(xml)
            _write_secret(files["conf"], _lan_conf(
                node, bmc_ip[node], serial, creds[node][0], creds[node][1], dom,
                _lancontrol(name, node, bmc_ip[node], mgmt_net)))
    finally:
        conn.close()
    _write_pool_file(name, names, ip, mgmt_ip, bmc_ip, data_net, mgmt_net, memory_mb)
    pool = load_pool(name)
    ensure_up(pool, log=log)
    return pool


def _serial_port(name: str, node: str, taken: set[int]) -> int:
    """The BMC's VM-channel port of a machine, kept in its BMC config once chosen."""
    conf = _machine_files(name, node)["conf"]
    if conf.exists():
        for line in conf.read_text().splitlines():
            if line.strip().startswith("serial 15 "):
                taken.add(int(line.split()[3]))
                return int(line.split()[3])
    seed = int(hashlib.sha256(f"{name}/{node}".encode()).hexdigest(), 16) % 997
    return _free_tcp_port(seed, taken)


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
        net = conn.networkDefineXML(_network_xml(bridge, cidr, leases))
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
    for m in pool.machines:
        addr = f"{m.bmc.address}/{mgmt_net.prefixlen}"
        present = subprocess.run(["ip", "-o", "addr", "show", "dev", mgmt_bridge],
                                 capture_output=True, text=True).stdout
        if f" {addr} " not in present:
            subprocess.run(["ip", "addr", "add", addr, "dev", mgmt_bridge], check=True)
        files = _machine_files(name, m.name)
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
    key = pool.machines[0].ssh.key_path

    async def ready() -> None:
        await asyncio.gather(*(ssh.wait_ready(m.ssh.host, key, timeout) for m in pool.machines))
        for m in pool.machines:
            res = await ssh.exec_on(m.ssh.host, key, IPMI_MODULES, 60)
            if not res.ok:
                raise SubstrateError("baremetal", f"{m.name}: in-band IPMI did not come up",
                                     res.stderr)

    log(f"pool {name}: waiting for {len(pool.machines)} machine(s) to answer SSH")
    asyncio.run(ready())


# also `sync`: a machine's first boot writes its SSH host key, which a hard reset within
# the page cache's writeback delay would leave empty (sshd then fails on every boot)
IPMI_MODULES = ("sync; printf 'ipmi_si\\nipmi_devintf\\n' > /etc/modules-load.d/hx-ipmi.conf; "
                "modprobe ipmi_si; modprobe ipmi_devintf; "
                "for i in $(seq 1 50); do [ -e /dev/ipmi0 ] && exit 0; sleep 0.2; done; "
                "echo 'no /dev/ipmi0' >&2; exit 1")


def power(domain: str, uri: str = URI) -> int:
    """The BMC's power-on command: start the domain, live while it runs; on SIGTERM (the
    BMC's power off after its graceful request) destroy it."""
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    conn = host.connect(uri)
    try:
        dom = conn.lookupByName(domain)
        if not dom.isActive():
            dom.create()
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
    """Revert a machine's disk to the pristine image: power off, a new overlay, power on
    (through its BMC, as a reimage service would)."""
    machine = pool.machine(node)
    creds = pool.bmc_credentials(machine)
    ipmi.power(creds, "off")  # (returns once the BMC reports off)
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
    args = parser.parse_args(argv)
    return power(args.domain, args.uri)


if __name__ == "__main__":
    sys.exit(main())
