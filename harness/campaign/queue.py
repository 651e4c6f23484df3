"""`harness campaign apply`: drive a plan with bounded concurrency; resume; stop cleanly.

A `TrialQueue` runs trials under a global limit and a per-substrate limit, writes every
start, phase and end to the append-only, fsync'd `journal.jsonl`, and reacts to
SIGINT/SIGTERM: the first signal starts nothing new and cancels running trials (each tears
down and records itself `cancelled`); a second one records `cancelled` for every trial still
tearing down, abandons it (for `harness gc`) and exits 130.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agents import get_agent
from harness.agents.secrets import agent_secrets
from harness.campaign.model import ENV_REF, AgentSpec, CampaignFile, move_aside, trial_state
from harness.errors import InputError
from harness.paths import RunPaths
from harness.results import AgentRef, TaskRef, TrialRecord, append_jsonl, build_record, now_iso
from harness.substrates.capacity import CapacityPool
from harness.task import load_task
from harness.tools.terraform import TrialTerraform
from harness.trial import Trial


class Journal:
    """journal.jsonl: one JSON line per event, flushed and fsync'd."""

    def __init__(self, path: Path):
        self.path = path

    def write(self, event: str, **data: Any) -> None:
        append_jsonl(self.path, {"ts": now_iso(), "event": event, **data})

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


def resolve_secrets(agent: AgentSpec) -> dict[str, str]:
    """Values of the agent's `${VAR}` references (env and kwargs) from the caller's
    environment, by name (kwargs as `kwargs.<key>`); an unset one is an input error."""
    out = {}
    refs = [(f"env.{k}", k, v) for k, v in agent.env.items()]
    refs += [(f"kwargs.{k}", f"kwargs.{k}", v) for k, v in agent.kwargs.items()
             if isinstance(v, str) and ENV_REF.match(v)]
    for where, key, ref in refs:
        var = ENV_REF.match(ref).group(1)
        if var not in os.environ:
            raise InputError(f"agent {agent.label}: environment variable {var} is not set",
                             key=f"agents.{agent.name}.{where}")
        out[key] = os.environ[var]
    return out


def agent_kwargs(agent: AgentSpec, resolved: dict[str, str]) -> dict[str, Any]:
    """The agent's kwargs with `${VAR}` references replaced by their values."""
    return {k: resolved.get(f"kwargs.{k}", v) for k, v in agent.kwargs.items()}


@dataclass
class QueueState:
    """What the progress display and `status` need to know, updated live."""

    total: int
    done: int = 0
    running: dict[str, str] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)


