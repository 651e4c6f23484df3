"""`harness run`: one trial of one agent on one task, outside any campaign."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from harness.gateway.models import parse_budget
from harness.paths import RunPaths, make_trial_id
from harness.placement import Demand, HostPools, default_hosts
from harness.results import TrialRecord
from harness.substrates import for_env_type, get_substrate
from harness.task import load_task
from harness.tools.ansible import warm_playbook_server
from harness.tools.terraform import required_providers, warm_shared_providers
from harness.trial.factory import build_trial
from harness.trial.trial import Trial, run_async

ADHOC = "adhoc"  # the run directory of `harness run` under --out


def run_one(task_dir: str | Path, agent: str, substrate: str | None = None,
            out: str | Path = "runs", keep: bool = False, model: str | None = None,
            retries: int = 0, on_phase: Callable[[str, str], None] | None = None,
            log: Callable[[str], None] = lambda m: None,
            agent_kwargs: dict | None = None, budget: list[str] | None = None
            ) -> TrialRecord:
    """Validate the task, run one trial, return its record (also in result.json). A model
    the gateway serves (`scripted:FILE`, a name of config.yaml's `models:`) is resolved
    first, with the `budget` (`KEY=VALUE` items) it enforces."""
    task = load_task(task_dir)
    for w in task.warnings:
        log(f"warning: {w}")
    for line in task.info:
        log(f"info: {line}")
    sub_name = substrate or for_env_type(task.env.type)
    trial_id = make_trial_id(task.name, agent, 1, model=model)
    # the campaign queue's own check (HostSet.check), on this machine, before anything starts
    HostPools(default_hosts(only=[sub_name])).check([Demand(trial_id, task.name, agent, sub_name,
                                             task.total_cpus, task.total_memory_mb)])
    sub = get_substrate(sub_name)
    # start while checks run
    warm_shared_providers(required_providers(sub.providers), sub.provider_config())
    warm_playbook_server()  # (started already by the CLI's `run`)
    trial = build_trial(task, agent, model, substrate=sub, trial_id=trial_id,
                        root=RunPaths(Path(out).resolve() / ADHOC).trial(trial_id).root,
                        agent_kwargs=agent_kwargs, budget=parse_budget(budget),
                        on_phase=on_phase, keep=keep, retries=retries)
    sub.preflight()
    return run_async(_until_signalled(trial))


async def _until_signalled(trial: Trial) -> TrialRecord:
    """The trial, cancelled on SIGINT/SIGTERM: it tears down and records itself
    `cancelled`; that record is returned (the CLI exits 130). A second signal abandons the
    teardown as a campaign does: the trial is recorded `cancelled` and the process exits
    130 at once, leaving what is still up to `harness gc`."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    signals = []

    def on_signal() -> None:
        signals.append(1)
        if len(signals) == 1:
            task.cancel()
            return
        if not trial.paths.result.exists():
            trial.record_cancelled("abandoned during teardown (second interrupt)")
        print(f"harness: interrupted again: teardown of {trial.trial_id} abandoned; "
              "`harness gc` removes what is left", file=sys.stderr, flush=True)
        os._exit(130)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        return await trial.run()
    except asyncio.CancelledError:
        if trial.paths.result.is_file():
            return TrialRecord.model_validate_json(trial.paths.result.read_text())
        raise
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
