"""Fault registry: name -> spec (layer, parameters, requirements) and its driver class.

A role fault is one folder `roles/fi_<layer>_<fault>/`: `meta/fault.yml` (name, layer,
kind, summary, the substrate capabilities it `requires` and `why`, dead-man switch),
`meta/argument_specs.yml` (its parameters) and `templates/{inject,heal,verify}.sh.j2`.
The registry is built by reading those folders; `playbooks/faults.yml` is one generic
play that runs the selected folder's scripts through roles/fi_common. A power fault's
folder (`kind: power`) holds only its `meta/`: the harness drives it through the
substrate's `power()` (`harness.faults.power`). Unknown names
list every valid one. `FaultSession` (harness.faults.session) injects, heals and keeps the
ledger.
"""

from __future__ import annotations

import functools
import importlib

import yaml

from harness.errors import InputError, RegistryError
from harness.faults.base import Fault, FaultError, FaultRecord, FaultSpec, Param
from harness.paths import ROLES

_DRIVERS = {"role": "harness.faults.role:RoleFault",
            "partition": "harness.faults.role:PartitionFault",
            "power": "harness.faults.power:PowerFault"}

__all__ = ["Fault", "FaultError", "FaultRecord", "FaultSpec", "Param", "catalog", "get_fault",
           "get_spec", "names"]


def spec_from_folder(folder) -> FaultSpec:
    """The FaultSpec of a role folder (its meta/fault.yml)."""
    doc = yaml.safe_load((folder / "meta" / "fault.yml").read_text())
    return FaultSpec(name=doc["name"], layer=doc["layer"], kind=doc.get("kind", "role"),
                     summary=doc["summary"], role=folder.name,
                     requires=tuple(doc.get("requires") or ()), why=doc.get("why") or {},
                     deadman=_deadman(folder, doc.get("deadman")),
                     heal_unreachable=_choice(folder, "heal_unreachable",
                                              doc.get("heal_unreachable"), ("power_cycle",)),
                     internal_params=tuple(doc.get("internal_params") or ()), folder=folder)


def _choice(folder, key: str, value, valid: tuple[str, ...]) -> str:
    if value in (None, "", False):
        return ""
    if value not in valid:
        raise InputError(f"{folder / 'meta' / 'fault.yml'}: {key}: {value!r} is not valid; "
                         f"valid: {', '.join(valid)} (or leave it out)")
    return str(value)


def _deadman(folder, value) -> str:
    """`deadman: true` is the node-side switch (the older spelling of `node`)."""
    return _choice(folder, "deadman", "node" if value is True else value,
                   ("node", "controller"))


@functools.cache
def catalog(roles=ROLES) -> dict[str, FaultSpec]:
    """Every fault: one per `roles/fi_*/meta/fault.yml`."""
    specs = [spec_from_folder(d) for d in sorted(roles.glob("fi_*"))
             if (d / "meta" / "fault.yml").is_file()]
    return {s.name: s for s in specs}


def names() -> list[str]:
    return sorted(catalog())


def get_spec(name: str) -> FaultSpec:
    """The registry entry of a fault; an unknown name lists the valid ones."""
    if name not in catalog():
        raise RegistryError("fault", name, names())
    return catalog()[name]


def get_fault(name: str) -> Fault:
    """The driver of a fault, imported lazily."""
    spec = get_spec(name)
    module, cls = _DRIVERS[spec.kind].split(":")
    return getattr(importlib.import_module(module), cls)(spec)
