"""One trial, in order: provision, setup + bootstrap (one Ansible run), agent_setup and the
integrity baseline (the pre-window phases: a failure there is retried, kept under
`retries/<n>/` and never scored), the agent window (the task's scenario beside it), the
immediate gate (the verifier: the trial's reward and status), the task's other lifecycle
gates, heal, teardown. Each phase is timed (`timings`) and logged to `events.jsonl`.

A failure is a record, not a crash: one catch-all turns any exception into `result.json`
(`HarnessCrash`), and teardown always runs; only cancellation propagates (after the
teardown, with status `cancelled`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from harness import __version__, owner
from harness.agents import Agent, AgentContext
from harness.errors import AnsibleError, HarnessError, InputError, ResourceBusy
from harness.gateway.wiring import GatewayPlan, TrialGateway
from harness.paths import TrialPaths
from harness.redact import Redactor
from harness.results import (
    TrialRecord,
    agent_ref,
    build_record,
    now_iso,
    task_ref,
    write_json_atomic,
)
from harness.substrates.base import Breach, ResourceWatch, Substrate, TrialSpec
from harness.task import Task
from harness.tools.ansible import (
    StartBarrier,
    prepare_skip_tags,
    run_playbook,
    task_extravars,
    write_inventory,
)
from harness.tools.terraform import (
    TrialTerraform,
    render_root,
    required_providers,
    warm_shared_providers,
    write_root,
)

if TYPE_CHECKING:
    from harness.faults.session import FaultSession
    from harness.trial.environment import TrialEnvironment
    from harness.trial.verifier import GateResult

BUSY_POLL_SEC = 2.0
_EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="hx-trial")

# What a trial needs only once its nodes exist. These modules are imported (functions
# import them where used) while the first `terraform apply` runs, when the process only
# waits, rather than before it: `harness run` reaches Terraform sooner.
AFTER_APPLY = ("harness.trial.environment", "harness.trial.integrity", "harness.trial.capture",
               "harness.trial.scenario", "harness.trial.verifier", "harness.trial.gates",
               "harness.faults.session", "harness.gateway.atif", "harness.risk",
               "harness.trajectory")
_after_apply_lock = threading.Lock()
_after_apply: threading.Thread | None = None


def import_after_apply() -> None:
    """Start importing AFTER_APPLY in a background thread (once per process). A module
    that fails to import there says why where it is used."""
    global _after_apply

    def run() -> None:
        for module in AFTER_APPLY:
            with contextlib.suppress(Exception):
                importlib.import_module(module)

    with _after_apply_lock:
        if _after_apply is None:
            _after_apply = threading.Thread(target=run, name="hx-after-apply", daemon=True)
            _after_apply.start()


def after_apply_imported() -> None:
    """Wait for import_after_apply's thread: no module is then imported by two threads at
    once (an import error, if any, is raised where the module is used)."""
    with _after_apply_lock:
        thread = _after_apply
    if thread is not None:
        thread.join()


def run_async(coro):
    """asyncio.run with a default executor wide enough for many concurrent trials (a fresh
    one per call: asyncio.run shuts its default executor down; `_EXECUTOR`, which trials
    use for their blocking work, is never handed to it)."""

    async def main():
        asyncio.get_running_loop().set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="hx-io"))
        return await coro

    return asyncio.run(main())


@dataclass
class EarlyPrepare:
    """The setup+bootstrap playbook started while Terraform creates the nodes, waiting at
    its gate (for the inventory it was started with)."""

    inventory: dict
    barrier: StartBarrier
    future: asyncio.Future

    def abort(self) -> None:
        """End it unrun; teardown's `_settle` waits for its thread."""
        self.barrier.abort()


class ResourceExceeded(Exception):
    """The resource watch found a node past its limit while a phase ran (that phase was
    ended)."""

    def __init__(self, breach: Breach):
        super().__init__(breach.message)
        self.breach = breach


class PreWindowError(Exception):
    """A failure before the agent window opened (retried, never scored)."""

    def __init__(self, phase: str, cause: BaseException):
        super().__init__(f"{phase}: {cause}")
        self.phase, self.cause = phase, cause


