"""The VM substrates' Terraform inputs, planned outputs, nodes and inventory (a mixin of
`LibvirtSubstrate`): per-node shape (clamped to the host), the trial network, the image and
kernel (the libvirt host's copies on another machine, `remote`), the per-trial SSH key and
BMC configs."""

from __future__ import annotations

import ipaddress
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from harness import owner
from harness.errors import InputError, PreflightError, SubstrateError
from harness.substrates import egress, ssh
from harness.substrates.base import Node, TrialSpec
from harness.substrates.common import HOST_RESERVE_MB, host_memory_mb
from harness.substrates.hypervisor import host, naming
from harness.substrates.hypervisor.image import image_dir, kernel_paths
from harness.substrates.libvirt import bmc

DEFAULT_CPUS, DEFAULT_MEMORY_MB = 1, 1024
BARE_METAL_TYPES = ("baremetal", "cloudlab")  # task types whose every machine has a BMC


def clamp(spec: TrialSpec, node: str, cpus: int, memory_mb: int) -> dict[str, int]:
    """vcpu/memory_mb for one node, at most the host's cores and memory (with a warning)."""
    host_cpus = os.cpu_count() or 1
    host_mb = max(256, host_memory_mb() - HOST_RESERVE_MB)
    vcpu, memory = min(int(cpus), host_cpus), min(int(memory_mb), host_mb)
    if (vcpu, memory) != (int(cpus), int(memory_mb)):
        warnings.warn(f"task {getattr(spec.task, 'name', '?')} node {node} asks for {cpus} "
                      f"vCPUs and {memory_mb} MiB; this host gives it {vcpu} and {memory}",
                      stacklevel=2)
    return {"vcpu": vcpu, "memory_mb": memory}


