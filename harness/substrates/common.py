"""Helpers substrates share: the toolbox command line, root-owned tars, host memory, the
nodes of a trial directory's inventory."""

from __future__ import annotations

import io
import shlex
import tarfile
import time
from pathlib import Path

import yaml

from harness.errors import SubstrateError
from harness.substrates.base import Node

EXEC_OUTPUT_MAX = 16 * 1024 * 1024  # of each stream of one command run on a node
EXEC_OUTPUT_HEAD = 4 * 1024 * 1024  # of which the start is kept; the rest is the end
# A restored guest wakes with the RNG state of its save: this writes the host's bytes (its
# stdin) to /dev/urandom, then makes the kernel reseed its CRNG from them at once
# (RNDRESEEDCRNG): the VM snapshot restore's and the bare-metal reimage's fix-ups.
RESEED_CRNG = (r"""perl -e 'local $/; my $b = <STDIN>; open(my $f, ">", "/dev/urandom") """
               r"""or die "$!"; syswrite($f, $b) if length $b; """
               r"""ioctl($f, 0x5207, 0) or die "reseed: $!"'""")


class BoundedOutput:
    """One output stream of a command run on a node (node text: unbounded, hostile), kept
    within `limit` bytes as it is read: its first `head` bytes and its last `limit - head`
    (a run's markers and reward files come at its end), with a line saying how many bytes
    were cut in between."""

    def __init__(self, limit: int = EXEC_OUTPUT_MAX, head: int = EXEC_OUTPUT_HEAD):
        self.limit, self.head_max = limit, min(head, limit)
        self.head, self.tail = bytearray(), bytearray()
        self.cut = 0

    def write(self, data: bytes) -> None:
        if len(self.head) < self.head_max:
            room = self.head_max - len(self.head)
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        over = len(self.tail) - (self.limit - self.head_max)
        if over > 0:
            del self.tail[:over]
            self.cut += over

    def getvalue(self) -> bytes:
        if not self.cut:
            return bytes(self.head + self.tail)
        note = f"\n[harness: {self.cut} bytes of output cut here]\n".encode()
        return bytes(self.head) + note + bytes(self.tail)

    def text(self) -> str:
        return self.getvalue().decode(errors="replace")


def toolbox_argv(toolbox: str, cmd: str) -> list[str]:
    """`cmd` under the toolbox's sh, its bin first on PATH (the caller bounds the time)."""
    bin_dir = f"{toolbox}/bin"
    return [f"{bin_dir}/sh", "-c", f"export PATH={bin_dir}:/usr/local/sbin:/usr/local/bin:"
                                   f"/usr/sbin:/usr/bin:/sbin:/bin\n{cmd}"]


def tar_bytes(src: Path, top: str = "") -> bytes:
    """`src` (a directory's contents, or the file) as a tar owned by root (as the node should
    see it, whoever runs the harness); under a new directory `top` (mode 0755) when given."""

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if top:
            info = tarfile.TarInfo(top)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
            tar.addfile(as_root(info))
        prefix = f"{top}/" if top else ""
        if src.is_dir():
            for p in sorted(src.rglob("*")):
                tar.add(p, arcname=prefix + p.relative_to(src).as_posix(), recursive=False,
                        filter=as_root)
        else:
            tar.add(src, arcname=prefix + src.name, filter=as_root)
    return buf.getvalue()


HOST_RESERVE_MB = 1024  # what trials never get of the host's memory


def host_memory_mb() -> int:
    """The host's total memory in MiB (/proc/meminfo)."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 0


class _AnsibleDataLoader(yaml.SafeLoader):
    """Reads what `harness.tools.ansible.ansible_yaml` writes (`!unsafe` strings)."""


_AnsibleDataLoader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def load_ansible_yaml(text: str):
    """A YAML document the harness wrote for Ansible, `!unsafe` tags read as strings."""
    return yaml.load(text, Loader=_AnsibleDataLoader)  # noqa: S506 - a SafeLoader subclass


def nodes_from_inventory(inventory: Path) -> list[Node]:
    """The nodes of a provisioned trial from its inventory.yml (hosts, cluster addresses,
    primary, and where present the libvirt domain, the SSH key and login, a bare-metal node's
    pool and machine)."""
    inv = load_ansible_yaml(inventory.read_text())["all"]
    primary = set(inv.get("children", {}).get("primary", {}).get("hosts") or {})
    nodes = []
    for name, hv in (inv.get("hosts") or {}).items():
        extra = {k: hv[v] for k, v in (("domain", "harness_domain"),
                                       ("ssh_key", "ansible_ssh_private_key_file"),
                                       ("ssh_user", "ansible_user"),
                                       ("ssh_port", "ansible_port"),
                                       ("machine", "harness_machine"),
                                       ("pool", "harness_pool")) if v in hv}
        nodes.append(Node(name=name, host=str(hv.get("ansible_host", name)),
                          cluster_ip=str(hv.get("harness_cluster_ip", "")),
                          primary=name in primary or bool(hv.get("harness_primary")),
                          extra=extra))
    return nodes


BMC_CREDENTIALS = "/etc/harness/bmc-credentials"  # in every node that is given BMCs


def bmc_credentials_script(nodes: list[Node], path: str = BMC_CREDENTIALS) -> str:
    """A shell command writing the nodes' BMC addresses and credentials (`<node>_bmc=`,
    `_bmc_user=`, `_bmc_password=`), and how to speak to it (`_bmc_interface=` lan or
    lanplus, `_bmc_cipher=` the lanplus cipher suite where one is set) to the root-only file
    `path`; "" when no node has a BMC (`Node.extra["bmc"]`: address, port, user, password,
    interface, cipher_suite). A task then runs the same `ipmitool` on any BMC:
    `ipmitool -I "$n_bmc_interface" ${n_bmc_cipher:+-C "$n_bmc_cipher"} ...`."""
    creds = "".join(_bmc_lines(n.name, c) for n in nodes if (c := n.extra.get("bmc")))
    if not creds:
        return ""
    return (f"umask 077; mkdir -p {shlex.quote(str(Path(path).parent))}; cat > "
            f"{shlex.quote(path)} <<'HX_EOF'\n{creds}HX_EOF")


async def give_bmc_credentials(substrate, nodes: list[Node]) -> None:
    """Write `bmc_credentials_script` into the primary node (nothing when no node has a
    BMC); SubstrateError when that fails."""
    script = bmc_credentials_script(nodes)
    primary = next((n for n in nodes if n.primary), None)
    if script and primary is not None:
        res = await substrate.exec(primary, script, 30)
        if not res.ok:
            raise SubstrateError(substrate.name, "writing the BMC credentials failed",
                                 res.stderr)


def _bmc_lines(name: str, creds: dict) -> str:
    interface = str(creds.get("interface") or "lanplus")
    suite = creds.get("cipher_suite")
    return (f"{name}_bmc={creds['address']}:{creds['port']}\n{name}_bmc_user={creds['user']}\n"
            f"{name}_bmc_password={creds['password']}\n{name}_bmc_interface={interface}\n"
            + (f"{name}_bmc_cipher={int(suite)}\n" if suite is not None and interface == "lanplus"
               else ""))
