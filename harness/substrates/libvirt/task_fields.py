"""The `[[environment.nodes]]` keys the VM substrates add to task.toml (their task-field
schema; `Substrate.node_fields`): a virtual BMC per node, extra blank data disks, and how
the node starts (from a booted snapshot of its shape, or a cold boot)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field


def _disk_sizes(v: list[int]) -> list[int]:
    if len(v) > 8 or any(not 1 <= mb <= 65536 for mb in v):
        raise ValueError(f"{v!r}: at most 8 data disks of 1-65536 MB each")
    return v


NODE_FIELDS: dict[str, tuple[Any, Any]] = {
    "bmc": (bool, Field(default=False, description="A virtual BMC (IPMI over LAN) for the "
                                                   "node, its address in cluster-info")),
    "data_disks": (Annotated[list[int], AfterValidator(_disk_sizes)],
                   Field(default_factory=list, description="Extra blank disks, sizes in MB; "
                         "the node sees them as /dev/vdc, /dev/vdd, ...")),
    "vm_start": (Literal["snapshot", "cold"] | None,
                 Field(default=None, description="snapshot (default: restore a booted "
                       "template of the node's shape) or cold (a full boot)")),
}
