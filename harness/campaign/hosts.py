"""The campaign's hosts: where each trial runs, its substrate bound there, which host fails.

`HostSet` joins the hosts file (`harness.placement`) and the campaign: one placement pool
per host (a host's `capacity.max_trials` defaults to the campaign's `concurrency.
per_substrate`), one substrate object per (host, substrate) made on first use
(`Substrate.on_host`: the host's engine endpoint, its images, its subnet pool), and the
health of every host a trial runs on (`failing`: the reason its engine does not answer).
Containers hold a slot only; substrates that `holds_capacity` (VMs) also hold vCPUs and
memory, as on one machine.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from harness.errors import InputError, PreflightError
from harness.placement import AsyncPlacer, Demand, HostsFile, HostSpec, resolve_hosts
from harness.substrates.base import Substrate


def shard_of(trial_id: str, count: int) -> int:
    """The shard (1..count) a trial belongs to: from its id alone, so every controller
    computes the same split without talking to the others."""
    return int(hashlib.sha256(trial_id.encode()).hexdigest()[:8], 16) % count + 1


def shard_from_env(text: str, env: dict[str, str] | None = None) -> str:
    """`auto` or `auto/N` -> `K/N` from a job array's index: Slurm's
    `SLURM_ARRAY_TASK_ID` (K = id - SLURM_ARRAY_TASK_MIN + 1; N defaults to
    SLURM_ARRAY_TASK_COUNT) or a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` (0-based:
    K = index + 1; N must be given, the Job's `completions`)."""
    env = os.environ if env is None else env
    _, _, count = text.partition("/")
    if env.get("SLURM_ARRAY_TASK_ID"):
        k = int(env["SLURM_ARRAY_TASK_ID"]) - int(env.get("SLURM_ARRAY_TASK_MIN") or 0) + 1
        count = count or env.get("SLURM_ARRAY_TASK_COUNT", "")
    elif env.get("JOB_COMPLETION_INDEX"):
        k = int(env["JOB_COMPLETION_INDEX"]) + 1
    else:
        raise InputError(f"got {text!r} but neither SLURM_ARRAY_TASK_ID nor "
                         "JOB_COMPLETION_INDEX is set (valid outside a job array: K/N)",
                         key="--shard")
    if not count:
        raise InputError(f"got {text!r}: the shard count is not known here (valid: "
                         "auto/N, N the Job's completions)", key="--shard")
    return f"{k}/{count}"


def parse_shard(text: str | None, env: dict[str, str] | None = None
                ) -> tuple[int, int] | None:
    """`K/N` (1 <= K <= N) -> (K, N); `auto[/N]` from a job array's index
    (`shard_from_env`); None for no sharding; one-line error otherwise."""
    if not text:
        return None
    if text == "auto" or text.startswith("auto/"):
        try:
            text = shard_from_env(text, env)
        except ValueError:
            raise InputError(f"got {text!r}: the job array's index is not a number",
                             key="--shard") from None
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise InputError(f"got {text!r} (valid: K/N, e.g. 1/2)", key="--shard") from None
    if not 1 <= k <= n:
        raise InputError(f"got {text!r}: K must be between 1 and N (valid: 1/{max(n, 1)}.."
                         f"{max(n, 1)}/{max(n, 1)})", key="--shard")
    return k, n


class HostSet:
    """The hosts a campaign places its trials on."""

    def __init__(self, hosts: HostsFile, substrates: dict[str, Substrate], camp: Any):
        limits = camp.limits
        specs = []
        for h in hosts.hosts:
            slots = {n: limits.per_substrate.get(n, limits.total) for n, sub in
                     substrates.items() if not sub.engine or h.endpoint(sub.engine)}
            cap = h.capacity.model_copy(update={"max_trials": {**slots,
                                                               **h.capacity.max_trials}})
            specs.append(h.model_copy(update={"capacity": cap}))
        self.specs: dict[str, HostSpec] = {h.name: h for h in specs}
        self.base = substrates
        self.placer = AsyncPlacer(specs, cpu_overcommit=camp.capacity.cpu_overcommit,
                                  memory_overcommit=camp.capacity.memory_overcommit,
                                  seed=camp.seed)
        self._bound: dict[tuple[str, str], Substrate] = {}
        self.drained: dict[str, str] = {}

    @classmethod
    def for_campaign(cls, camp: Any, substrates: dict[str, Substrate]) -> HostSet:
        """From the campaign's `hosts:`, else `$HARNESS_HOME/hosts.yaml`, else this machine."""
        return cls(resolve_hosts(getattr(camp, "hosts", None)), substrates, camp)

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def substrate(self, host: str, name: str) -> Substrate:
        """The substrate `name` bound to `host` (made once)."""
        key = (host, name)
        if key not in self._bound:
            self._bound[key] = self.base[name].on_host(self.specs[host])
        return self._bound[key]

    def demand(self, t: dict[str, Any], whole: bool = False) -> Demand:
        """What placing the planned trial `t` takes on a host (`whole`: all it asks for,
        also where its substrate holds only a slot while it runs)."""
        holds = whole or self.base[t["substrate"]].holds_capacity
        config = f"{t['agent']}:{t['model']}" if t.get("model") else t["agent"]
        return Demand(t["trial_id"], t["task"], config, t["substrate"],
                      int(t["cpus"]) if holds else 0, int(t["memory_mb"]) if holds else 0,
                      float(t.get("timeout_sec") or 0))

    def check(self, todo: list[dict[str, Any]]) -> None:
        """Refuse, before anything starts, a trial no host could hold alone (the same
        check, and message, as `harness run`)."""
        self.placer.check([self.demand(t, whole=True) for t in todo])

    def runs(self, host: str, name: str) -> bool:
        sub = self.base[name]
        return self.specs[host].runs(name) and (
            not sub.engine or self.specs[host].endpoint(sub.engine) is not None)

    def preflight(self, used: list[str], log=print) -> None:
        """Bind and check every used substrate on every host. With several hosts one that
        fails is drained (reported) and the campaign runs on the others; a lone host's
        failure is the campaign's."""
        for host in self.names:
            for name in used:
                if not self.runs(host, name):
                    continue
                try:
                    self.substrate(host, name).preflight()
                except (PreflightError, InputError) as exc:
                    if len(self.specs) == 1:
                        raise
                    self.drain(host, exc.message)
                    log(f"host {host} drained: {exc.message}")
                    break

    def failing(self, host: str) -> str | None:
        """Why the host's engines do not answer (None: they do); blocking, run in a thread."""
        for (h, _), sub in list(self._bound.items()):
            if h == host:
                why = sub.reachable()
                if why:
                    return why
        return None

    def drain(self, host: str, reason: str) -> list[str]:
        """Take the host out for the rest of the campaign; the ids of its running trials."""
        if host in self.drained:
            return []
        self.drained[host] = reason
        return self.placer.drain(host)
