"""One owner per run directory: `campaign apply` (and plan, destroy) hold its lock.

The lock is an `flock` on `<run>/.lock`, held for the life of the command: the kernel drops
it when the process ends, however it ends (kill -9 included), so a lock is never stale.
The file names its holder (owner tag, command, start time); a second command on the same
run directory says who holds it and exits 2. `holder()` tells `campaign status` whether an
apply is alive.
"""

from __future__ import annotations

import fcntl
import json
import os
from datetime import UTC, datetime
from pathlib import Path

from harness import owner
from harness.errors import InputError
from harness.paths import RunPaths

_held: dict[str, int] = {}


def _path(run_dir: Path, shard: str = "") -> Path:
    """`<run>/.lock`, or `<run>/.lock.K-N` for shard K/N (shards of one campaign may run at
    once in one run directory on shared storage: they never share a trial)."""
    lock = RunPaths(Path(run_dir)).lock
    return lock.with_name(f"{lock.name}.{shard.replace('/', '-')}") if shard else lock


def acquire(run_dir: Path, command: str, shard: str = "") -> None:
    """Take the run directory's lock for this process (kept until it exits); InputError
    (exit 2) naming the holder when another process has it. Re-entrant per process."""
    path = _path(run_dir, shard)
    key = str(path.resolve())
    if key in _held:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        info = _read(fd)
        os.close(fd)
        raise InputError(f"{command}: the run directory is in use by `{info.get('command', '?')}`"
                         f" ({owner.describe(info.get('owner'))}, since "
                         f"{info.get('since', '?')}); wait for it to finish or stop it "
                         "(Ctrl-C in its terminal), then run this again",
                         file=str(run_dir)) from None
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps({"owner": owner.tag(), "command": command,
                             "since": datetime.now(UTC).isoformat(timespec="seconds")}).encode())
    os.fsync(fd)
    _held[key] = fd  # never closed: closing would drop the lock


def release(run_dir: Path) -> None:
    fd = _held.pop(str(_path(run_dir).resolve()), None)
    if fd is not None:
        os.close(fd)


def _read(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return json.loads(os.read(fd, 4096) or b"{}")
    except (OSError, ValueError):
        return {}


def holder(run_dir: Path) -> dict | None:
    """Who holds the lock now ({owner, command, since}), or None when nobody does; the
    run directory's own lock first, then any shard's (`apply --shard K/N`)."""
    main = _path(run_dir)
    for path in [main, *sorted(main.parent.glob(f"{main.name}.*-*"))]:
        held = _holder(path)
        if held:
            return held
    return None


def _holder(path: Path) -> dict | None:
    if str(path.resolve()) in _held:
        return {"owner": owner.tag(), "command": "this process"}
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd) or {"owner": None}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
