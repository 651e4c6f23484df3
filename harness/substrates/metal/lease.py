"""Exclusive leases on a pool's machines: one trial per machine, across processes.

    $HARNESS_HOME/pools/<pool>.leases/.lock        flock taken for every change
    $HARNESS_HOME/pools/<pool>.leases/<machine>.json
        {"trial", "campaign", "owner", "host", "pid", "acquired", "heartbeat"}

`acquire` takes N machines (with the tags asked for) in one step under the pool's lock, so
two harness processes never hold one machine. A lease is *live* while its trial runs
(`harness.owner`: the trial's lock is held, or the owner process still runs); a lease
whose owner died (kill -9) is *stale*: its machine is not handed out again until
`harness gc` has cleaned it (reset + cleanup play) and reclaimed the lease, because the
dead trial may have left faults and files on it. Another host's lease (a pool directory
shared between harness hosts) counts as live while its heartbeat is fresh: the trial's
process refreshes it every `HEARTBEAT_SEC` (`keep_alive`, a daemon thread, for as long as
the trial holds leases); one not refreshed for `HEARTBEAT_TTL_SEC` is stale.

A machine whose BMC no longer accepts the harness account (after the reset that should
have restored it) is *quarantined*: `quarantine/<machine>.json` in the lease directory
({machine, reason, trial, since, host}) says why; it is never leased (a trial, the
portal), reset or handed to gc until `harness pool repair` brings it back and lifts it.
Its lease is released at once: the rest of the pool stays usable.

Run as a module, it is what the trial's Terraform root calls (`terraform_data.lease`) at
create: `check` (the lease must be this trial's); at destroy it calls `reset release`.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from harness import owner
from harness.errors import HarnessError, InputError, ResourceBusy
from harness.results import write_json_atomic
from harness.substrates.metal.pool import Machine, Pool, pools_dir

LOCK_TIMEOUT_SEC = 60.0
HEARTBEAT_SEC = 30.0
HEARTBEAT_TTL_SEC = 300.0


def lease_dir(pool: str) -> Path:
    return pools_dir() / f"{pool}.leases"


@contextlib.contextmanager
def pool_lock(pool: str, timeout: float = LOCK_TIMEOUT_SEC) -> Iterator[None]:
    """The pool's lease lock (blocking, at most `timeout` seconds)."""
    path = lease_dir(pool) / ".lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise InputError(f"the lease lock of pool {pool} ({path}) is held by "
                                     f"another process for more than {timeout:.0f}s") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def quarantine_dir(pool: str) -> Path:
    return lease_dir(pool) / "quarantine"


def quarantined(pool: str) -> dict[str, dict]:
    """machine -> its quarantine record (why, since when, which trial)."""
    return _records(quarantine_dir(pool))


def quarantine(pool: str, machine: str, reason: str, trial: str | None = None) -> dict:
    """Take `machine` out of the pool until `harness pool repair` (the record, kept if it
    is already quarantined)."""
    with pool_lock(pool):
        path = quarantine_dir(pool) / f"{machine}.json"
        if path.exists():
            with contextlib.suppress(OSError, ValueError):
                return json.loads(path.read_text())
        record = {"pool": pool, "machine": machine, "reason": reason, "trial": trial,
                  "since": time.time(), "host": owner.host(),
                  "repair": f"harness pool repair {pool} {machine}"}
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, record)
        return record


def lift(pool: str, machine: str) -> bool:
    """End a machine's quarantine (after its repair); whether it was quarantined."""
    with pool_lock(pool):
        path = quarantine_dir(pool) / f"{machine}.json"
        found = path.exists()
        path.unlink(missing_ok=True)
    return found


def describe_quarantine(pool: str, records: dict[str, dict] | None = None) -> str:
    records = quarantined(pool) if records is None else records
    return ", ".join(f"{m} ({r.get('reason', '?')})" for m, r in sorted(records.items()))


def read(pool: str) -> dict[str, dict]:
    """machine -> its lease record (no lock taken: a snapshot)."""
    return _records(lease_dir(pool))


