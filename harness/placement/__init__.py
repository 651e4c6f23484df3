"""Placing trials on many hosts: the hosts file and the placement policy.

- `hosts`: `HostSpec`/`HostsFile`, `load_hosts`, `default_hosts`, `resolve_hosts`;
- `placer`: `Placer`, the synchronous, deterministic core (per-host pools, spread,
  balance, fairness across configurations, drain);
- `aio`: `AsyncPlacer.hold(trial)`, the asyncio entry point for the campaign queue.
"""

from __future__ import annotations

from harness.placement.aio import AsyncPlacer, NoHostError
from harness.placement.hosts import (
    ENGINE_FOR,
    DockerEndpoint,
    HostCapacity,
    HostsFile,
    HostSpec,
    TLSFiles,
    default_hosts,
    hosts_path,
    load_hosts,
    resolve_hosts,
)
from harness.placement.placer import Demand, Placer

__all__ = ["ENGINE_FOR", "AsyncPlacer", "Demand", "DockerEndpoint", "HostCapacity", "HostSpec",
           "HostsFile", "NoHostError", "Placer", "TLSFiles", "default_hosts", "hosts_path",
           "load_hosts", "resolve_hosts"]
