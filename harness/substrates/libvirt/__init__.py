"""The `vm` and `vm-cluster` substrates: libvirt/QEMU VMs booted from a cached base image.

Terraform (`terraform/` in this folder) creates and destroys a trial: an isolated
network with fixed DHCP leases, per-node qcow2 overlays and seed disks in the trial
directory, and one directly booted domain per node. The Python side only operates on what
exists: SSH for exec/put (per-trial key), libvirt-python for power/reboot and for finding
leftovers. The per-trial key and disks live under the trial directory::

    <trial>/ssh/id_ed25519[.pub]      per-trial key pair (root on every node)
    <trial>/vm/disks/hx-<trial>-<node>.qcow2, -seed.img   the trial's storage pool hx-<trial>
    <trial>/vm/hx-<trial>-<node>-console.log              serial console
    <trial>/vm/bmc/<node>.pid|.log                        virtual BMC of a `bmc = true` node
                                                          (its credentials: bmc.config_path)

On another machine's libvirt (a `qemu+ssh://` host that is not this machine) the disks
and consoles live on that host instead, the image is the host's copy and SSH jumps
through it (module `remote`); the start records stay in `<trial>/vm/`.

Node vcpu/memory come from the node, else the task's `[environment]`, clamped to the host
(with a warning). `wait_ready` (called by Trial right after the nodes are known) waits for
SSH on every node and gives the primary the BMC credentials (/etc/harness/bmc-credentials,
0600); nodes with a BMC get `harness_bmc` in the inventory (cluster-info `<node>_bmc=`),
and `power()` goes through their BMC over real IPMI (module `bmc`).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import warnings
from pathlib import Path
from typing import Any, ClassVar

from harness import owner
from harness.config import LOCAL_BASE, Settings, load_settings, on_local_base
from harness.errors import PreflightError, SubstrateError
from harness.paths import TrialPaths, provider_mirror
from harness.substrates import egress, firewall, ipmi, ssh
from harness.substrates.base import ExecResult, Node, Substrate, TrialSpec
from harness.substrates.common import (
    give_bmc_credentials,
    nodes_from_inventory,
)
from harness.substrates.hypervisor import host, naming
from harness.substrates.hypervisor.host import detect_domain_type
from harness.substrates.hypervisor.image import build_vm_image, image_dir, kernel_paths
from harness.substrates.libvirt import bmc, doctor
from harness.substrates.libvirt.gateway_relay import GatewayRelay
from harness.substrates.libvirt.remote import RemoteHost
from harness.substrates.libvirt.render import Rendering
from harness.substrates.libvirt.task_image import task_image

HERE = Path(__file__).resolve().parent
TOOLS = {  # command -> Debian package
    "terraform": "terraform", "qemu-img": "qemu-utils", "qemu-system-x86_64": "qemu-system-x86",
    "mkfs.ext4": "e2fsprogs", "debugfs": "e2fsprogs", "virsh": "libvirt-clients",
    "xsltproc": "xsltproc", "ssh": "openssh-client", "ssh-keygen": "openssh-client", "tar": "tar",
}


class LibvirtSubstrate(Rendering, Substrate):
    """One VM under libvirt (`vm`); `LibvirtClusterSubstrate` runs any number."""

    name: ClassVar[str] = "vm"
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"power", "own_kernel", "own_clock", "block_devices"})
    holds_capacity: ClassVar[bool] = True
    default_concurrency: ClassVar[int] = 1
    max_nodes: ClassVar[int] = 1
    network_modes: ClassVar[tuple[str, ...]] = ("no-network", "public", "allowlist")

    def __init__(self, name: str | None = None, uri: str = "qemu:///system",
                 domain_type: str | None = None, boot_timeout: float = 180.0,
                 settings: Settings | None = None, **kwargs: Any):
        self.check_name(name)
        self.settings = settings or load_settings()
        self.uri = uri
        # another machine's daemon: disks, images and logs over SSH there (module `remote`)
        self.remote = None if host.this_machine(uri) else RemoteHost.from_uri(uri)
        self.boot_timeout = boot_timeout
        self._domain_type = domain_type
        self.options = kwargs
        self._gateway_relays: dict[str, GatewayRelay] = {}

    @classmethod
    def local_endpoint(cls) -> str:
        return "qemu:///system"

    def on_host(self, spec) -> LibvirtSubstrate:
        """Bound to the host's daemon. `qemu+ssh://` to this very machine is driven over SSH
        (provider, API, power, gc; pool, bridges and VM addresses are local); another
        machine's daemon also gets the trial's image copied there once, its disks made
        there and SSH to its nodes through it (module `remote`)."""
        if spec.libvirt == self.uri:
            return self
        return type(self)(uri=spec.libvirt, domain_type=self._domain_type, settings=self.settings,
                          boot_timeout=self.boot_timeout, **self.options)

    def reachable(self) -> str | None:
        return host.unreachable(self.uri)

    def host_doctor(self, host_name: str) -> list:
        """Reachable; on another machine's libvirt also its tools and trial firewall."""
        checks = super().host_doctor(host_name)
        if self.remote is None or checks[0].status == "FAIL":
            return checks
        return checks + self.remote.doctor(host_name)

    def terraform_module(self) -> Path:
        return HERE / "terraform"

    @classmethod
    def validate_task(cls, config, root: Path, settings=None) -> list[str]:
        nodes = config.environment.nodes
        if len(nodes) > cls.max_nodes:
            return [f"{root / 'task.toml'}: environment.nodes: {len(nodes)} nodes; the "
                    f"{cls.name} type runs {cls.max_nodes} (use vm-cluster)"]
        ref = config.environment.base_image
        if ref and not on_local_base((settings or load_settings()).map_image(ref)):
            return [f"{root / 'task.toml'}: environment.base_image: {ref!r} has no VM image "
                    f"here; VMs boot the Debian 12 qcow2 ({LOCAL_BASE}): map the name to it "
                    "with image_overrides (config.yaml or the campaign file), or leave "
                    "base_image unset"]
        return []

    def image_warnings(self, task) -> list[str]:
        """A base image mapped to another distribution; `vm_backend = "kvm"` on a host
        whose VMs run under TCG."""
        note = self.settings.mapping_note(task.base_image) if task.base_image else None
        notes = [note] if note else []
        backend = getattr(getattr(task, "env", None), "vm_backend", None)
        if backend == "kvm" and self.domain_type() != "kvm":
            notes.append("vm_backend 'kvm' asked for; KVM does not work on this host, so the "
                         "VMs run under TCG (domain type qemu): slower, the same guests")
        return notes

    @classmethod
    def scaffold(cls, env_dir: Path) -> str:
        (env_dir / "setup.sh").write_text(
            "#!/bin/bash\n# Runs once per (base image, task); the result is cached as this "
            "task's image.\n# Install packages and write configuration here.\n"
            "set -euo pipefail\n")
        (env_dir / "bootstrap.sh").write_text(
            "#!/bin/bash\n# Runs on every node of every trial, after the nodes boot.\n")
        nodes = "".join(f'\n[[environment.nodes]]\nname = "node{i}"\n'
                        for i in range(3 if cls.max_nodes > 1 else 0))
        return "memory_mb = 1024\n" + nodes

    @classmethod
    def doctor(cls) -> list:
        return doctor.checks()

    @classmethod
    def build_image(cls, force: bool = False, log=print) -> str:
        return str(build_vm_image(force=force, log=log))

    def prepare(self, spec: TrialSpec, log=print) -> str:
        """The base image, or the task's cached image when it has environment/setup.sh."""
        base = build_vm_image(log=log)
        task = getattr(spec, "task", None)
        if task is None or not hasattr(task, "env_file"):  # no task (image only, tests)
            return str(base)
        return str(task_image(base, task, log=log))

    def domain_type(self) -> str:
        """kvm when a kernel really boots under KVM on the libvirt host, else qemu (TCG)."""
        if self._domain_type is None and self.remote is not None:
            disk = image_dir() / "disk.qcow2"
            boot = kernel_paths(disk)
            self._domain_type = self.remote.domain_type(self.remote.stage(disk, boot)[
                str(boot[0])])
        if self._domain_type is None:
            self._domain_type = detect_domain_type()
        return self._domain_type

    async def exec(self, node: Node, cmd: str, timeout: float,
                   env: dict[str, str] | None = None, stdin: bytes | None = None,
                   toolbox: str | None = None) -> ExecResult:
        return await ssh.exec_on(node.host, Path(node.extra["ssh_key"]), cmd, timeout, env,
                                 stdin, toolbox)

    async def put(self, node: Node, src: Path, dest: str) -> None:
        await ssh.put(node.host, Path(node.extra["ssh_key"]), src, dest)

    async def wait_ready(self, nodes: list[Node], timeout: float | None = None) -> dict[str, float]:
        """Wait until every node answers over SSH (seconds per node); grow the root
        filesystem of a node whose disk was made bigger (the task's storage); then give the
        primary the BMC credentials in the root-only /etc/harness/bmc-credentials."""
        limit = timeout or self.boot_timeout
        took = await asyncio.gather(*(ssh.wait_ready(n.host, Path(n.extra["ssh_key"]), limit,
                                                     master=True) for n in nodes))
        for node in nodes:
            if node.extra.get("grow_root"):
                res = await self.exec(node, "resize2fs /dev/vda", 120)
                if not res.ok:
                    raise SubstrateError(self.name, f"growing {node.name}'s root filesystem "
                                         "to the task's storage failed", res.stderr)
        await give_bmc_credentials(self, nodes)
        return dict(zip((n.name for n in nodes), took, strict=True))

    async def set_egress(self, trial_id: str, nodes: list[Node], policy) -> dict:
        """The firewall's sets for the trial's bridge (`egress.enforce`): an allowlist's
        answers pinned into every node's /etc/hosts; in public mode the nodes resolve
        through libvirt's dnsmasq on the bridge's own address."""
        gateway = next((n.extra.get("gateway") for n in nodes if n.extra.get("gateway")), None)
        return await egress.enforce(self, naming.bridge_name(trial_id), nodes, policy,
                                    egress.uplinks(self.settings), resolver=gateway,
                                    runner=self._runner())

    def gateway_address(self, trial_id: str, nodes: list[Node]) -> str | None:
        """The trial network's own address on this machine (libvirt's bridge), when
        libvirt runs here (another machine's bridge is not this one's)."""
        if self.remote is not None:
            return None
        return next((n.extra["gateway"] for n in nodes if n.extra.get("gateway")), None)

    async def relay_gateway(self, trial_id: str, nodes: list[Node], port: int,
                            target: tuple[str, int]) -> tuple[str, int] | None:
        """On another machine's libvirt host: the trial bridge's address there, `port`
        (where free) relayed over SSH to `target` on this machine (`gateway_relay`)."""
        addr = next((n.extra["gateway"] for n in nodes if n.extra.get("gateway")), None)
        if self.remote is None or addr is None:
            return None
        relay = await asyncio.to_thread(GatewayRelay, self.remote, trial_id, addr, port,
                                        target)
        self._gateway_relays[trial_id] = relay
        return relay.address, relay.port

    async def open_gateway(self, trial_id: str, addr: str, port: int) -> None:
        await asyncio.to_thread(egress.open_gateway, naming.bridge_name(trial_id), addr, port,
                                self._runner())

    async def close_gateway(self, trial_id: str) -> None:
        await asyncio.to_thread(egress.close_gateway, naming.bridge_name(trial_id),
                                self._runner())
        relay = self._gateway_relays.pop(trial_id, None)
        if relay is not None:
            await asyncio.to_thread(relay.close)

    def _runner(self):
        """Where the firewall's sets are: this machine's (None), or the libvirt host's."""
        return self.remote.command if self.remote is not None else None

    async def power(self, node: Node, action: str) -> str:
        """Through the node's virtual BMC (real IPMI) when it has one, else libvirt."""
        if action != "status":  # (a status asks nothing of the node's connection)
            ssh.close_master(node.host, Path(node.extra["ssh_key"]))
        if node.extra.get("bmc"):
            try:
                return await asyncio.wait_for(
                    asyncio.to_thread(ipmi.client_power, node.extra["bmc"], action), 60)
            except TimeoutError as exc:
                raise SubstrateError(self.name, f"IPMI power {action} of {node.name} got no "
                                     "answer in 60s; is its BMC process running? (see "
                                     "<trial>/vm/bmc/*.log)") from exc
        return await asyncio.to_thread(host.power, self.uri, node.extra["domain"], action)

    async def reboot(self, node: Node) -> None:
        """Guest reboot (ACPI), reset if the guest ignores it; returns once SSH is back and
        systemd has finished booting.

        The guest must leave its current boot (new boot id or unreachable) within 60 s or
        it is reset; then it has `boot_timeout` seconds to answer with a new boot id.
        """
        before = await self._boot_id(node)
        ssh.close_master(node.host, Path(node.extra["ssh_key"]))
        await asyncio.to_thread(host.reboot, self.uri, node.extra["domain"])
        if not await self._wait_boot_id(node, lambda b: b != before, 60):
            await self.power(node, "reset")
        if not await self._wait_boot_id(node, lambda b: b not in ("", before), self.boot_timeout):
            raise SubstrateError(self.name, f"{node.name} did not come back from a reboot in "
                                 f"{self.boot_timeout:.0f}s")
        await self.wait_booted(node)

    async def _boot_id(self, node: Node) -> str:
        result = await ssh.probe(node.host, Path(node.extra["ssh_key"]),
                                 "cat /proc/sys/kernel/random/boot_id")
        return result.stdout.strip() if result.ok else ""

    async def _wait_boot_id(self, node: Node, done, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if done(await self._boot_id(node)):
                return True
            await asyncio.sleep(1)
        return False

    def leftovers(self, campaign: str | None = None, trial: str | None = None,
                  force: bool = False) -> list[str]:
        return self._leftovers(campaign, trial, False, force)

    def _leftovers(self, campaign: str | None, trial: str | None, remove: bool,
                   force: bool) -> list[str]:
        """libvirt's objects, BMC processes and, on another machine's libvirt, the trial
        directories there that still hold files (an emptied one goes quietly)."""
        found = (host.leftovers(self.uri, campaign, trial, remove=remove, force=force)
                 + bmc.leftovers(campaign, trial, remove=remove, force=force))
        if self.remote is not None:
            prefixes, live = host.trial_prefixes(self.uri, campaign, trial, force)
            dirs = [d for d in self.remote.trial_dirs() if not host.matches(d, live)
                    and (prefixes is None or host.matches(d, prefixes))]
            found += [f"file {self.remote.host}:{f}" for f in self.remote.files_in(dirs)]
            if remove:
                self.remote.remove_trials(dirs)
        return found

    def live_nodes(self, campaign: str | None = None, trial: str | None = None,
                   force: bool = False) -> dict[str, list[Node]]:
        """Nodes of running trial domains, from each trial directory's inventory (its
        addresses and per-trial SSH key); a trial whose directory is gone is skipped."""
        out: dict[str, list[Node]] = {}
        name = naming.trial_name(trial) if trial else None
        for trial_name, root in host.running_trial_roots(self.uri, campaign, name,
                                                         force).items():
            with contextlib.suppress(Exception):
                out[trial_name] = nodes_from_inventory(TrialPaths(root).inventory)
        return out

    def sweep(self, campaign: str | None = None, trial: str | None = None,
              force: bool = False) -> list[str]:
        if trial:
            ssh.close_masters(trial)
            if force or not owner.run_elsewhere(trial):
                egress.clear(naming.bridge_name(trial), self._runner())
        return self._leftovers(campaign, trial, True, force)

    def preflight(self) -> None:
        missing = [t for t in TOOLS if shutil.which(t) is None]
        if missing:
            packages = sorted({TOOLS[t] for t in missing} - {"terraform"})
            raise PreflightError(f"vm substrate needs {', '.join(missing)} on PATH"
                                 + (f": apt-get install {' '.join(packages)}" if packages else ""))
        host.connect(self.uri).close()
        if self.remote is not None:  # its tools and firewall; the image copied there
            self.remote.prepare()
        else:
            firewall.require()  # the same table isolates the VMs' hx* bridges
        pin = self.providers["libvirt"]
        ptype = pin["source"].rsplit("/", 1)[-1]
        binary = (provider_mirror() / "registry.terraform.io" / pin["source"] / pin["version"]
                  / "linux_amd64" / f"terraform-provider-{ptype}_v{pin['version']}")
        if not binary.exists():
            raise PreflightError(f"provider {pin['source']} {pin['version']} is not in the "
                                 f"mirror ({binary}); run {pin['build']}")
        problem = host.kvm_device_problem()
        if problem:
            warnings.warn(f"{problem}; fix: {host.KVM_DEVICE_FIX}", stacklevel=2)
        disk = image_dir() / "disk.qcow2"
        if not disk.exists():
            raise PreflightError(f"vm base image not built ({disk}); run "
                                 "python -m harness.substrates.hypervisor.image")
        self.domain_type()


class LibvirtClusterSubstrate(LibvirtSubstrate):
    """Several VMs on one isolated network (`vm-cluster`)."""

    name: ClassVar[str] = "vm-cluster"
    max_nodes: ClassVar[int] = 64

    @classmethod
    def validate_task(cls, config, root: Path, settings=None) -> list[str]:
        if len(config.environment.nodes) < 2:
            return [f"{root / 'task.toml'}: environment.nodes: a vm-cluster needs at least 2 "
                    "[[environment.nodes]] entries"]
        return super().validate_task(config, root, settings)
