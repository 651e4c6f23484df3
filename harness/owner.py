"""Who owns a resource: `host:pid:start`, written on everything a trial creates.

Every container, network, volume (docker labels `harness.owner`), domain (its description),
BMC, lease and run-directory lock carries the owner tag of the harness process that made
it: the host name, the pid and the pid's start time (in clock ticks since boot, from
/proc/<pid>/stat), so a recycled pid is not mistaken for the owner. `harness gc` removes
only what no live harness process owns; an owner on another host cannot be checked from
here and counts as alive (only `--force` removes its resources).
"""

from __future__ import annotations

import os
import socket
from functools import lru_cache

LABEL = "harness.owner"


def _start_ticks(pid: int) -> str | None:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22: starttime


@lru_cache(maxsize=1)
def _boot_id() -> str:
    try:
        return open("/proc/sys/kernel/random/boot_id").read().strip()[:8]
    except OSError:
        return "?"


def host() -> str:
    return socket.gethostname()


def tag(pid: int | None = None) -> str:
    """This process's owner tag (or `pid`'s): `host:pid:start@boot`."""
    pid = pid or os.getpid()
    return f"{host()}:{pid}:{_start_ticks(pid) or 0}@{_boot_id()}"


def alive(owner: str | None) -> bool:
    """Whether the process named by an owner tag still runs. A bare pid (older trials)
    is checked as a pid; an empty or malformed tag is nobody's; another host's is alive."""
    if not owner or owner in ("0", "-"):
        return False
    if owner.isdigit():
        return int(owner) > 0 and os.path.exists(f"/proc/{owner}")
    try:
        where, pid, start = owner.split(":", 2)
        start, _, boot = start.partition("@")
        pid_n = int(pid)
    except ValueError:
        return False
    if where != host() or (boot and boot != _boot_id()):
        return where != host()  # another machine: cannot tell, never ours to remove
    return pid_n > 0 and _start_ticks(pid_n) == start


def describe(owner: str | None) -> str:
    """`pid N on HOST` for messages."""
    if not owner:
        return "nobody"
    parts = owner.split(":")
    return f"pid {parts[1]} on {parts[0]}" if len(parts) >= 2 else f"pid {owner}"


def foreign_live(owner: str | None) -> bool:
    """Alive and not this process: what gc must not touch without --force."""
    return bool(owner) and owner != tag() and alive(owner)
