"""Who owns a trial's resources, and whether that owner still runs the trial.

Every container, network, volume (docker labels `harness.owner`), domain (its description),
BMC and lease carries the owner tag of the harness process that made it: the host name,
the pid and the pid's start time (in clock ticks since boot, from /proc/<pid>/stat). While
a trial runs, its process also holds the trial's lock (`hold_trial`: an flock on
`$HARNESS_HOME/run/trials/<trial>.lock`, dropped by the kernel when the process ends, kill
-9 included, and released when the trial is done: a kept trial is then nobody's). `harness
gc` removes only what no live harness process is running (`foreign_live`); an owner on
another host cannot be checked from here and counts as live (only `--force` removes its
resources).
"""

from __future__ import annotations

import fcntl
import os
import socket
from functools import lru_cache
from pathlib import Path

from harness.paths import harness_home

LABEL = "harness.owner"


def _start_ticks(pid: int) -> str | None:
    """The pid's start time, or None when no such process runs (a zombie runs no more: it
    only waits for its parent to reap it, holding nothing)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]  # field 3: state; 22: starttime


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
        return int(owner) > 0 and _start_ticks(int(owner)) is not None
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


_held: dict[str, int] = {}


def _trial_lock(trial: str) -> Path:
    return harness_home() / "run" / "trials" / f"{trial.lower()}.lock"


def hold_trial(trial: str) -> None:
    """Mark `trial` as run by this process (until `release_trial` or the process ends)."""
    if trial.lower() in _held:
        return
    path = _trial_lock(trial)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise
    _held[trial.lower()] = fd


def release_trial(trial: str) -> None:
    fd = _held.pop(trial.lower(), None)
    if fd is not None:
        os.close(fd)


def trial_running(trial: str) -> bool:
    """Whether some process (this one included) holds the trial's lock."""
    if trial.lower() in _held:
        return True
    path = _trial_lock(trial)
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def run_elsewhere(trial: str) -> bool:
    """Whether another live process (not this one) is running `trial` now."""
    return trial.lower() not in _held and trial_running(trial)


def foreign_live(owner: str | None, trial: str | None = None) -> bool:
    """What gc must not touch without --force: a trial another process is running now
    (its lock is held elsewhere), one whose owner is on another host, or one whose live
    owner left no lock under this `$HARNESS_HOME` (a harness with another home runs it).
    Without a trial id, whether the owner process itself lives."""
    if not owner or owner == tag():
        return False
    where = owner.split(":", 1)[0]
    if not owner.isdigit() and where != host():
        return True
    if trial is not None:
        if run_elsewhere(trial):
            return True
        # no lock of it under this $HARNESS_HOME: a live owner may run it under another one
        return not _trial_lock(trial).exists() and alive(owner)
    return alive(owner)
