"""Names and addresses of a trial's libvirt objects, all derived from the trial id.

Every object carries the `hx-` prefix so `harness gc` finds it after a crash: the network
and disks are `hx-<trial>`, domains `hx-<trial>-<node>`. Linux bridge names are at most 15
characters, so the bridge is `hx-` + 12 hex digits of a hash of the trial id.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re

from harness.errors import InputError

PREFIX = "hx-"
_TRIAL_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# trial subnets are /24s carved from this block when the task does not pin one
SUBNET_POOL = ipaddress.ip_network("10.128.0.0/10")


def trial_name(trial_id: str) -> str:
    """`trial_id` as used in libvirt names; rejects what libvirt or DNS would choke on."""
    name = trial_id.lower()
    if not _TRIAL_RE.match(name):
        raise InputError(f"trial id {trial_id!r} must be lowercase letters, digits and dashes "
                         "(at most 63) to name libvirt objects", key="trial_id")
    return name


def resource_prefix(trial_id: str) -> str:
    return PREFIX + trial_name(trial_id)


def domain_name(trial_id: str, node: str) -> str:
    return f"{resource_prefix(trial_id)}-{node}"


def bridge_name(trial_id: str) -> str:
    """`hx-` + 12 hex digits: 15 characters, the Linux limit (IFNAMSIZ - 1)."""
    return PREFIX + hashlib.sha256(trial_name(trial_id).encode()).hexdigest()[:12]


def trial_subnet(trial_id: str, taken: set[ipaddress.IPv4Network] | frozenset = frozenset()
                 ) -> ipaddress.IPv4Network:
    """A /24 for the trial from SUBNET_POOL, chosen by hash, skipping overlapping `taken`."""
    count = 2 ** (24 - SUBNET_POOL.prefixlen)
    start = int(hashlib.sha256(trial_name(trial_id).encode()).hexdigest(), 16) % count
    base = int(SUBNET_POOL.network_address)
    for step in range(count):
        net = ipaddress.ip_network((base + ((start + step) % count) * 256, 24))
        if not any(net.overlaps(t) for t in taken):
            return net
    raise InputError(f"no free /24 left in {SUBNET_POOL} for trial {trial_id}")