def _records(directory: Path) -> dict[str, dict]:
    """name -> record of every readable `*.json` in `directory` (a half-written or
    vanished one is skipped)."""
    out = {}
    for path in sorted(directory.glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            out[path.stem] = json.loads(path.read_text())
    return out


def expired(record: dict, now: float | None = None) -> bool:
    """Whether the lease's heartbeat is older than `HEARTBEAT_TTL_SEC` (one without a
    heartbeat never expires)."""
    beat = record.get("heartbeat")
    return isinstance(beat, int | float) and (now or time.time()) - beat > HEARTBEAT_TTL_SEC


def is_live(record: dict) -> bool:
    """A lease whose trial still runs here, or whose owner runs, or another host's whose
    heartbeat is fresh."""
    if record.get("host") and record["host"] != owner.host():
        return not expired(record)
    return owner.trial_running(record.get("trial", "")) or owner.alive(record.get("owner"))


def acquire(pool: Pool, trial: str, campaign: str, count: int, tags: list[str] = (),
            prefer: list[str] = (), wait_sec: float = 0.0) -> list[Machine]:
    """Lease `count` free machines with `tags` for `trial` (machines it already holds count;
    `prefer`: names tried first). Too few free: ResourceBusy (worth waiting up to
    `wait_sec`) while other live trials hold enough of the rest, else InputError; both
    name what is taken."""
    candidates = pool.with_tags(list(tags))
    if len(candidates) < count:
        raise InputError(f"pool {pool.name} has {len(candidates)} machine(s) with tags "
                         f"{list(tags) or '(any)'}; the task needs {count}")
    with pool_lock(pool.name):
        out = {n: r for n, r in quarantined(pool.name).items()
               if n in {m.name for m in candidates}}
        candidates = [m for m in candidates if m.name not in out]
        if len(candidates) < count:
            raise InputError(f"pool {pool.name}: {count} machine(s) needed, "
                             f"{len(candidates)} not quarantined; quarantined (`harness pool "
                             f"repair {pool.name}` brings them back): "
                             f"{describe_quarantine(pool.name, out)}")
        order = sorted(candidates, key=lambda m: (m.name not in prefer, m.name))
        names = {m.name for m in candidates}
        leases = read(pool.name)
        mine = [m for m in order if leases.get(m.name, {}).get("trial") == trial]
        free = [m for m in order if m.name not in leases]
        chosen = (mine + free)[:count]
        if len(chosen) < count:
            busy = {n: r for n, r in leases.items() if r.get("trial") != trial and n in names}
            stale = sorted(n for n, r in busy.items() if not is_live(r))
            message = (
                f"pool {pool.name}: {count} machine(s) needed, {len(mine) + len(free)} free; "
                f"leased: " + ", ".join(f"{n} (trial {r.get('trial')}, "
                                        f"{owner.describe(r.get('owner'))})"
                                        for n, r in sorted(busy.items()))
                + (f"; stale (run `harness gc` to clean and reclaim): {', '.join(stale)}"
                   if stale else ""))
            if len(chosen) + len(busy) - len(stale) >= count:
                raise ResourceBusy(message, wait_sec)
            raise InputError(message)
        now = time.time()
        for m in chosen:
            write_json_atomic(lease_dir(pool.name) / f"{m.name}.json", {
                "pool": pool.name, "machine": m.name, "trial": trial, "campaign": campaign,
                "owner": owner.tag(), "host": owner.host(), "pid": os.getpid(),
                "acquired": leases.get(m.name, {}).get("acquired", now), "heartbeat": now})
    return chosen


def heartbeat(pool: str, trial: str) -> int:
    """Refresh the heartbeat of every lease `trial` holds in `pool`; how many it holds
    (none, with no lock file made, once the pool's lease directory is gone)."""
    held = 0
    if not lease_dir(pool).is_dir():
        return held
    with pool_lock(pool):
        for machine, record in read(pool).items():
            if record.get("trial") == trial:
                record["heartbeat"] = time.time()
                write_json_atomic(lease_dir(pool) / f"{machine}.json", record)
                held += 1
    return held


_beating: dict[tuple[str, str], threading.Thread] = {}


def keep_alive(pool: str, trial: str, interval: float = HEARTBEAT_SEC) -> threading.Thread:
    """Refresh `trial`'s leases every `interval` seconds in a daemon thread, which ends once
    the trial holds none (they are released at teardown, by Terraform's destroy or gc) or
    with the process. Idempotent per (pool, trial)."""
    key = (pool, trial)
    running = _beating.get(key)
    if running and running.is_alive():
        return running

    def beat() -> None:
        while True:
            time.sleep(interval)
            try:
                if not heartbeat(pool, trial):
                    return
            except (OSError, HarnessError):
                continue  # a lock held too long or a full disk: try again next beat

    thread = threading.Thread(target=beat, name=f"lease-heartbeat-{trial}", daemon=True)
    _beating[key] = thread
    thread.start()
    return thread


def release(pool: str, trial: str, machines: list[str] | None = None) -> list[str]:
    """Drop `trial`'s leases (all, or those of `machines`); returns the machines freed."""
    freed = []
    with pool_lock(pool):
        for machine, record in read(pool).items():
            if record.get("trial") == trial and (machines is None or machine in machines):
                (lease_dir(pool) / f"{machine}.json").unlink(missing_ok=True)
                freed.append(machine)
    return freed


def stale(pool: str, trial: str | None = None, force: bool = False) -> dict[str, dict]:
    """machine -> lease record of leases no live trial holds (all leases with `force`).
    With `trial` (its own teardown, or gc of one trial), that trial's leases unless another
    live process runs it now or another host holds them."""
    def gone(r: dict) -> bool:
        if force:
            return True
        if trial is not None:
            if r.get("host") not in (None, owner.host()):
                return expired(r)
            return not owner.run_elsewhere(trial)
        return not is_live(r)

    return {m: r for m, r in read(pool).items()
            if (trial is None or r.get("trial") == trial) and gone(r)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.substrates.metal.lease")
    parser.add_argument("action", choices=("check", "release"))
    parser.add_argument("--pool", required=True)
    parser.add_argument("--trial", required=True)
    parser.add_argument("--machine", required=True)
    args = parser.parse_args(argv)
    if args.action == "release":  # (with a reset first: `python -m ...baremetal.reset release`)
        release(args.pool, args.trial, [args.machine])
        return 0
    record = read(args.pool).get(args.machine)
    if not record or record.get("trial") != args.trial:
        held = f"trial {record.get('trial')}" if record else "nobody"
        print(f"machine {args.machine} of pool {args.pool} is not leased to trial "
              f"{args.trial} (held by {held})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