@dataclass
class Trial:
    """One attempt of one agent on one task in a fresh environment."""

    task: Task
    agent: Agent
    substrate: Substrate
    root: Path
    trial_id: str
    campaign: str = "adhoc"
    attempt: int = 1
    retries: int = 0
    keep: bool = False
    timeout_multiplier: float = 1.0
    secrets: dict[str, str] = field(default_factory=dict)
    extra_secrets: list[str] = field(default_factory=list)
    fingerprint: str | None = None
    on_phase: Callable[[str, str], None] = lambda trial_id, phase: None
    host: str | None = None
    gateway: GatewayPlan | None = None

    @property
    def window_sec(self) -> float:
        """The agent's window: the task's timeout times the campaign's multiplier."""
        return self.task.config.agent.timeout_sec * self.timeout_multiplier

    def __post_init__(self):
        self.paths = TrialPaths(self.root).make()
        # every secret of this trial: the agent's keys, what the substrate made (BMC
        # passwords), what agents add at setup; shared with the environment
        self.secret_values: list[str] = [v for v in [*self.secrets.values(),
                                                     *self.extra_secrets] if v]
        if self.gateway is not None:  # the upstream's key: redacted like every secret
            self.secret_values += [v for v in self.gateway.secrets if v]
        self._gateway: TrialGateway | None = None
        self._gateway_env: dict[str, str] | None = None
        self.spec = TrialSpec(self.trial_id, self.campaign, self.task, self.root,
                              agent_memory_mb=self.agent.node_memory_mb,
                              agent_timeout_sec=self.window_sec,
                              agent_files=self.agent.node_files())
        self.timings: dict[str, dict] = {}
        self.warnings: list[str] = []
        self.images: dict[str, str] = {}
        self.env: TrialEnvironment | None = None
        self._pending: list[concurrent.futures.Future] = []
        self._early: EarlyPrepare | None = None
        self.tf = TrialTerraform(self.paths)
        self._watch: ResourceWatch | None = None
        self._watching: asyncio.Task | None = None
        self._guarded_phase = "agent"

    def _blocking(self, fn, *args, **kwargs):
        """Run blocking work (terraform, ansible, SDK calls) in a thread, remembered so that
        teardown can wait for it: a cancelled await does not stop the thread."""
        cf = _EXECUTOR.submit(fn, *args, **kwargs)
        self._pending.append(cf)
        return asyncio.wrap_future(cf)

    async def _settle(self, timeout: float = 600) -> None:
        """Wait for blocking work still running (e.g. an apply interrupted by Ctrl-C)."""
        running = [f for f in self._pending if not f.done()]
        if running:
            self.event("teardown.waiting", n=len(running))
            await asyncio.to_thread(concurrent.futures.wait, running, timeout)
        self._pending.clear()

    @property
    def redactor(self) -> Redactor:
        key = tuple(self.secret_values)
        if getattr(self, "_redactor_key", None) != key:
            self._redactor, self._redactor_key = Redactor(key), key
        return self._redactor

    def event(self, name: str, **data) -> None:
        rec = {"ts": now_iso(), "elapsed_sec": round(time.monotonic() - self._t0, 3),
               "name": name, "data": self.redactor.obj(data)}
        with self.paths.events.open("a") as fh:
            fh.write(json.dumps(rec, default=str) + "\n")

    async def _phase(self, name: str, coro):
        self.on_phase(self.trial_id, name)
        start, t = now_iso(), time.monotonic()
        self.event(f"phase.{name}.start")
        try:
            return await coro
        finally:
            secs = round(time.monotonic() - t, 3)
            self.timings[name] = {"start": start, "end": now_iso(), "seconds": secs}
            self.event(f"phase.{name}.end", seconds=secs)

    def _write_trial_json(self) -> None:
        write_json_atomic(self.paths.trial_json, {
            "trial_id": self.trial_id, "campaign": self.campaign, "attempt": self.attempt,
            "task": {"name": self.task.name, "path": str(self.task.path),
                     "sha256": self.task.sha256},
            "agent": {"name": self.agent.name, "model": self.agent.model},
            "substrate": self.substrate.name, "host": self.host, "created_at": now_iso(),
            "harness_version": __version__})

    async def _terraform_vars(self) -> dict:
        """The substrate's Terraform variables; while what it needs is held by other running
        trials (ResourceBusy), ask again every few seconds, for as long as it says."""
        loop = asyncio.get_running_loop()
        start, said = loop.time(), False
        while True:
            try:
                return await self._blocking(self.substrate.terraform_vars, self.spec)
            except ResourceBusy as exc:
                if loop.time() - start >= exc.wait_sec:
                    raise ResourceBusy(f"{exc.message} (waited {exc.wait_sec:.0f}s)",
                                       exc.wait_sec) from None
                if not said:
                    said = True
                    self.event("provision.waiting", reason=exc.message)
                await asyncio.sleep(BUSY_POLL_SEC)

    async def _provision(self) -> None:
        warm_shared_providers(required_providers(self.substrate.providers),
                              self.substrate.provider_config())
        image = await self._blocking(self.substrate.prepare, self.spec, lambda m: None)
        for note in self.substrate.image_warnings(self.task):
            self.warnings.append(note)
            self.event("image.mapped", warning=note)
        self.images = self.substrate.image_mappings(self.task)
        self.spec = TrialSpec(self.trial_id, self.campaign, self.task, self.root, image,
                              agent_memory_mb=self.agent.node_memory_mb,
                              agent_timeout_sec=self.window_sec,
                              agent_files=self.agent.node_files())
        tf_vars = await self._terraform_vars()
        self.secret_values.extend(v for v in self.substrate.secrets(self.spec)
                                  if v and v not in self.secret_values)
        write_root(self.paths, render_root(self.substrate.terraform_module(),
                                           self.paths.terraform, tf_vars,
                                           required_providers(self.substrate.providers),
                                           self.substrate.provider_config()))
        early = self._start_prepare_early(tf_vars)
        try:
            try:
                outputs = await self._blocking(self.tf.apply, started=self._applying)
            finally:
                after_apply_imported()
            nodes = self.substrate.nodes(self.spec, outputs)
            await self.substrate.wait_ready(nodes)
            inventory = self.substrate.inventory(self.spec, nodes)
            if early is not None and early.inventory != inventory:
                self.event("prepare.early_mismatch")
                early.abort()
                early = None
            write_inventory(self.paths, inventory)
        except BaseException:
            if early is not None:
                early.abort()
            raise
        self._early = early
        from harness.trial.environment import TrialEnvironment

        self.env = TrialEnvironment(self.substrate, nodes, self.paths,
                                    secrets=self.secret_values,
                                    on_record=self._live_risk)

    def _applying(self) -> None:
        """`terraform apply` has started: the substrate's head start, and the imports the
        steps after apply need."""
        import_after_apply()
        self.substrate.applying()

    def _start_prepare_early(self, tf_vars: dict) -> EarlyPrepare | None:
        """Where the inventory is known before apply (the substrate's `planned_outputs`),
        start the setup+bootstrap playbook now: ansible-playbook's start-up
        (~0.6 s) overlaps Terraform's apply, and it waits at its gate, before any play, until
        the nodes exist (HARNESS_EARLY_ANSIBLE=0 turns this off)."""
        if os.environ.get("HARNESS_EARLY_ANSIBLE", "1") == "0":
            return None
        try:
            planned = self.substrate.planned_outputs(tf_vars)
            if planned is None:
                return None
            inventory = self.substrate.inventory(self.spec,
                                                 self.substrate.nodes(self.spec, planned))
        except Exception:  # cannot predict: run it after apply
            return None
        write_inventory(self.paths, inventory)
        barrier = StartBarrier(self.paths.ansible("prepare") / "gate")
        future = self._blocking(run_playbook, self.paths, "prepare", ["setup", "bootstrap"],
                                task_extravars(self.task, self.paths), self.task.path,
                                barrier=barrier, skip_tags=prepare_skip_tags(self.task))
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # seen or not
        return EarlyPrepare(inventory, barrier, future)

    async def _setup_and_bootstrap(self) -> None:
        """The tagged setup and bootstrap plays in one ansible run (one start-up cost, and
        that started during provision where it can be); the run's play start times split it
        into the two phases' timings, which start when the run may begin its plays."""
        extra = task_extravars(self.task, self.paths)
        for phase in ("setup", "bootstrap"):
            self.on_phase(self.trial_id, phase)
        early, self._early = self._early, None
        start, t = now_iso(), time.monotonic()
        try:
            if early is not None:
                early.barrier.open()
                plays = await early.future
            else:
                plays = await self._blocking(run_playbook, self.paths, "prepare",
                                             ["setup", "bootstrap"], extra, self.task.path,
                                             skip_tags=prepare_skip_tags(self.task))
            failed_play = None
        except AnsibleError as exc:
            plays, failed_play = [], exc
        end, secs = now_iso(), time.monotonic() - t
        split = next((ts for name, ts in plays if name.startswith("Bootstrap")), None)
        if split:
            s_secs = (datetime.fromisoformat(split) - datetime.fromisoformat(start)).total_seconds()
            s_secs = min(max(s_secs, 0.0), secs)
            self.timings["setup"] = {"start": start, "end": split, "seconds": round(s_secs, 3)}
            self.timings["bootstrap"] = {"start": split, "end": end,
                                         "seconds": round(secs - s_secs, 3)}
        else:
            self.timings["setup"] = {"start": start, "end": end, "seconds": round(secs, 3)}
        self.event("phase.setup+bootstrap.end", seconds=round(secs, 3))
        if failed_play is not None:
            phase = "bootstrap" if getattr(failed_play, "play", "").startswith("Bootstrap") \
                else "setup"
            raise PreWindowError(phase, failed_play)

    async def _egress(self, phase: str) -> None:
        """The task's network policy for `phase` (`Task.network_policy`), when any phase of
        the task has egress (else the trial network stays internal)."""
        if not self.task.needs_egress:
            return
        policy = self.task.network_policy(phase)
        nodes = self.env.nodes if self.env is not None else []
        pins = await self.substrate.set_egress(self.trial_id, nodes, policy)
        self.event("network.egress", phase=phase, mode=policy.mode, pinned=pins)
        unresolved = [host for host, addrs in pins.items() if not addrs]
        if unresolved and nodes:  # (before provisioning the names are resolved again)
            note = (f"{phase}: allowed host(s) {', '.join(unresolved)} did not resolve on this "
                    "host when the phase started; the nodes cannot reach them")
            if note not in self.warnings:
                self.warnings.append(note)

    async def _agent_setup(self) -> None:
        """The agent's set-up, within the task's `agent.setup_timeout_sec` when it sets one."""
        limit = self.task.config.agent.setup_timeout_sec
        try:
            await asyncio.wait_for(self.agent.setup(self.env), limit)
        except TimeoutError:
            if limit is None:
                raise
            raise TimeoutError(f"the agent's set-up took longer than agent.setup_timeout_sec "
                               f"= {limit:g} s (task.toml)") from None

    async def _open_gateway(self) -> None:
        """Mint the trial's gateway grant and open the way to it (with a gateway plan):
        the agent gets base URLs and the token instead of any key."""
        if self.gateway is None:
            return
        self._gateway = TrialGateway(self.gateway, self.trial_id, self.substrate,
                                     self.paths.llm, lambda text: self.redactor.text(text),
                                     self.event)
        self._gateway_env = await self._gateway.open(self.env.nodes)
        self.secret_values.append(self._gateway_env["HARNESS_GATEWAY_TOKEN"])
        if not self._gateway.reaches_nodes:
            note = ("the model gateway listens on this machine's loopback only (the trial's "
                    "nodes cannot reach this machine): agents inside the environment cannot "
                    "call it")
            if note not in self.warnings:
                self.warnings.append(note)

    async def _close_gateway(self) -> None:
        gateway, self._gateway, self._gateway_env = self._gateway, None, None
        if gateway is not None:
            await gateway.close()

    async def _pre_window(self) -> None:
        try:
            await self._egress("environment")
            await self._phase("provision", self._provision())
            if self.task.needs_egress and \
                    self.task.network_policy("environment").mode == "allowlist":
                await self._egress("environment")  # now the nodes exist: pin the names
        except Exception as exc:  # any failure before the window is pre-window
            raise PreWindowError("provision", exc) from exc
        await self._setup_and_bootstrap()
        try:
            await self._egress("agent_setup")
            await self._phase("agent_setup", self._agent_setup())
            await self._open_gateway()
        except Exception as exc:
            raise PreWindowError("agent_setup", exc) from exc
        try:
            from harness.trial import integrity

            off = await integrity.baseline(self.env)
        except Exception as exc:
            raise PreWindowError("integrity_baseline", exc) from exc
        if off:
            self.event("integrity.powered_off", nodes=off, when="baseline")
        await self._watch_baseline()

    async def _watch_baseline(self) -> None:
        """The substrate's resource watch (`Substrate.resource_watch`), measured once before
        the window opens: a node already past its limit is the set-up's doing."""
        try:
            self._watch = self.substrate.resource_watch(self.spec, self.env.nodes)
            breach = await asyncio.to_thread(self._watch.check) if self._watch else None
        except Exception as exc:
            raise PreWindowError("resource_watch", exc) from exc
        for note in self._watch.notes if self._watch else []:
            if note not in self.warnings:
                self.warnings.append(note)
        if breach is not None:
            raise PreWindowError("resource_watch", InputError(
                f"{breach.message}, before the agent window opened (after setup, bootstrap "
                "and the agent's set-up): the task's limits are too small for them"))

    def _start_watch(self) -> None:
        """Run the watch beside the window, the verifier and the gates (`_guarded`); a
        failing watch is an event and a warning, never the end of the trial."""
        if self._watch is None:
            return

        async def run() -> Breach | None:
            try:
                return await self._watch.watch(self.event)
            except Exception as exc:
                self.event("resource_watch.failed", error=f"{type(exc).__name__}: {exc}"[:500])
                self.warnings.append(f"resource limits were not watched after "
                                     f"{type(exc).__name__}: {str(exc)[:200]}")
                return None

        self._watching = asyncio.create_task(run())

    async def _stop_watch(self) -> None:
        task, self._watching = self._watching, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _guarded(self, coro):
        """Await `coro`, unless the resource watch reports a breach first: then `coro` is
        cancelled and ResourceExceeded raised."""
        watch = self._watching
        if watch is None:
            return await coro
        work = asyncio.ensure_future(coro)
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # interrupted: `coro` ends (and cleans up) first
            work.cancel()
            with contextlib.suppress(BaseException):
                await work
            raise
        if watch.done() and not watch.cancelled() and watch.result() is not None:
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await work
            raise ResourceExceeded(watch.result())
        return await work

    async def run(self) -> TrialRecord:
        """Run the trial to a record; tear down unless kept; re-raise only cancellation."""
        self._t0 = time.monotonic()
        started = now_iso()
        try:
            owner.hold_trial(self.trial_id)  # gc spares the trial while this process runs it
        except BlockingIOError:
            raise InputError(f"trial {self.trial_id} is being run by another harness process; "
                             "two runs of one trial id cannot share its resources") from None
        self._write_trial_json()
        record = self.record("setup_error", started)
        retry_log: list[dict] = []
        try:
            for n in range(self.retries + 1):
                try:
                    await self._pre_window()
                    break
                except PreWindowError as exc:
                    err = {"type": type(exc.cause).__name__, "message": str(exc.cause)[:2000]}
                    retry_log.append({"attempt": n + 1, "phase": exc.phase, "error": err})
                    self.event("pre_window.failed", phase=exc.phase, error=err)
                    await self._teardown_quietly()
                    if n < self.retries:
                        self._archive_retry(n + 1)
                    else:
                        record = self.record("setup_error", started, error={
                            **err, "phase": exc.phase})
            if record.error is None:
                self._window_opened = True
                record = await self._window_and_gates(started)
        except asyncio.CancelledError:
            record = self.record("cancelled", started,
                                  error={"type": "Cancelled", "message": "interrupted"})
            await asyncio.shield(self._finish(record, retry_log))
            raise
        except Exception as exc:  # the catch-all: a harness bug never leaks a trial
            record = self._crash_record(started, exc)
        try:
            await self._finish(record, retry_log)
        except Exception as exc:  # teardown or writing failed: still leave a record
            record = self._crash_record(started, exc)
            record.retries = retry_log
            record.write(self.paths.result, self.redactor)
            owner.release_trial(self.trial_id)
        return record

    def _crash_record(self, started: str, exc: BaseException) -> TrialRecord:
        """An unexpected exception as a record: scored as an agent error once the window
        opened, else a setup error; the error says it was the harness's (`HarnessCrash`)."""
        import traceback

        status = "agent_error" if getattr(self, "_window_opened", False) else "setup_error"
        where = "".join(traceback.format_exception(exc)[-3:])[-1500:]
        self.event("trial.crashed", error=f"{type(exc).__name__}: {exc}"[:1000], where=where)
        return self.record(status, started, error={
            "type": "HarnessCrash", "message": f"{type(exc).__name__}: {exc}"[:2000],
            "where": where})

    async def _window_and_gates(self, started: str) -> TrialRecord:
        """The agent window with the task's scenario beside it, the immediate gate, then the
        task's other gates (live, durability, decommission: `result.json` `gates`; the
        trial's `reward` and `status` stay the immediate gate's); heal_all before teardown."""
        from harness.faults.session import FaultSession, cancel_on_sigterm, trial_seed
        from harness.trial.scenario import ScenarioAPI, load_scenario, run_window

        ctx = AgentContext(self.trial_id, self.task, self.spec.window_sec,
                           env_vars=dict(self._gateway_env or self.secrets))
        status, error = None, None
        faults = FaultSession(self.env, self.event, trial_seed(self.trial_id),
                              deadman_sec=int(ctx.timeout_sec) + 900)
        try:
            scenario = load_scenario(self.task)
        except HarnessError as exc:
            return self.record("setup_error", started,
                                error={"type": type(exc).__name__, "message": exc.message})
        if scenario is not None and scenario.seed is not None:
            faults.rng.seed(scenario.seed)
        api = ScenarioAPI(self.env, self.task, faults, self.event) if scenario else None
        uninstall = cancel_on_sigterm()
        self._start_watch()
        breach: tuple[str, Breach] | None = None
        try:
            try:
                await self._egress("agent")
                outcome = await self._phase("agent", self._guarded(run_window(
                    self.agent.run(self.task.instruction, self.env, ctx), ctx.timeout_sec + 30,
                    scenario, api)))
            except ResourceExceeded as exc:
                outcome, breach = None, ("agent", exc.breach)
            except TimeoutError:
                outcome, status = None, "agent_timeout"
            except HarnessError as exc:
                outcome, status = None, "agent_error"
                error = {"type": type(exc).__name__, "message": exc.message}
            except Exception as exc:
                outcome, status = None, "agent_error"
                error = {"type": type(exc).__name__, "message": str(exc)[:2000]}
            if outcome is not None:
                if outcome.timed_out:
                    status = "agent_timeout"
                elif outcome.error:
                    status, error = "agent_error", {"type": "AgentError", "message": outcome.error}
            self.event("agent.end", status="resource_exceeded" if breach else status)
            if self._gateway is not None:
                await self._gateway.revoke()
            await self._capture()
            self.paths.trajectory.touch()
            risk = await asyncio.to_thread(self._risk_and_atif, outcome)
            if breach is None:
                try:
                    rec = await self._verify_and_gates(started, status, error, faults,
                                                       scenario, api)
                except ResourceExceeded as exc:
                    breach = (self._guarded_phase, exc.breach)
            if breach is not None:
                rec = self._exceeded_record(started, *breach)
            rec.risk = risk
            if outcome is not None:
                rec.tokens, rec.cost_usd = outcome.tokens, outcome.cost_usd
            if self._gateway is not None:
                self._gateway.apply(rec)
            return rec
        finally:
            uninstall()
            await self._stop_watch()
            if faults.ledger.path.exists():
                await asyncio.shield(self._phase("heal", faults.heal_all()))

    def _exceeded_record(self, started: str, phase: str, breach: Breach) -> TrialRecord:
        """A node went past a watched limit during `phase`: reward 0, not verified."""
        self.event("trial.resource_exceeded", phase=phase, node=breach.node, **breach.data)
        rec = self.record("resource_exceeded", started, error={
            "type": "ResourceExceeded", "message": breach.message, "phase": phase,
            "node": breach.node, **breach.data})
        rec.reward = 0.0
        return rec

    async def _verify_and_gates(self, started: str, status: str | None, error: dict | None,
                                faults: FaultSession, scenario, api) -> TrialRecord:
        """The immediate gate (the verifier), then the task's other gates, each guarded by
        the resource watch (ResourceExceeded; `_guarded_phase` says which ran)."""
        from harness.trial.gates import GateContext, gates_for, run_gates
        from harness.trial.verifier import run_verifier

        self._guarded_phase = "verify"
        await self._egress("verifier")
        gate: GateResult = await self._phase("verify", self._guarded(run_verifier(
            self.env, self.task, self.paths.verifier("immediate"))))
        self._integrity_events(gate)
        self.event("verifier.result", reward=gate.reward, error=gate.error)
        if gate.tampered:
            status, error = "tampered", {
                "type": "Tampering", "message": "; ".join(
                    f"{n}: {', '.join(lines[:5])}" for n, lines in gate.tampered.items())}
        elif gate.uncovered:
            status, error = "uncovered", gate.error
        elif gate.error:
            status, error = "verifier_error", gate.error
        elif status is None:
            status = "passed" if (gate.reward or 0.0) >= 1.0 - 1e-9 else "failed"
            error = gate.note if status == "failed" else None
        rec = self.record(status, started, error=error, gate=gate)
        if api is not None and api.error and rec.error is None:
            rec.error = {"type": "ScenarioError", "message": api.error[:2000]}
        if not gate.uncovered and not gate.tampered and gates_for(self.task):
            self._guarded_phase = "gates"
            rec.gates.update(await self._phase("gates", self._guarded(run_gates(
                GateContext(self.env, self.task, faults, self.event,
                            scenario.probe if scenario else None)))))
        return rec

    def _integrity_events(self, gate: GateResult) -> None:
        for node, killed in gate.killed.items():
            self.event("verifier.leftovers_killed", node=node, processes=killed)
        for node, lines in gate.tampered.items():
            self.event("verifier.tampering", node=node, evidence=lines)
        if gate.powered_off:
            self.event("integrity.powered_off", nodes=gate.powered_off, when=gate.gate)

    def _live_risk(self, index: int, rec) -> None:
        """Classify each command as the agent runs it; findings go to events.jsonl now
        (risk.json is written from the whole trajectory after the window)."""
        if rec.source == "oracle":
            return
        from harness.risk import scan

        for f in scan([rec], services=self.task.config.metadata.services or None):
            self.event("risk.finding", index=index, node=rec.node, type=f.type,
                       severity=f.severity, cmd=rec.cmd, live=True)

    async def _capture(self) -> None:
        """Append the commands the agent's own processes ran (the nodes' command logger)."""
        window = self.timings.get("agent")
        if not window or self.env is None:
            return
        from harness.trial.capture import capture_window

        try:
            captured = await capture_window(self.env, window["start"], window["end"])
            self.event("capture.commands", n=len(captured))
        except Exception as exc:  # capture is evidence; it must never lose the trial
            self.event("capture.failed", error=str(exc)[:500])

    def _risk_and_atif(self, outcome) -> dict[str, int]:
        """Classify the window's commands (risk.json) and export the ATIF trajectory."""
        from harness.gateway.atif import with_llm_steps, with_session
        from harness.risk import write_report
        from harness.trajectory import read_trajectory, to_atif, write_atif

        report = write_report(self.paths.root,
                              services=self.task.config.metadata.services or None)
        if self.env is not None:
            self.env.n_commands = report["n_commands"]
        self.event("risk.report", counts=report["counts"], n_commands=report["n_commands"])
        records = read_trajectory(self.paths.trajectory) if self.paths.trajectory.exists() \
            else []
        metrics = {"total_prompt_tokens": outcome.tokens.get("input"),
                   "total_completion_tokens": outcome.tokens.get("output"),
                   "total_cost_usd": outcome.cost_usd} if outcome else None
        doc = with_llm_steps(to_atif(
            records, trial_id=self.trial_id, agent_name=self.agent.name, model=self.agent.model,
            instruction=self.task.instruction, agent_version=self.agent.version,
            final_metrics=metrics), self.paths.llm)
        try:
            session = self.agent.session(self.paths.agent)
        except (OSError, ValueError) as exc:  # the agent's own log is evidence, not a must
            self.event("atif.session_unreadable", error=str(exc)[:500])
            session = None
        write_atif(self.paths.atif, with_session(doc, session))
        return report["counts"]

    def record_cancelled(self, message: str) -> None:
        """Write a `cancelled` result for this trial when it cannot finish its own."""
        rec = self.record("cancelled", error={"type": "Cancelled", "message": message})
        rec.timings, rec.fingerprint, rec.finished_at = self.timings, self.fingerprint, now_iso()
        rec.write(self.paths.result, self.redactor)

    def record(self, status: str, started: str | None = None, error: dict | None = None,
               gate: GateResult | None = None) -> TrialRecord:
        """This trial's record with `status` (its gate's reward and checks when given)."""
        return build_record(
            self.trial_id, self.campaign, self.attempt, self.substrate.name, status,
            task_ref(self.task), agent_ref(self.agent),
            reward=gate.reward if gate else None,
            metrics=dict(gate.metrics) if gate else {},
            gates={gate.gate: gate.to_dict()} if gate else {},
            checks=gate.checks if gate else [], error=error, started_at=started,
            host=self.host, warnings=list(self.warnings), images=dict(self.images))

    async def _finish(self, record: TrialRecord, retry_log: list[dict]) -> None:
        record.retries = retry_log
        record.n_commands = self.env.n_commands if self.env else 0
        if self.keep and self.env is not None:
            self._write_keep_info()
        else:
            record.leaks = await self._phase("teardown", self._teardown())
        record.timings = self.timings
        record.fingerprint = self.fingerprint
        record.finished_at = now_iso()
        self.event("trial.end", status=record.status, reward=record.reward)
        record.write(self.paths.result, self.redactor)
        # the last pass: whatever a tool wrote (ansible artifacts, logs), no secret stays
        scrubbed = await asyncio.to_thread(self.redactor.scrub_tree, self.paths.root)
        if scrubbed:
            self.event("trial.redacted", files=scrubbed[:50])
        owner.release_trial(self.trial_id)  # torn down, or kept: nobody's any more

    async def _teardown(self) -> list[str]:
        """terraform destroy, then sweep what still carries the trial's label: the leaks."""
        await self._close_gateway()
        await self._settle()
        try:
            await asyncio.to_thread(self.tf.destroy)
        except HarnessError as exc:
            self.event("teardown.destroy_failed", error=str(exc))
        # what destroy left, removed now (one listing: sweep returns what it found)
        leaks = await asyncio.to_thread(self.substrate.sweep, None, self.trial_id)
        if leaks:
            self.event("teardown.leaks", leaks=leaks)
        return leaks

    async def _teardown_quietly(self) -> None:
        try:
            await self._teardown()
        except Exception as exc:  # teardown must never mask the original failure
            self.event("teardown.failed", error=str(exc))

    def _archive_retry(self, n: int) -> None:
        dest = self.paths.retries / str(n)
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("terraform", "ansible", "inventory.yml", "agent"):
            src = self.paths.root / name
            if src.exists():
                shutil.move(str(src), str(dest / name))
        self.paths.make()
        self.env = None

    def _write_keep_info(self) -> None:
        lines = [f"Trial {self.trial_id} was kept (--keep). Get in:"]
        lines += [f"  {self.substrate.login_hint(n)}" for n in self.env.nodes]
        lines += ["Remove it with:", f"  terraform -chdir={self.paths.terraform} destroy "
                  "-auto-approve   (with TF_CLI_CONFIG_FILE="
                  f"{os.environ.get('TF_CLI_CONFIG_FILE', '')})",
                  f"  or: harness gc --trial {self.trial_id}"]
        self.paths.keep_info.write_text("\n".join(lines) + "\n")
