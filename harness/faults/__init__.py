"""Fault registry: name -> spec (layer, parameters, substrates) and its driver class.

Role faults live in `roles/fi_<layer>_<fault>/` and run through `playbooks/faults.yml`
(tags `fault_<name>`, `layer_<Lx>`); power faults act through the substrate's `power()`.
Parameters come from each role's `meta/argument_specs.yml`. Unknown names list every
valid one. `FaultSession` (harness.faults.session) injects, heals and keeps the ledger.
"""

from __future__ import annotations

import importlib

from harness.errors import RegistryError
from harness.faults.base import Fault, FaultError, FaultRecord, FaultSpec, Param

ALL = ("docker", "vm", "vm-cluster")
VM = ("vm", "vm-cluster")
SHARED_KERNEL = "containers share the host kernel"
_NO_NETEM = f"{SHARED_KERNEL}, and this host's kernel has no netem (tbf works: use bandwidth)"
_NO_BLOCK = f"{SHARED_KERNEL} and have no block device of their own"

_SPECS = [
    FaultSpec("power_off", "L1", "power", "Power a node off (container stop, domain destroy); "
              "heal powers it on", ALL),
    FaultSpec("power_cycle", "L1", "power", "Power-cycle a node (container restart, domain "
              "reset); heal makes sure it is on", ALL),
    FaultSpec("nic_down", "L1", "role", "Take the node's cluster interface down; heal brings it "
              "up and restores its routes", ALL, "fi_l1_nic_down", deadman=True),
    FaultSpec("process_kill", "L2", "role", "Kill a process or a unit's processes with a signal",
              ALL, "fi_l2_process_kill"),
    FaultSpec("process_pause", "L2", "role", "Freeze a process or a unit with SIGSTOP; heal "
              "sends SIGCONT", ALL, "fi_l2_process_pause", deadman=True),
    FaultSpec("service_stop", "L2", "role", "Stop (optionally disable) a systemd service",
              ALL, "fi_l2_service_stop"),
    FaultSpec("disk_full", "L2", "role", "Fill the filesystem of a path with hx-fill-<id>",
              ALL, "fi_l2_disk_full"),
    FaultSpec("cpu_starve", "L2", "role", "Burn CPU in a transient unit hx-<id>-cpu",
              ALL, "fi_l2_cpu_starve"),
    FaultSpec("mem_starve", "L2", "role", "Hold memory in a transient unit hx-<id>-mem",
              ALL, "fi_l2_mem_starve"),
    FaultSpec("clock_skew", "L2", "role", "Step the node's clock by an offset", VM,
              "fi_l2_clock_skew", unsupported={
                  "docker": "containers share the host clock; stepping it would skew the host "
                            "and every other container (use a vm substrate)"}),
    FaultSpec("config_drift", "L2", "role", "Rewrite lines of a config file; heal restores "
              "the snapshot", ALL, "fi_l2_config_drift"),
    FaultSpec("disk_latency", "L2", "role", "dm-delay device hx-<id> under a data disk", VM,
              "fi_l2_disk_latency", unsupported={"docker": _NO_BLOCK}),
    FaultSpec("disk_errors", "L2", "role", "dm-flakey device hx-<id> under a data disk", VM,
              "fi_l2_disk_errors", unsupported={"docker": _NO_BLOCK}),
    FaultSpec("raid_member_fail", "L2", "role", "Fail and remove an mdadm array member; heal "
              "re-adds it", VM, "fi_l2_raid_member_fail", unsupported={"docker": _NO_BLOCK}),
    FaultSpec("partition", "L3", "partition", "Cut node sets off each other with an nftables "
              "table hx_<id> (selectors one/minority/majority/all/named/bridge)", ALL,
              "fi_l3_partition", deadman=True, internal_params=("blocks",)),
    FaultSpec("bandwidth", "L3", "role", "Limit egress with an owned tbf root qdisc", ALL,
              "fi_l3_bandwidth", deadman=True),
    FaultSpec("netem", "L3", "role", "netem delay, loss, corruption or duplication with an "
              "owned root qdisc", VM, "fi_l3_netem", deadman=True,
              unsupported={"docker": _NO_NETEM}),
    FaultSpec("crash_loop", "L4", "role", "Make a service crash on every start and restart "
              "forever (drop-in hx-<id>.conf)", ALL, "fi_l4_crash_loop"),
    FaultSpec("tls_mismatch", "L4", "role", "Replace a TLS key by a fresh one that does not "
              "match its certificate", ALL, "fi_l4_tls_mismatch"),
    FaultSpec("file_corrupt", "L4", "role", "Bit-flip or truncate a file after a snapshot; "
              "heal restores it", ALL, "fi_l4_file_corrupt"),
]
CATALOG: dict[str, FaultSpec] = {s.name: s for s in _SPECS}
_DRIVERS = {"role": "harness.faults.role:RoleFault",
            "partition": "harness.faults.role:PartitionFault",
            "power": "harness.faults.power:PowerFault"}

__all__ = ["CATALOG", "Fault", "FaultError", "FaultRecord", "FaultSpec", "Param", "get_fault",
           "get_spec", "names"]


def names() -> list[str]:
    return sorted(CATALOG)


def get_spec(name: str) -> FaultSpec:
    """The registry entry of a fault; an unknown name lists the valid ones."""
    if name not in CATALOG:
        raise RegistryError("fault", name, names())
    return CATALOG[name]


def get_fault(name: str) -> Fault:
    """The driver of a fault, imported lazily."""
    spec = get_spec(name)
    module, cls = _DRIVERS[spec.kind].split(":")
    return getattr(importlib.import_module(module), cls)(spec)
