"""What an emulated bare-metal machine is made of (see `emulate`): its names, files,
networks and addresses, its libvirt domain, and its BMC's configuration (`ipmi_sim`'s LAN
configuration, the program that reports its LAN settings, the power-on command)."""

from __future__ import annotations

import hashlib
import ipaddress
import socket
import sys
from pathlib import Path

import yaml

from harness.errors import PreflightError
from harness.paths import harness_home
from harness.substrates.hypervisor import host
from harness.substrates.hypervisor.image import KERNEL_CMDLINE, build_vm_image, kernel_paths
from harness.substrates.metal import accounts, pool
from harness.substrates.metal.pool import pool_path, pools_dir

URI = "qemu:///system"
MODULE = "harness.substrates.metal.emulate"
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


def write_secret(path: Path, data: bytes | str) -> None:
    """Write a file only its owner reads (0600 from its creation on)."""
    pool.write_secret(path, data)


def subnets(name: str) -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]:
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


def mac(name: str, node: str, nic: int) -> str:
    h = hashlib.sha256(f"{name}/{node}/{nic}".encode()).hexdigest()
    return f"52:54:01:{h[0:2]}:{h[2:4]}:{h[4:6]}"


def network_xml(bridge: str, cidr: ipaddress.IPv4Network, leases: dict[str, str]) -> str:
    gw = cidr.network_address + 1
    hosts = "".join(f"<host mac='{mac}' ip='{ip}'/>" for mac, ip in leases.items())
    return (f"<network><name>{bridge}</name><bridge name='{bridge}' stp='off'/>"
            f"<ip address='{gw}' prefix='{cidr.prefixlen}'><dhcp>"
            f"<range start='{cidr.network_address + 200}' end='{cidr.network_address + 250}'/>"
            f"{hosts}</dhcp></ip></network>")


def domain_xml(name: str, node: str, memory_mb: int, disk: Path, seed: Path,
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


def free_tcp_port(seed: int, taken: set[int]) -> int:
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


def lancontrol(name: str, node: str, bmc_ip: str, net: ipaddress.IPv4Network) -> Path:
    """The machine's lan_config_program (its BMC's address, mask, gateway and MAC)."""
    path = pool_dir(name) / f"{node}-lancontrol.sh"
    path.write_text(LANCONTROL.format(node=node, ip=bmc_ip, mac=mac(name, node, 9),
                                      mask=net.netmask, gw=net.network_address + 1))
    path.chmod(0o755)
    return path


def lan_conf(node: str, bmc_ip: str, serial_port: int, users: list[dict],
             domain: str, lancontrol: Path, saved: dict[str, Path]) -> str:
    """ipmi_sim's configuration of a machine's BMC; `users`: its accounts (user_id, user,
    password), the task-facing one and the harness's."""
    power = (f"{sys.executable} -W ignore::RuntimeWarning -m {MODULE} power --domain {domain} "
             f"--uri {URI} --restore {saved['save']} --marker {saved['marker']}")
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
{accounts.ipmi_sim_users(users)}"""


EMU = """mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
sel_enable 0x20 1000 0x0a
mc_enable 0x20
"""


def machine_files(name: str, node: str) -> dict[str, Path]:
    """A machine's files. Its BMC's configuration and persisted state (users and LAN
    parameters an agent may have changed in-band, passwords in the clear) are secrets;
    `old_state` is where pools made before kept that state."""
    d, s = pool_dir(name), secret_dir(name)
    return {"disk": d / f"{node}.qcow2", "seed": d / f"{node}-seed.img",
            "console": d / f"{node}-console.log", "pid": d / f"{node}-bmc.pid",
            "log": d / f"{node}-bmc.log", "state": s / f"{node}-bmc-state",
            "old_state": d / f"{node}-bmc-state", "conf": s / f"{node}.lan.conf",
            "emu": d / "bmc.emu", "harness_user": s / f"{node}.harness-user",
            "harness_password": s / f"{node}.harness-password"}


def harness_refs(name: str, node: str) -> dict[str, str]:
    """The pool file's references to a machine's harness account (`secret:` files)."""
    return {"user": f"secret:pools/{name}/{node}.harness-user",
            "password": f"secret:pools/{name}/{node}.harness-password"}
