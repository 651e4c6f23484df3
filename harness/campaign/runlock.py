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


def _lock(path: Path, mode: int) -> int | None:
    """An flock of `mode` on `path` (created), or None when another process holds one
    that conflicts (`mode` without LOCK_NB waits instead)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _hold(path: Path, mode: int) -> bool:
    """Hold an flock on `path` for the life of this process (re-entrant); False when
    another process's lock conflicts."""
    key = str(path.resolve())
    if key not in _held:
        fd = _lock(path, mode)
        if fd is None:
            return False
        _held[key] = fd  # never closed: closing would drop the lock
    return True


def _refuse(run_dir: Path, command: str, info: dict, why: str = "") -> InputError:
    return InputError(f"{command}: the run directory is in use by `{info.get('command', '?')}`"
                      f" ({owner.describe(info.get('owner'))}, since {info.get('since', '?')})"
                      f"{why}; wait for it to finish or stop it (Ctrl-C in its terminal), "
                      "then run this again", file=str(run_dir))


def acquire(run_dir: Path, command: str, shard: str = "") -> None:
    """Take the run directory's lock for this process (kept until it exits); InputError
    (exit 2) naming the holder when another process has it. Re-entrant per process.

    Without a shard the lock is exclusive. `apply --shard K/N` holds the run's lock shared
    (so no unsharded apply, plan or destroy runs beside it), the lock of its N shared (so
    shards cut another way, `--shard J/M` with M != N, are refused: they would share
    trials) and its own shard's lock exclusively."""
    main, own = _path(run_dir), _path(run_dir, shard)
    if str(own.resolve()) in _held:
        return
    if shard:
        n = shard.split("/")[1]
        if not _hold(main, fcntl.LOCK_SH | fcntl.LOCK_NB):
            raise _refuse(run_dir, command, _read(main))
        cut = main.with_name(f"{main.name}.of-{n}")
        _hold(cut, fcntl.LOCK_SH)  # waits only for another shard's momentary probe below
        for other in main.parent.glob(f"{main.name}.of-*"):
            if other == cut:
                continue
            probe = _lock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if probe is None:
                raise _refuse(run_dir, command, holder(run_dir) or {},
                              f" with shards of {other.name.rsplit('-', 1)[1]} (all shards "
                              f"of one run directory must be cut the same way, K/{n} here)")
            os.close(probe)
    if not _hold(own, fcntl.LOCK_EX | fcntl.LOCK_NB):
        raise _refuse(run_dir, command, (holder(run_dir) if not shard else _read(own)) or {})
    _note(_held[str(own.resolve())], command)


def _note(fd: int, command: str) -> None:
    """Name the holder in an exclusively held lock file."""
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps({"owner": owner.tag(), "command": command,
                             "since": datetime.now(UTC).isoformat(timespec="seconds")}).encode())
    os.fsync(fd)


def _read(path: Path) -> dict:
    """What a lock file says of its holder ({} when empty or unreadable)."""
    try:
        return json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}


def release(run_dir: Path) -> None:
    fd = _held.pop(str(_path(run_dir).resolve()), None)
    if fd is not None:
        os.close(fd)


def holder(run_dir: Path) -> dict | None:
    """Who holds the lock now ({owner, command, since}), or None when nobody does; the
    run directory's own lock first, then any shard's (`apply --shard K/N`)."""
    main = _path(run_dir)
    shards = [p for p in sorted(main.parent.glob(f"{main.name}.*-*"))
              if not p.name.startswith(f"{main.name}.of-")]
    for path in [main, *shards]:
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
            return _read(path) or {"owner": None}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