class Rendering:
    """What `LibvirtSubstrate` hands Terraform and Ansible, and reads back."""

    def _task_domain_type(self, task) -> str:
        """`qemu` (TCG) when the task's `vm_backend` says so, else the host's best."""
        backend = getattr(getattr(task, "env", None), "vm_backend", None)
        return "qemu" if backend == "qemu" else self.domain_type()


    def _task_nodes(self, spec: TrialSpec) -> list[dict[str, Any]]:
        """Nodes with vcpu/memory: the node's own, else `[environment]`'s, clamped to the host."""
        task_nodes = list(getattr(spec.task, "nodes", None) or [])
        if len(task_nodes) > self.max_nodes:
            raise InputError(f"task {spec.task.name} has {len(task_nodes)} nodes; the "
                             f"{self.name} substrate runs {self.max_nodes}, use vm-cluster",
                             key="substrate")
        env = getattr(spec.task, "env", None)
        cpus = getattr(env, "cpus", None) or DEFAULT_CPUS
        memory = getattr(env, "memory_mb", None) or DEFAULT_MEMORY_MB
        storage = env.storage_mb if "storage_mb" in getattr(env, "model_fields_set", ()) \
            else None
        if not task_nodes:
            memory += spec.agent_memory_mb
            return [{"name": "node1", **clamp(spec, "node1", cpus, memory),
                     **self._root(spec, storage)}]
        return [{"name": n.name, **clamp(spec, n.name, getattr(n, "cpus", None) or cpus,
                                         spec.node_memory_mb(n.name, getattr(
                                             n, "memory_mb", None) or memory)),
                 **({"data_disks_mb": list(n.data_disks)} if getattr(n, "data_disks", None)
                    else {}),
                 **({"start": n.vm_start} if getattr(n, "vm_start", None) else {}),
                 **self._root(spec, getattr(n, "storage_mb", None) or storage)}
                for n in task_nodes]

    def _root(self, spec: TrialSpec, storage_mb: int | None) -> dict[str, Any]:
        """A root disk of `storage_mb` (the task's storage) when that is more than the
        image has: the overlay is made that big, the node boots cold (a snapshot template
        has the image's size) and `wait_ready` grows the filesystem."""
        if not storage_mb:
            return {}
        disk = Path(spec.image) if spec.image else image_dir() / "disk.qcow2"
        if not disk.exists() or storage_mb <= host.virtual_size_mb(disk):
            return {}
        return {"root_mb": int(storage_mb), "start": "cold"}

    def _cidr(self, spec: TrialSpec) -> str:
        pinned = getattr(spec.task, "network", None)
        if pinned:
            return str(pinned)
        try:
            taken = host.taken_subnets(self.uri)
        except PreflightError:
            taken = set()
        return str(naming.trial_subnet(spec.trial_id, taken))

    def terraform_vars(self, spec: TrialSpec) -> dict[str, Any]:
        """Module inputs; also creates the per-trial SSH key in the trial directory. A task
        with egress in any phase gets an `open` network (the harness firewall gates each
        phase); a trial without starts with none, whatever an earlier trial of the same id
        left in the firewall's sets after a kill -9."""
        return self._vars(spec, stage=True)

    def plan_vars(self, spec: TrialSpec) -> dict[str, Any]:
        """`terraform_vars` without copying the image to another machine's libvirt."""
        return self._vars(spec, stage=False)

    def _vars(self, spec: TrialSpec, stage: bool) -> dict[str, Any]:
        needs_egress = bool(getattr(spec.task, "needs_egress", False))
        bmc_nodes = self._bmc_nodes(spec)
        if not needs_egress:
            egress.clear(naming.bridge_name(spec.trial_id), self._runner())
        disk = Path(spec.image) if spec.image else image_dir() / "disk.qcow2"
        kernel, initrd = kernel_paths(disk)
        root = spec.root.resolve()
        cidr = self._cidr(spec)
        address = str(next(ipaddress.ip_network(cidr).hosts()))
        for node in bmc_nodes:
            bmc.write_config(root, node, naming.domain_name(spec.trial_id, node), address)
        public_key = ssh.ensure_key(root, naming.resource_prefix(spec.trial_id))
        local = {"base_image": str(disk.resolve()), "kernel": str(kernel.resolve()),
                 "initrd": str(initrd.resolve()), "disk_dir": str(root / "vm" / "disks"),
                 "console_log_dir": str(root / "vm")}
        return {**self._remote_vars(spec, root, local, disk, (kernel, initrd), stage),
                "ssh_public_key": public_key, "record_dir": str(root / "vm"),
                "trial_id": naming.trial_name(spec.trial_id), "campaign": spec.campaign,
                "owner": owner.tag(), "libvirt_uri": self.uri,
                "bridge_name": naming.bridge_name(spec.trial_id), "cidr": cidr,
                "network_mode": "open" if needs_egress else "none",
                "domain_type": self._task_domain_type(spec.task),
                "nodes": self._task_nodes(spec), "bmc_nodes": bmc_nodes,
                "trial_root": str(root), "python": sys.executable,
                "start_timeout": max(300, int(self.boot_timeout))}

    def _remote_vars(self, spec: TrialSpec, root: Path, local: dict[str, str], disk: Path,
                     boot: tuple[Path, Path], stage: bool) -> dict[str, str]:
        """The paths of `local` as the libvirt host sees them: these on this machine; on
        another, the host's copy of the image chain and kernel (copied once when `stage`),
        the trial's directory there, and the ssh_config that jumps through the host."""
        if self.remote is None:
            return local
        staged = self.remote.stage(disk, boot, copy=stage)
        there = self.remote.trial_dir(naming.resource_prefix(spec.trial_id))
        ssh.write_jump(ssh.key_path(root), self.remote.proxy_command())
        return {"base_image": staged[str(disk)], "kernel": staged[str(boot[0])],
                "initrd": staged[str(boot[1])], "disk_dir": f"{there}/vm/disks",
                "console_log_dir": f"{there}/vm", "host_ssh": self.remote.to_json()}

    def planned_outputs(self, tf_vars: dict[str, Any]) -> dict[str, Any] | None:
        """The outputs apply will produce (`terraform/outputs.tf`): addresses are fixed
        (`ip`, else the 10th host of the trial network on), and so are the log paths. None
        with BMC nodes: a BMC's port is picked when it starts, and the inventory names it."""
        if tf_vars.get("bmc_nodes"):
            return None
        net = ipaddress.ip_network(tf_vars["cidr"])
        prefix = f"hx-{tf_vars['trial_id']}"
        nodes = tf_vars["nodes"]
        return {"nodes": {n["name"]: n.get("ip") or str(net[10 + i]) for i, n in enumerate(nodes)},
                "console_logs": {n["name"]: f"{tf_vars['console_log_dir']}/{prefix}-{n['name']}"
                                 "-console.log" for n in nodes},
                "network": {"name": prefix, "bridge": tf_vars["bridge_name"],
                            "cidr": tf_vars["cidr"]}}

    def secrets(self, spec: TrialSpec) -> list[str]:
        """The trial's BMC passwords (made in terraform_vars)."""
        root = spec.root.resolve()
        return [c["password"] for n in self._bmc_nodes(spec)
                if (c := bmc.read_config(root, n)) and c.get("password")]

    def _bmc_nodes(self, spec: TrialSpec) -> list[str]:
        """The nodes with a virtual BMC: those that ask (`bmc = true`), and every node of a
        task whose machines are bare metal (`BARE_METAL_TYPES`: each has a BMC), which a
        campaign or `--substrate` runs here."""
        nodes = getattr(spec.task, "nodes", None) or []
        env_type = getattr(getattr(spec.task, "env", None), "type", "")
        return [n.name for n in nodes if env_type in BARE_METAL_TYPES or getattr(n, "bmc", 0)]

    def nodes(self, spec: TrialSpec, tf_outputs: dict[str, Any]) -> list[Node]:
        ips = _output(tf_outputs, "nodes")
        logs = _output(tf_outputs, "console_logs", {})
        cidr = _output(tf_outputs, "network", {}).get("cidr")
        gateway = str(next(ipaddress.ip_network(cidr).hosts())) if cidr else ""
        key = str(ssh.key_path(spec.root.resolve()))
        planned = self._task_nodes(spec)
        order = [n["name"] for n in planned]
        grown = {n["name"] for n in planned if n.get("root_mb")}
        missing = [n for n in order if n not in ips]
        if missing:
            raise SubstrateError(self.name, f"terraform outputs lack nodes {missing}")
        return [Node(name=n, host=ips[n], cluster_ip=ips[n], primary=i == 0,
                     extra={"domain": naming.domain_name(spec.trial_id, n), "ssh_key": key,
                            **({"grow_root": True} if n in grown else {}),
                            "console_log": logs.get(n, ""), "gateway": gateway,
                            "bmc": bmc.read_config(spec.root.resolve(), n)})
                for i, n in enumerate(order)]

    def inventory(self, spec: TrialSpec, nodes: list[Node]) -> dict[str, Any]:
        hosts = {
            n.name: {
                "ansible_host": n.host,
                "ansible_user": "root",
                "ansible_ssh_private_key_file": n.extra["ssh_key"],
                "ansible_ssh_common_args": ssh.ansible_args(n.host, Path(n.extra["ssh_key"])),
                "ansible_python_interpreter": "/usr/bin/python3",
                "harness_cluster_ip": n.cluster_ip,
                "harness_primary": n.primary,
                "harness_domain": n.extra["domain"],
                **({"harness_bmc": f"{n.extra['bmc']['address']}:{n.extra['bmc']['port']}"}
                   if n.extra.get("bmc") else {}),
            } for n in nodes
        }
        primary = [n.name for n in nodes if n.primary]
        return {"all": {
            "hosts": hosts,
            "vars": {"harness_trial": spec.trial_id, "harness_trial_id": spec.trial_id,
                     "harness_campaign": spec.campaign,
                     "harness_substrate": self.name,
                     # SSH over the node's own network: a fault that cuts it must wait
                     "harness_control_path": "network"},
            "children": {"primary": {"hosts": {p: {} for p in primary}}},
        }}


def _output(outputs: dict[str, Any], key: str, default: Any = None) -> Any:
    """A module output from `terraform output -json` (wrapped in "value") or a plain dict."""
    if key not in outputs:
        if default is not None:
            return default
        raise SubstrateError("vm", f"terraform outputs lack {key!r}")
    value = outputs[key]
    wrapped = isinstance(value, dict) and {"value", "type"} <= set(value)
    return value["value"] if wrapped else value