class TrialQueue:
    """Runs planned trials with bounded concurrency (total and per substrate)."""

    def __init__(self, run_dir: Path, camp: CampaignFile, substrates: dict[str, Any],
                 on_change: Callable[[QueueState], None] = lambda s: None):
        self.run_dir, self.camp, self.substrates = run_dir, camp, substrates
        self.journal = Journal(RunPaths(run_dir).journal)
        limits = camp.limits
        self.total = asyncio.Semaphore(limits.total)
        self.per_sub = {n: asyncio.Semaphore(limits.per_substrate.get(n, limits.total))
                        for n in substrates}
        self.on_change = on_change
        self.stopping = False
        self.tasks: dict[str, asyncio.Task] = {}
        self.trials: dict[str, Trial] = {}
        self.state = QueueState(total=0)
        self.agents = {(a.name, a.model): a for a in camp.agents}
        self.capacity = CapacityPool(memory_overcommit=camp.capacity.memory_overcommit,
                                     cpu_overcommit=camp.capacity.cpu_overcommit)

    def _trial(self, t: dict[str, Any]) -> Trial:
        spec = self.agents[(t["agent"], t["model"])]
        task = load_task(t["task_path"])
        resolved = resolve_secrets(spec)
        return Trial(task=task, agent=get_agent(spec.name, model=spec.model,
                                                **agent_kwargs(spec, resolved)),
                     substrate=self.substrates[t["substrate"]],
                     root=RunPaths(self.run_dir).trial(t["trial_id"]).root,
                     trial_id=t["trial_id"],
                     campaign=self.camp.name, attempt=t["attempt"], retries=self.camp.retries,
                     timeout_multiplier=self.camp.timeout_multiplier,
                     secrets={**agent_secrets(spec.name),
                              **{k: v for k, v in resolved.items()
                                 if not k.startswith("kwargs.")}},
                     extra_secrets=[v for k, v in resolved.items() if k.startswith("kwargs.")],
                     fingerprint=t["fingerprint"],
                     on_phase=self._phase)

    def _phase(self, trial_id: str, phase: str) -> None:
        self.state.running[trial_id] = phase
        self.journal.write("phase", trial=trial_id, phase=phase)
        self.on_change(self.state)

    async def _one(self, t: dict[str, Any]) -> TrialRecord | None:
        vm = self.substrates[t["substrate"]].holds_capacity
        async with self.total, self.per_sub[t["substrate"]], self.capacity.hold(
                t["memory_mb"] if vm else 0, t["cpus"] if vm else 0):
            if self.stopping:
                return None
            self.journal.write("started", trial=t["trial_id"])
            started = time.monotonic()
            try:
                trial = self._trial(t)
                self.trials[t["trial_id"]] = trial
                rec = await trial.run()
            except asyncio.CancelledError:
                self.journal.write("finished", trial=t["trial_id"], status="cancelled")
                self._finished(t["trial_id"], "cancelled")
                raise
            except Exception as exc:  # before the trial could record itself: record it here
                rec = plan_crash_record(self.run_dir, t, self.camp.name, exc)
            self.journal.write("finished", trial=t["trial_id"], status=rec.status,
                               reward=rec.reward, seconds=round(time.monotonic() - started, 1))
            self._finished(t["trial_id"], rec.status)
            return rec

    def _finished(self, trial_id: str, status: str) -> None:
        self.state.running.pop(trial_id, None)
        self.state.done += 1
        self.state.statuses[status] = self.state.statuses.get(status, 0) + 1
        self.on_change(self.state)

    def stop(self) -> None:
        """First signal: start nothing new, cancel what runs (each tears down)."""
        if self.stopping:
            return self.abandon()
        self.stopping = True
        self.journal.write("stopping")
        for task in self.tasks.values():
            task.cancel()

    def abandon(self) -> None:
        """Second signal: record every unfinished trial as cancelled, then exit 130."""
        for trial_id, trial in self.trials.items():
            if not trial.paths.result.exists():
                cancelled_record(trial, "abandoned during teardown (second interrupt)")
                self.journal.write("abandoned", trial=trial_id)
        os._exit(130)

    async def run(self, todo: list[dict[str, Any]]) -> list[TrialRecord]:
        self.state.total = len(todo)
        for t in todo:  # a trial that could never fit this host alone: refused now
            self.capacity.check(t["trial_id"], t["memory_mb"], t["cpus"])
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stop)
        self.journal.write("apply", trials=len(todo), pid=os.getpid())
        for t in todo:
            self.tasks[t["trial_id"]] = asyncio.create_task(self._one(t))
        results = await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        self.journal.write("stopped" if self.stopping else "completed")
        return [r for r in results if isinstance(r, TrialRecord)]


def cancelled_record(trial: Trial, message: str) -> None:
    """Write a `cancelled` result for a trial that cannot finish its own."""
    rec = trial.record("cancelled", error={"type": "Cancelled", "message": message})
    rec.timings, rec.fingerprint, rec.finished_at = trial.timings, trial.fingerprint, now_iso()
    rec.write(trial.paths.result, trial.redactor)


def plan_crash_record(run_dir: Path, t: dict[str, Any], campaign: str,
                      exc: Exception) -> TrialRecord:
    """A `setup_error` record for a planned trial that failed before its Trial existed
    (e.g. its task no longer loads): written so that apply neither hangs on it nor
    forgets it; `HarnessCrash` makes apply exit non-zero."""
    message = exc.message if hasattr(exc, "message") else f"{type(exc).__name__}: {exc}"
    rec = build_record(
        t["trial_id"], campaign, t.get("attempt", 1), t.get("substrate", "?"), "setup_error",
        TaskRef(name=t.get("task", "?"), path=str(t.get("task_path", "")),
                sha256=t.get("task_sha256", "")),
        AgentRef(name=t.get("agent", "?"), model=t.get("model"), version="?"),
        error={"type": "HarnessCrash", "message": message[:2000]},
        fingerprint=t.get("fingerprint"), finished_at=now_iso())
    paths = RunPaths(run_dir).trial(t["trial_id"]).make()
    rec.write(paths.result)
    return rec


def clean_unfinished(run_dir: Path, t: dict[str, Any], substrate) -> None:
    """Tear down what an interrupted or cancelled run of this trial left, keep its evidence."""
    paths = RunPaths(run_dir).trial(t["trial_id"])
    if not paths.trial_json.exists():
        return
    tf = TrialTerraform(paths)
    try:
        if tf.has_state():
            tf.destroy()
    except Exception:  # a broken state is swept by label below
        pass
    substrate.sweep(trial=t["trial_id"])
    move_aside(run_dir, t["trial_id"], trial_state(run_dir, t))
