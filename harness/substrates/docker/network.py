"""Explicit per-trial subnets for Docker networks, so Docker's default pools never run out;
and the trial module's variables on its subnet (`render_vars`, `bridge_name`).

A subnet is reserved by creating `$HARNESS_HOME/subnets/<index>` exclusively (safe across
concurrent trials and processes) and released at teardown. A reservation whose trial has no
Docker network any more and that is older than `STALE_SEC` is reclaimed (after kill -9).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import time
from pathlib import Path

from harness import owner
from harness.errors import InputError, SubstrateError
from harness.paths import harness_home

STALE_SEC = 900
DEFAULT_POOL = "10.213.0.0/16"


def _reservations(pool: str | None = None) -> Path:
    """The reservations of `pool`: `$HARNESS_HOME/subnets` for the default pool, a folder
    of its own for another one (a host of the hosts file with its own `pool`)."""
    d = harness_home() / "subnets"
    if pool and pool != DEFAULT_POOL:
        d = d / pool.replace("/", "_")
    d.mkdir(parents=True, exist_ok=True)
    return d


def used_subnets(client) -> list[ipaddress.IPv4Network]:
    nets = []
    for net in client.networks.list():
        for cfg in (net.attrs.get("IPAM") or {}).get("Config") or []:
            try:
                nets.append(ipaddress.ip_network(cfg.get("Subnet", ""), strict=False))
            except ValueError:
                continue
    return nets


def reserve_subnet(client, trial_id: str, pool: str, prefix: int,
                   wanted: str | None = None, reserve: bool = True) -> str:
    """Reserve a free subnet for a trial: `wanted` if given (error if it overlaps), else one
    from `pool`, starting at a position derived from the trial id. With `reserve=False`
    only predict it (for plans)."""
    used = used_subnets(client)
    if wanted:
        net = ipaddress.ip_network(wanted, strict=False)
        clash = [str(u) for u in used if u.overlaps(net)]
        if clash:
            raise InputError(f"environment.network {wanted} overlaps existing Docker network "
                             f"subnet(s) {clash}; choose another CIDR or leave it unset",
                             key="environment.network")
        return str(net)
    subnets = list(ipaddress.ip_network(pool).subnets(new_prefix=prefix))
    start = int(hashlib.sha256(trial_id.encode()).hexdigest(), 16) % len(subnets)
    resv = _reservations(pool)
    for i in range(len(subnets)):
        idx = (start + i) % len(subnets)
        net = subnets[idx]
        if any(u.overlaps(net) for u in used):
            continue
        path = resv / str(idx)
        if path.exists() and time.time() - path.stat().st_mtime > STALE_SEC:
            holder, tag = _lease(path)
            if (not owner.foreign_live(tag, holder) and
                    not client.networks.list(filters={"label": f"harness.trial={holder}"})):
                path.unlink(missing_ok=True)
        if not reserve:
            if path.exists():
                continue
            return str(net)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{trial_id}\n{owner.tag()}\n")
        return str(net)
    raise SubstrateError("docker", f"no free /{prefix} subnet left in pool {pool}")


def _lease(path: Path) -> tuple[str, str]:
    """(trial id, owner tag) of a subnet lease file (older leases hold the id alone)."""
    trial, _, tag = path.read_text().strip().partition("\n")
    return trial.strip(), tag.strip()


def release_subnet(trial_id: str, pool: str | None = None) -> None:
    for path in _reservations(pool).iterdir():
        try:
            if _lease(path)[0] == trial_id:
                path.unlink(missing_ok=True)
        except OSError:
            continue


def stale_reservations(live_trials: set[str], pool: str | None = None) -> list[Path]:
    """Leases of trials without a network that no live harness process is running (one
    between its lease and its network being created keeps its lease)."""
    out = []
    for path in _reservations(pool).iterdir():
        try:
            if not path.is_file():
                continue
            trial, tag = _lease(path)
            if trial not in live_trials and not owner.foreign_live(tag, trial):
                out.append(path)
        except OSError:
            continue
    return out
