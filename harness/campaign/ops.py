"""The campaign verbs behind the CLI: apply (with resume), status, destroy, collect."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import owner
from harness.campaign import runlock
from harness.campaign.collect import collect
from harness.campaign.executors import get_executor
from harness.campaign.hosts import parse_shard, shard_of
from harness.campaign.model import CampaignFile, PlannedTrial, move_aside, read_plan, trial_state
from harness.campaign.plan import ensure_run_dir, plan_campaign, substrates_for
from harness.campaign.queue import QueueState, resolve_secrets
from harness.campaign.status import campaign_status
from harness.errors import InputError
from harness.paths import RunPaths
from harness.placement import resolve_hosts
from harness.tools.terraform import TrialTerraform
from harness.upkeep.gc import collect_garbage

__all__ = ["apply_campaign", "campaign_status", "collect_results", "destroy_campaign",
           "merge_shard"]


def _campaign(plan: dict[str, Any]) -> CampaignFile:
    return CampaignFile.model_validate(plan["config"])


def apply_campaign(target: Path, out: Path | None = None, concurrency: int | None = None,
                   force: bool = False, on_change: Callable[[QueueState], None] = lambda s: None,
                   log: Callable[[str], None] = print, shard: str | None = None,
                   executor: str = "local", address: str | None = None) -> dict[str, Any]:
    """Plan if given a file, then run every trial that has no final result; resume-safe.
    With `shard` "K/N" only the trials of shard K (`hosts.shard_of`), so N controllers
    share one campaign. `executor` runs them (`harness.campaign.executors`: "local", or
    "ray" on the Ray cluster at `address`)."""
    sharding = parse_shard(shard)
    runner = get_executor(executor, address=address)
    run_dir, file = ensure_run_dir(target, out)
    lock = f"{sharding[0]}/{sharding[1]}" if sharding else ""
    runlock.acquire(run_dir, "campaign apply", lock)
    if file is not None:
        summary = plan_campaign(file, run_dir, shard=lock)
        if summary["states"].get("changed") and not force:
            raise InputError(f"{summary['states']['changed']} finished trial(s) would change "
                             "(task or agent inputs differ from their results); rerun with "
                             "--force to re-run them", file=str(file))
    plan = read_plan(run_dir)
    camp = _campaign(plan)
    if concurrency is not None:
        if concurrency < 1:
            raise InputError("must be >= 1", key="--concurrency")
        limits = camp.limits.model_copy(update={"total": concurrency})
        camp = camp.model_copy(update={"concurrency": limits})
    for agent in camp.agents:
        resolve_secrets(agent)
    planned = [PlannedTrial(**t) for t in plan["trials"]]
    subs = substrates_for(camp, planned)
    runner.prepare(run_dir, camp, subs, log)
    todo, kept = [], 0
    for t in plan["trials"]:
        if sharding and shard_of(t["trial_id"], sharding[1]) != sharding[0]:
            continue
        state = trial_state(run_dir, t)
        if state == "done":
            kept += 1
            continue
        if state == "changed" and not force:
            raise InputError(f"trial {t['trial_id']} changed since it finished; use --force",
                             file=str(run_dir))
        if owner.run_elsewhere(t["trial_id"]):
            raise InputError(f"trial {t['trial_id']} is being run by another harness process "
                             "now; wait for it to finish or stop it, then run this again",
                             file=str(run_dir))
        runner.clean(t)
        if state == "changed":
            move_aside(run_dir, t["trial_id"], "changed")
        todo.append(t)
    log(f"{kept} trial(s) already done, {len(todo)} to run")
    records = runner.run(todo, on_change)
    rows = collect(run_dir)
    crashed = [r.trial_id for r in records if (r.error or {}).get("type") == "HarnessCrash"]
    return {"run_dir": str(run_dir), "kept": kept, "ran": len(records),
            "executor": runner.name, "hosts": runner.hosts(),
            "cancelled": runner.cancelled, "statuses": dict(Counter(r.status for r in records)),
            "crashed": crashed, "results": rows}


def destroy_campaign(run_dir: Path) -> dict[str, Any]:
    """Remove everything the campaign owns (idempotent, works after a crash)."""
    plan = read_plan(run_dir)
    runlock.acquire(run_dir, "campaign destroy")
    destroyed = []
    for t in plan["trials"]:
        paths = RunPaths(run_dir).trial(t["trial_id"])
        tf = TrialTerraform(paths)
        try:
            if tf.has_state():
                tf.destroy()
                destroyed.append(t["trial_id"])
        except Exception:  # swept by label below
            pass
    report = collect_garbage(campaign=plan["campaign"],
                             hosts=resolve_hosts(_campaign(plan).hosts))
    return {"campaign": plan["campaign"], "terraform_destroyed": destroyed,
            "swept": report.found, "skipped": report.skipped}


def collect_results(run_dir: Path, merge: list[Path] | None = None) -> dict[str, int]:
    """Rewrite the Parquet results; with `merge`, first copy in the finished trials of
    other run dirs of the same campaign plan (the shards of `apply --shard K/N` run on
    other controllers) that this one lacks."""
    plan = read_plan(run_dir)
    merged = sum(merge_shard(run_dir, plan, other) for other in merge or [])
    return {**collect(run_dir), "merged": merged}


def merge_shard(run_dir: Path, plan: dict[str, Any], other: Path) -> int:
    """Copy `other`'s finished trial dirs that `run_dir` has no result for; refuse a run
    dir of another campaign or another campaign file (one-line error)."""
    theirs = read_plan(other)
    if (theirs["campaign"], theirs.get("file_sha256")) != (plan["campaign"],
                                                          plan.get("file_sha256")):
        raise InputError(f"not a shard of campaign {plan['campaign']!r} with the same "
                         "campaign file (its plan differs)", file=str(other))
    n = 0
    for t in plan["trials"]:
        mine, src = RunPaths(run_dir).trial(t["trial_id"]), RunPaths(other).trial(t["trial_id"])
        if trial_state(run_dir, t) == "done" or trial_state(other, t) != "done":
            continue
        if mine.root.exists():
            move_aside(run_dir, t["trial_id"], "merged-over")
        shutil.copytree(src.root, mine.root)
        n += 1
    return n
