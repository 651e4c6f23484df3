"""`harness quickstart`: the seed tasks of the default substrate with the oracle and nop
agents, for real."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from pathlib import Path

from harness.errors import InputError
from harness.paths import SEED_TASKS, RunPaths, make_trial_id
from harness.results import TrialRecord
from harness.substrates import default_name, get_substrate
from harness.task import discover_tasks, load_task
from harness.trial.factory import build_trial
from harness.trial.trial import Trial, run_async


async def _run_all(trials: list[Trial], concurrency: int) -> list[TrialRecord]:
    sem = asyncio.Semaphore(concurrency)

    async def one(t: Trial) -> TrialRecord:
        async with sem:
            return await t.run()

    return list(await asyncio.gather(*(one(t) for t in trials)))


def quickstart(tasks_dir: Path = SEED_TASKS, out: Path = Path("runs"),
               agents: tuple[str, ...] = ("oracle", "nop"), concurrency: int = 2,
               on_phase: Callable[[str, str], None] | None = None) -> list[TrialRecord]:
    """Run every task of the default substrate under `tasks_dir` once per agent; return
    the records."""
    sub = get_substrate(default_name())
    sub.preflight()
    tasks = [load_task(p) for p in discover_tasks(tasks_dir)]
    tasks = [t for t in tasks if t.env.type in sub.env_types]
    trials = []
    for task in tasks:
        for agent in agents:
            trial_id = make_trial_id(task.name, agent, 1)
            root = RunPaths(out.resolve() / "quickstart").trial(trial_id).root
            try:
                trials.append(build_trial(task, agent, None, substrate=sub, root=root,
                                          trial_id=trial_id, campaign="quickstart",
                                          retries=1, on_phase=on_phase))
            except InputError as exc:  # e.g. the oracle on a task without a solution
                warnings.warn(f"{task.name} x {agent}: not run: {exc.message}", stacklevel=2)
    return run_async(_run_all(trials, concurrency))
