"""The `baremetal` substrate: trials on leased machines of a pool, with out-of-band IPMI.

A pool (`pool.py`) lists machines; a trial leases as many as its task has nodes
(`lease.py`: exclusive, across processes), runs on them over SSH with the pool's key, and
at teardown Terraform's destroy resets each machine (`reset.py`: reimage, power-cycle or
none, per pool) and releases its lease. Power goes through the machine's BMC
(`../ipmi.py`: `ipmitool`, credentials in its environment only) with the harness's own BMC
account; the primary gets the task-facing one (`accounts.py`). A machine whose BMC
refuses the harness is quarantined (`lease.py`) until `harness pool repair`. Without a
pool configured (config.yaml `substrates.baremetal.pool`), the emulated pool `emulated` is
used, made on first use (`emulate.py`: QEMU machines whose BMCs are OpenIPMI's
ipmi_sim). It runs task types `baremetal` and `cloudlab` (InfraBench's CloudLab tasks,
unmodified).

The trial directory keeps what this trial leased::

    <trial>/baremetal/machines.json   node -> machine, and the task's `host` hint of each
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from harness import owner
from harness.config import LOCAL_BASE, Settings, on_local_base
from harness.errors import InputError, PreflightError, SubstrateError
from harness.substrates import ipmi, ssh
from harness.substrates.base import Check, Node, TrialSpec
from harness.substrates.metal import accounts, emulate, lease, reset
from harness.substrates.metal.pool import Pool, load_pool, pool_names, pool_path
from harness.substrates.metal.substrate import MachineSubstrate, machine_access

HERE = Path(__file__).resolve().parent


def _task_account(pool: Pool, machine) -> dict[str, Any]:
    """What a node file says of a machine's BMC: address, port, interface, cipher suite
    (where the pool sets one) and the task-facing account (no slot number, no harness
    account)."""
    creds = pool.task_credentials(machine)
    keys = ("address", "port", "interface", "cipher_suite", "user", "password")
    return {k: creds[k] for k in keys if k in creds}


class BaremetalSettings(BaseModel):
    """`pool`: the pool trials lease from (default: the emulated pool `emulated`, made on
    first use with `emulate_nodes` machines of `emulate_memory_mb` each). `lease_wait_sec`:
    how long a trial waits for machines that other running trials hold (two campaigns on
    one pool take turns)."""

    model_config = ConfigDict(extra="forbid")
    pool: str = ""
    lease_wait_sec: int = Field(default=3600, ge=0)
    emulate_nodes: int = 3
    emulate_memory_mb: int = 512


class BaremetalSubstrate(MachineSubstrate):
    """Leased machines of a pool (real, or emulated by QEMU + ipmi_sim)."""

    name: ClassVar[str] = "baremetal"
    settings_model: ClassVar[type[BaseModel]] = BaremetalSettings

    def __init__(self, name: str | None = None, settings: Settings | None = None, **kwargs):
        super().__init__(name, settings)
        self.pool_name = self.config.pool or "emulated"
        self._pool: Pool | None = None

    # -- the pool ---------------------------------------------------------------------

    def pool(self, log=print) -> Pool:
        """The configured pool; the default emulated one is made on first use."""
        if self._pool is None:
            if not self.config.pool and not pool_path(self.pool_name).exists():
                log(f"baremetal: no pool configured; making the emulated pool "
                    f"{self.pool_name} ({self.config.emulate_nodes} machines)")
                emulate.emulate(self.pool_name, self.config.emulate_nodes,
                                self.config.emulate_memory_mb, log=log)
            self._pool = emulate.upgrade(load_pool(self.pool_name), log=log)
        return self._pool

    def terraform_module(self) -> Path:
        return HERE / "terraform"

    def prepare(self, spec: TrialSpec, log=print) -> str:
        """The pool, up (an emulated pool's BMCs and machines running)."""
        pool = self.pool(log=log)
        if pool.emulated:
            emulate.ensure_up(pool, log=log)
        return f"pool:{pool.name}"

    def _plan(self, spec: TrialSpec) -> list[dict[str, str]]:
        path = spec.root / "baremetal" / "machines.json"
        return json.loads(path.read_text()) if path.exists() else []

    def terraform_vars(self, spec: TrialSpec) -> dict[str, Any]:
        """Leases as many machines as the task has nodes (its `host` values are hints:
        a machine of that name is taken first) and records the mapping."""
        pool = self.pool()
        nodes = list(spec.task.nodes)
        hints = [getattr(n, "host", None) or "" for n in nodes]
        kinds = {getattr(n, "hardware_type", None) for n in nodes} - {None, ""}
        got = lease.acquire(pool, spec.trial_id, spec.campaign, len(nodes),
                            prefer=[h.split(".")[0] for h in hints if h]
                            + [m.name for m in pool.machines if kinds & set(m.tags)],
                            wait_sec=self.config.lease_wait_sec)
        lease.keep_alive(pool.name, spec.trial_id)
        plan = [{"node": n.name, "machine": m.name, "address": m.ssh.host, "host_hint": h}
                for n, m, h in zip(nodes, got, hints, strict=True)]
        path = spec.root / "baremetal" / "machines.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(plan, indent=2) + "\n")
        return self._vars(spec, pool, plan)

    def plan_vars(self, spec: TrialSpec) -> dict[str, Any]:
        pool = load_pool(self.pool_name) if pool_path(self.pool_name).exists() else None
        machines = pool.machines if pool else []
        plan = [{"node": n.name, "machine": m.name, "address": m.ssh.host, "host_hint": ""}
                for n, m in zip(spec.task.nodes, machines, strict=False)]
        return self._vars(spec, pool, plan)

    def _vars(self, spec: TrialSpec, pool: Pool | None, plan: list[dict]) -> dict[str, Any]:
        return {"trial_id": spec.trial_id, "campaign": spec.campaign, "owner": owner.tag(),
                "pool": pool.name if pool else self.pool_name, "python": sys.executable,
                "machines": [{k: p[k] for k in ("node", "machine", "address")} for p in plan]}

    def nodes(self, spec: TrialSpec, tf_outputs: dict[str, Any]) -> list[Node]:
        pool = self.pool()
        plan = self._plan(spec)
        primary = spec.task.primary.name
        out = []
        for p in plan:
            m = pool.machine(p["machine"])
            # `bmc`: the task-facing account (what the primary is given); the harness's own
            # is read from the pool when it is needed (`power`), never kept on a node
            out.append(Node(name=p["node"], host=m.ssh.host, cluster_ip=m.ssh.host,
                            primary=p["node"] == primary,
                            extra={**machine_access(m), "machine": m.name,
                                   "pool": pool.name, "domain": m.domain or "",
                                   "bmc": _task_account(pool, m) if m.bmc else None}))
        return out

    def image_warnings(self, task) -> list[str]:
        """An emulated pool's machines run the Debian 12 image whatever `base_image` (or a
        node's CloudLab `image`) says."""
        if not pool_path(self.pool_name).exists() or not self.pool().emulated:
            return []
        images = sorted({n.image for n in task.nodes if getattr(n, "image", None)})
        notes = [f"node image {i!r}: the emulated pool's machines run {LOCAL_BASE}"
                 for i in images]
        ref = task.base_image
        if not ref:
            return notes
        note = self.settings.mapping_note(ref)
        return notes + ([note] if note else [] if on_local_base(self.settings.map_image(ref))
                        else [f"base image {ref!r}: the emulated pool's machines run "
                              f"{LOCAL_BASE}"])

    def secrets(self, spec: TrialSpec) -> list[str]:
        return self.pool().secrets()

    # -- runtime ----------------------------------------------------------------------

    async def check_bmcs(self, nodes: list[Node]) -> None:
        """Each node's BMC accepts the harness account; one that refuses it is quarantined
        (SubstrateError naming it and `harness pool repair`)."""
        await asyncio.gather(*(self._bmc_accepts_harness(n) for n in nodes))

    async def _bmc_accepts_harness(self, node: Node) -> None:
        pool_name = node.extra.get("pool") or self.pool_name
        pool = self.pool() if pool_name == self.pool_name else load_pool(pool_name)
        m = pool.machine(node.extra.get("machine", node.name))
        if m.bmc is None:
            return
        try:
            await asyncio.to_thread(accounts.check, pool.bmc_credentials(m))
        except ipmi.BmcRefused as exc:
            holder = lease.read(pool.name).get(m.name, {}).get("trial")
            record = lease.quarantine(pool.name, m.name, str(exc).removeprefix(
                "baremetal: "), holder)
            raise SubstrateError(self.name, f"machine {m.name} of pool {pool.name} is "
                                 f"quarantined: {record['reason']} (`{record['repair']}` "
                                 "brings it back)") from None

    async def power(self, node: Node, action: str) -> str:
        """Through the machine's BMC (IPMI), with the harness's own account (read from the
        pool file: a node carries the task-facing one only)."""
        machine = node.extra.get("machine", node.name)
        pool_name = node.extra.get("pool") or self.pool_name
        pool = self.pool() if pool_name == self.pool_name else load_pool(pool_name)
        m = pool.machine(machine)
        creds = pool.bmc_credentials(m) if m.bmc else None
        if not creds:
            raise SubstrateError(self.name, f"machine {machine} has no BMC")
        if action != "status":  # (a status asks nothing of the node's connection)
            ssh.close_master(node.host, Path(node.extra["ssh_key"]))
        return await asyncio.to_thread(ipmi.power, creds, action)

    # -- gc ---------------------------------------------------------------------------

    def _stale(self, campaign: str | None, trial: str | None, force: bool):
        for name in pool_names():
            for machine, record in lease.stale(name, trial, force).items():
                if campaign is None or record.get("campaign") == campaign:
                    yield name, machine, record

    def leftovers(self, campaign: str | None = None, trial: str | None = None,
                  force: bool = False) -> list[str]:
        return [f"lease {p}/{m} (trial {r.get('trial')})"
                for p, m, r in self._stale(campaign, trial, force)]

    def live_nodes(self, campaign: str | None = None, trial: str | None = None,
                   force: bool = False) -> dict[str, list[Node]]:
        """The machines of stale leases (gc heals their faults before resetting them)."""
        out: dict[str, list[Node]] = {}
        for p, m, r in self._stale(campaign, trial, force):
            machine = load_pool(p).machine(m)
            out.setdefault(r.get("trial", "?"), []).append(Node(
                name=m, host=machine.ssh.host, cluster_ip=machine.ssh.host,
                extra={**machine_access(machine), "machine": m, "pool": p}))
        return out

    def sweep(self, campaign: str | None = None, trial: str | None = None,
              force: bool = False) -> list[str]:
        """Stale leases: reset the machine, then release the lease (kept if the reset fails)."""
        done = []
        for p, m, r in list(self._stale(campaign, trial, force)):
            try:
                how = reset.reset_or_quarantine(load_pool(p), m, r.get("trial"))
            except (SubstrateError, InputError) as exc:
                done.append(f"lease {p}/{m} (trial {r.get('trial')}; reset failed: {exc})")
                continue
            lease.release(p, r.get("trial", ""), [m])
            done.append(f"lease {p}/{m} (trial {r.get('trial')}; {how})")
        if trial is not None:  # what the trial's own teardown quarantined
            reported = {d.split(" ", 2)[1] for d in done}
            done += [f"machine {p}/{m} quarantined ({q.get('reason')}; `{q.get('repair')}`)"
                     for p in pool_names() for m, q in lease.quarantined(p).items()
                     if q.get("trial") == trial and f"{p}/{m}" not in reported]
        return done

    # -- host -------------------------------------------------------------------------

    def preflight(self) -> None:
        if shutil.which("ipmitool") is None:
            raise PreflightError("baremetal needs ipmitool on PATH: run scripts/setup.sh")
        if self.config.pool and not pool_path(self.config.pool).exists():
            raise PreflightError(f"substrates.baremetal.pool = {self.config.pool!r}, but "
                                 f"{pool_path(self.config.pool)} does not exist")

    @classmethod
    def doctor(cls) -> list[Check]:
        checks = [Check("ipmi_sim (emulated BMCs)", "PASS" if shutil.which("ipmi_sim")
                        else "WARN", shutil.which("ipmi_sim") or "missing",
                        "" if shutil.which("ipmi_sim") else "scripts/setup.sh (openipmi)")]
        for name in pool_names():
            try:
                pool = load_pool(name)
            except InputError as exc:
                checks.append(Check(f"pool {name}", "FAIL", str(exc), "fix the pool file"))
                continue
            held = lease.quarantined(name)
            for m in pool.machines:
                if m.bmc is None:
                    continue
                if m.name in held:
                    checks.append(Check(f"pool {name}: {m.name} BMC", "FAIL", "quarantined: "
                                        f"{held[m.name].get('reason')}",
                                        f"harness pool repair {name} {m.name}"))
                    continue
                if not pool.has_harness_account(m):
                    checks.append(Check(
                        f"pool {name}: {m.name} BMC account", "WARN", "the harness uses the "
                        "task-facing account: a task that changes its password in-band locks "
                        "the harness out", "give the harness its own (bmc.harness: user_id, "
                        "user, password) in the pool file"))
                try:
                    state = ipmi.power(pool.bmc_credentials(m), "status")
                    checks.append(Check(f"pool {name}: {m.name} BMC", "PASS",
                                        f"{m.bmc.address}:{m.bmc.port} answers (power {state})"))
                except (SubstrateError, InputError) as exc:
                    checks.append(Check(f"pool {name}: {m.name} BMC", "FAIL", str(exc),
                                        f"harness pool repair {name} {m.name}" if pool.emulated
                                        else "check the BMC address and credentials"))
        return checks
