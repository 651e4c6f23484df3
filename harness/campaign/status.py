"""`harness campaign status`: counts by status, running trials and their phase, an ETA.

Fast on a large campaign (100,000 trials): nothing here reads every trial's files.

- the plan's trial ids come from `plan_index` (a cache of plan.json next to the results);
  and nothing of the campaign model (its substrates, agents, tasks) is imported;
- each trial's status from the run's results index (`analysis.index.read`, which lists the
  trial dirs and reads from disk what the index does not hold: a trial killed after its
  result.json was written is counted, one whose dir was moved aside is not);
- per node (`--executor ray`): the driver's `results/nodes.json`, one small file;
- running trials only matter among the trials without a result: the journal is read (with
  Polars; line by line if a line is torn) only when there are such trials, and of it only
  the events since the last `apply`; otherwise its last line is enough.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from analysis import index
from harness import owner
from harness.campaign import runlock
from harness.errors import InputError
from harness.paths import RunPaths
from harness.results import write_json_atomic

LIVE = ("started", "phase", "finished", "abandoned")
EVENTS = {"event": pl.String, "trial": pl.String, "phase": pl.String}


def plan_index(run_dir: Path) -> dict[str, Any]:
    """The plan's campaign, config and trial ids, from `results/plan-ids.json` while it was
    made from this very plan.json (same size, mtime and inode), else from plan.json (and
    the cache written again; best effort): parsing a 100,000-trial plan takes longer than
    `campaign status` may."""
    paths = RunPaths(run_dir)
    try:
        st = paths.plan.stat()
    except OSError:
        raise InputError("not a campaign run dir (no plan.json); run `harness campaign plan`",
                         file=str(run_dir)) from None
    stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
    cache = paths.results / "plan-ids.json"
    try:
        cached = json.loads(cache.read_text())
        if cached.get("stamp") == stamp:
            return cached
    except (OSError, ValueError, AttributeError):
        pass
    plan = json.loads(paths.plan.read_text())
    out = {"stamp": stamp, "campaign": plan["campaign"], "config": plan["config"],
           "ids": [t["trial_id"] for t in plan["trials"]]}
    try:
        write_json_atomic(cache, out)
    except OSError:
        pass
    return out


def last_event(journal: Path) -> dict[str, Any] | None:
    """The journal's last readable event, reading only its end."""
    try:
        with open(journal, "rb") as fh:
            size, block = fh.seek(0, os.SEEK_END), 1 << 16
            while True:
                start = max(0, size - block)
                fh.seek(start)
                lines = fh.read().splitlines()[1 if start else 0:]  # the first: cut
                for line in reversed(lines):
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(event, dict) and "event" in event:
                        return event
                if not start:
                    return None
                block *= 4
    except OSError:
        return None


def running_since_apply(journal: Path, among: set[str]) -> dict[str, str]:
    """Trials of `among` started and neither finished nor abandoned since the last
    `apply`, with their phase."""
    try:
        events = pl.read_ndjson(journal, schema=EVENTS)
    except (OSError, pl.exceptions.PolarsError):  # a torn line: read line by line
        rows = []
        for line in journal.read_bytes().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict):
                rows.append({k: e.get(k) if isinstance(e.get(k), str) else None
                             for k in EVENTS})
        events = pl.DataFrame(rows, schema=EVENTS)
    events = events.with_row_index("n")
    since = events.filter(pl.col("event") == "apply")["n"].max()
    wanted = pl.Series(list(among), dtype=pl.String).implode()
    last = (events.filter((pl.col("n") > (-1 if since is None else since))
                          & pl.col("event").is_in(LIVE) & pl.col("trial").is_in(wanted))
            .group_by("trial").agg(pl.all().sort_by("n").last()))
    return {t: p or "starting" for t, e, p in last.select("trial", "event", "phase").iter_rows()
            if e in ("started", "phase")}


def nodes(run_dir: Path, applying: bool) -> dict[str, Any]:
    """Per worker node of a run applied with `--executor ray`: its finished trials by
    status and, while an apply runs, its running trials with their phase
    (`results/nodes.json`, kept by the driver); {} for a local run."""
    try:
        data = json.loads((RunPaths(run_dir).results / "nodes.json").read_text())
    except (OSError, ValueError):
        return {}
    return {str(n): {"done": dict(v.get("done") or {}),
                     "running": dict(v.get("running") or {}) if applying else {}}
            for n, v in (data.get("nodes") or {}).items() if isinstance(v, dict)}


def campaign_status(run_dir: Path) -> dict[str, Any]:
    """Counts by status, running trials with their phase, and an ETA."""
    plan = plan_index(run_dir)
    limit = (plan["config"].get("concurrency") or {}).get("total") or 1
    ids = pl.DataFrame({"id": plan["ids"]}, schema={"id": pl.String})
    done = ids.join(index.read(run_dir, full=False).select("id", "status", "seconds"),
                    on="id", how="left")
    states = Counter({s or "pending": n for s, n in
                      done.group_by("status").len().sort("status").iter_rows()})
    pending = states.get("pending", 0)
    seconds = done.filter(pl.col("status").is_not_null())["seconds"]
    journal = RunPaths(run_dir).journal
    last = last_event(journal)
    unfinished = set(done.filter(pl.col("status").is_null())["id"])
    running = running_since_apply(journal, unfinished) if unfinished and last else {}
    held = runlock.holder(run_dir)
    applying = bool(held) and held.get("command") == "campaign apply"
    ended = last is not None and last["event"] in ("completed", "stopped")
    if applying:
        state = f"running ({owner.describe(held.get('owner'))})"
    elif running or (pending and last and not ended):
        state = "interrupted (owner gone): run apply to resume"
    elif pending:
        state = "not started: run apply"
    else:
        state = "finished"
    interrupted = sorted(running) if not applying else []
    if not applying:
        running = {}
    mean = seconds.mean() if seconds.len() else None
    eta = (mean * pending / max(1, int(limit))
           if applying and mean is not None and pending else None)
    return {"campaign": plan["campaign"], "total": len(plan["ids"]),
            "state": state, "states": dict(states), "running": running,
            "nodes": nodes(run_dir, applying),
            "interrupted": interrupted,
            "eta_sec": round(eta) if eta is not None else None,
            "journal_last": last,
            "checked_at": datetime.now().isoformat(timespec="seconds")}
