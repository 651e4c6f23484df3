"""`harness campaign plan`: expand, validate, preflight and render; create nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from harness.agents import get_agent
from harness.campaign import runlock
from harness.campaign.model import (
    CampaignFile,
    PlannedTrial,
    expand,
    load_campaign,
    resolve_tasks,
    trial_state,
    write_plan,
)
from harness.campaign.queue import resolve_secrets
from harness.config import load_settings
from harness.errors import InputError
from harness.paths import RunPaths
from harness.substrates import get_substrate
from harness.substrates.base import TrialSpec
from harness.tools.ansible import write_inventory
from harness.tools.terraform import render_root, required_providers, write_root


def campaign_settings(camp: CampaignFile):
    """The machine's settings with the campaign's image overrides on top."""
    settings = load_settings()
    if camp.image_overrides:
        settings = settings.model_copy(update={"image_overrides": {
            **settings.image_overrides, **camp.image_overrides}})
    return settings


def substrates_for(camp: CampaignFile, trials: list[PlannedTrial]) -> dict[str, Any]:
    """One substrate object per name used, with the campaign's image overrides."""
    settings = campaign_settings(camp)
    return {name: get_substrate(name, settings=settings)
            for name in sorted({t.substrate for t in trials})}


def render_trial(run_dir: Path, t: PlannedTrial, task, sub, campaign: str) -> None:
    """Render main.tf.json and inventory.yml as apply would, without creating anything."""
    paths = RunPaths(run_dir).trial(t.trial_id)
    paths.terraform.mkdir(parents=True, exist_ok=True)
    spec = TrialSpec(t.trial_id, campaign, task, paths.root, sub.planned_image(task))
    tf_vars = sub.plan_vars(spec)
    write_root(paths, render_root(sub.terraform_module(), paths.terraform, tf_vars,
                                  required_providers(sub.providers), sub.provider_config()))
    planned = sub.planned_outputs(tf_vars)
    if planned is not None:
        write_inventory(paths, sub.inventory(spec, sub.nodes(spec, planned)))


def plan_campaign(file: Path, out: Path | None = None, shard: str = "") -> dict[str, Any]:
    """Validate and render the campaign into its run dir; return the plan summary
    (`shard`: the lock of `apply --shard K/N` is taken instead of the run dir's)."""
    camp, text = load_campaign(file)
    tasks = resolve_tasks(camp, file.parent, campaign_settings(camp))
    agents = {}
    for a in camp.agents:
        resolve_secrets(a)  # a `${VAR}` that is not set fails now, not at apply
        agents[a.name] = get_agent(a.name, model=a.model, **a.kwargs)
    trials = expand(camp, tasks)
    by_path = {str(t.path): t for t in tasks}
    for t in trials:  # e.g. the oracle on a task without solution/solve.sh
        why = agents[t.agent].check_task(by_path[t.task_path]) if t.agent in agents else None
        if why:
            raise InputError(f"{why} (agent {t.agent}, task {t.task})")
    subs = substrates_for(camp, trials)
    for sub in subs.values():
        sub.preflight()
    run_dir = (out or Path("runs") / camp.name).resolve()
    runlock.acquire(run_dir, "campaign apply" if shard else "campaign plan", shard)
    plan = write_plan(run_dir, camp, text, file, trials)
    states = Counter()
    for t in trials:
        state = trial_state(run_dir, {"trial_id": t.trial_id, "fingerprint": t.fingerprint})
        states[state] += 1
        if state != "done":
            render_trial(run_dir, t, by_path[t.task_path], subs[t.substrate], camp.name)
    return summarize(plan, trials, states, camp, run_dir)


def summarize(plan: dict, trials: list[PlannedTrial], states: Counter, camp: CampaignFile,
              run_dir: Path) -> dict[str, Any]:
    limits = camp.limits
    by_sub: dict[str, list[PlannedTrial]] = {}
    for t in trials:
        by_sub.setdefault(t.substrate, []).append(t)
    peak_cpus = peak_mem = 0
    slots = limits.total
    for name, ts in sorted(by_sub.items()):
        n = min(limits.per_substrate.get(name, limits.total), slots, len(ts))
        biggest = sorted(ts, key=lambda t: t.memory_mb, reverse=True)[:n]
        peak_cpus += sum(t.cpus for t in biggest)
        peak_mem += sum(t.memory_mb for t in biggest)
        slots -= n
    return {
        "campaign": camp.name, "run_dir": str(run_dir), "trials": len(trials),
        "by_task": dict(Counter(t.task for t in trials)),
        "by_agent": dict(Counter(f"{t.agent}:{t.model}" if t.model else t.agent
                                 for t in trials)),
        "by_substrate": dict(Counter(t.substrate for t in trials)),
        "states": dict(states),
        "concurrency": limits.model_dump(),
        "peak": {"cpus": peak_cpus, "memory_mb": peak_mem},
    }


def ensure_run_dir(target: Path, out: Path | None = None) -> tuple[Path, Path | None]:
    """(run dir, campaign file or None) for `apply DIR|FILE`."""
    if target.is_dir():
        if not RunPaths(target).plan.exists():
            raise InputError("not a campaign run dir (no plan.json)", file=str(target))
        return target.resolve(), None
    if target.is_file():
        camp, _ = load_campaign(target)
        return (out or Path("runs") / camp.name).resolve(), target
    raise InputError("no such campaign file or run dir", file=str(target))
