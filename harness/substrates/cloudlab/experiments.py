"""The harness's record of the CloudLab experiments it made: one file per experiment in
`$HARNESS_HOME/cloudlab/experiments/<name>.json` (trial, campaign, owner, host, pid,
portal, project, nodes), written before `terraform apply` creates the experiment and
removed after `terraform destroy`.

It is the quota ledger (`reserve`: under a lock, at most `max_experiments` live records and
`max_nodes` nodes per portal and project; more is ResourceBusy, and the trial waits), what
`harness gc` reads to tell a dead trial's experiment from a live one after kill -9, and
what the extension thread (`keep_alive`) walks: an experiment of a running trial is
extended by an hour whenever less than `EXTEND_MARGIN_SEC` of it is left.

Experiment names are derived from the trial id: `hx-` and 12 hex digits (deterministic;
CloudLab limits names to a few dozen characters of `[-\\w]`).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from harness import owner
from harness.errors import HarnessError, ResourceBusy
from harness.paths import harness_home
from harness.results import write_json_atomic
from harness.substrates.metal.pool import pool_path

PREFIX = "hx-"
EXTEND_MARGIN_SEC = 1800
CHECK_EVERY_SEC = 60.0


def experiment_name(trial_id: str) -> str:
    return PREFIX + hashlib.sha256(trial_id.encode()).hexdigest()[:12]


def records_dir() -> Path:
    return harness_home() / "cloudlab" / "experiments"


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    records_dir().mkdir(parents=True, exist_ok=True)
    with open(records_dir().parent / "experiments.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read() -> dict[str, dict]:
    out = {}
    for path in sorted(records_dir().glob("*.json")) if records_dir().exists() else []:
        with contextlib.suppress(OSError, ValueError):
            out[path.stem] = json.loads(path.read_text())
    return out


def is_live(record: dict) -> bool:
    """The trial runs here now, or its owner process does; a reuse pool's experiment while
    its pool file exists."""
    if record.get("pool") and pool_path(record["pool"]).exists():
        return True
    if record.get("host") and record["host"] != owner.host():
        return True  # another host's: only its own gc may judge it
    return owner.trial_running(record.get("trial", "")) or owner.alive(record.get("owner"))


def reserve(name: str, trial: str, campaign: str, portal: str, project: str, nodes: int,
            max_experiments: int, max_nodes: int, wait_sec: float, trial_dir: str,
            hours: int) -> dict:
    """Record the experiment of `trial` (asked for `hours`) unless that goes past the quota
    (ResourceBusy while live trials hold it, naming them)."""
    with _lock():
        records = read()
        mine = records.get(name)
        others = {n: r for n, r in records.items() if n != name and r.get("portal") == portal
                  and r.get("project") == project and is_live(r)}
        used_nodes = sum(int(r.get("nodes", 0)) for r in others.values())
        if mine is None and (len(others) >= max_experiments
                             or (max_nodes and used_nodes + nodes > max_nodes)):
            raise ResourceBusy(
                f"CloudLab quota of project {project} at {portal}: {len(others)} of "
                f"{max_experiments} experiment(s), {used_nodes} of {max_nodes or 'any'} "
                f"node(s) held by " + ", ".join(f"{n} (trial {r.get('trial')})"
                                                for n, r in sorted(others.items())), wait_sec)
        record = {"name": name, "trial": trial, "campaign": campaign, "portal": portal,
                  "project": project, "nodes": nodes, "owner": owner.tag(),
                  "host": owner.host(), "trial_dir": trial_dir,
                  "created": (mine or {}).get("created", time.time()),
                  "expires": (mine or {}).get("expires", time.time() + 3600 * hours)}
        write_json_atomic(records_dir() / f"{name}.json", record)
        return record


def mark_pool(name: str, pool: str) -> None:
    """The experiment serves the reuse pool `pool` (live while its pool file exists)."""
    with _lock():
        record = read()[name]
        record["pool"] = pool
        write_json_atomic(records_dir() / f"{name}.json", record)


def note_expiry(name: str, expires: float) -> None:
    """The portal's expiry of experiment `name`, kept in its record (gc's last resort)."""
    with _lock():
        record = read().get(name)
        if record is not None and record.get("expires") != expires:
            record["expires"] = expires
            write_json_atomic(records_dir() / f"{name}.json", record)


def expired(record: dict, now: float | None = None) -> bool:
    """The portal has ended the experiment on its own by now (its expiry, plus an hour for
    a portal's slow reaping, has passed)."""
    return float(record.get("expires") or float("inf")) + 3600 < (now or time.time())


def forget(name: str) -> None:
    with _lock():
        (records_dir() / f"{name}.json").unlink(missing_ok=True)


def stale(trial: str | None = None, campaign: str | None = None,
          force: bool = False) -> dict[str, dict]:
    """Records whose trial is gone (all matching ones with `force`)."""
    return {n: r for n, r in read().items()
            if (trial is None or r.get("trial") == trial)
            and (campaign is None or r.get("campaign") == campaign)
            and (force or not is_live(r) or (trial is not None
                                              and not owner.run_elsewhere(trial)))}


_extending: dict[str, threading.Thread] = {}


def keep_alive(name: str, client, log=print, every: float = CHECK_EVERY_SEC) -> None:
    """While the record of `name` exists, extend its experiment by an hour whenever less
    than EXTEND_MARGIN_SEC is left (a daemon thread; idempotent per experiment)."""
    running = _extending.get(name)
    if running and running.is_alive():
        return

    def loop() -> None:
        while (records_dir() / f"{name}.json").exists():
            try:
                exp = client.experiment(f"{read()[name]['project']},{name}")
                expires = expires_at(exp.get("expires_at"))
                left = None if expires is None else expires - time.time()
                if left is not None and left < EXTEND_MARGIN_SEC:
                    exp = client.extend(exp["id"], 1) or exp
                    log(f"cloudlab: extended {name} by 1 h ({left:.0f}s were left)")
                    expires = expires_at(exp.get("expires_at"))
                if expires is not None:
                    note_expiry(name, expires)
            except (HarnessError, KeyError, OSError):
                pass  # gone, or the portal is busy: the next round tries again
            time.sleep(every)

    thread = threading.Thread(target=loop, name=f"cloudlab-extend-{name}", daemon=True)
    _extending[name] = thread
    thread.start()


def expires_at(text: str | None) -> float | None:
    """The portal's `expires_at` (ISO 8601) as a Unix time; None when absent or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def main(argv: list[str] | None = None) -> int:
    """`forget NAME`: the destroy step of the trial's record (after the experiment's)."""
    parser = argparse.ArgumentParser(prog="python -m harness.substrates.cloudlab.experiments")
    parser.add_argument("action", choices=["forget"])
    parser.add_argument("name")
    args = parser.parse_args(argv)
    forget(args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
