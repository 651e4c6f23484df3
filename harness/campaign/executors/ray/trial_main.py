"""The child process that runs one trial on a Ray worker node (`node.run_trial`).

`python -m harness.campaign.executors.ray.trial_main SPEC`, SPEC a JSON file with the
planned trial, the campaign config and the Ray worker's pid. The trial runs through the
ordinary `TrialQueue`, in the node's run dir, on the node's own hosts file (a campaign's
`hosts:` names the driver's machines, not this node's); each phase is printed as
`phase <name>` for the driver's progress. The process dies with its Ray worker
(PR_SET_PDEATHSIG: SIGTERM, which the queue handles as Ctrl-C: teardown, `cancelled`).
"""

from __future__ import annotations

import ctypes
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from harness.campaign.hosts import HostSet
from harness.campaign.model import CampaignFile, PlannedTrial
from harness.campaign.plan import substrates_for
from harness.campaign.queue import TrialQueue, clean_unfinished, resolve_secrets
from harness.paths import RunPaths
from harness.trial import run_async

PR_SET_PDEATHSIG = 1
QUIESCE_SEC = 120.0


def die_with_parent(parent: int) -> None:
    """SIGTERM when the parent (the Ray worker) dies; exit now if it already has."""
    import os

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        sys.exit(143)


def quiesce(hosts: HostSet, t: dict[str, Any], deadline: float = QUIESCE_SEC) -> None:
    """Sweep this trial id's leftovers from this node's engines, first waiting (up to
    `deadline` seconds) for a live run of it elsewhere to end: when nodes share an
    engine, the run of a lost node may still be tearing down under the same names."""
    subs = [hosts.substrate(h, t["substrate"]) for h in hosts.names
            if hosts.runs(h, t["substrate"]) and h not in hosts.drained]
    end = time.monotonic() + deadline
    for sub in subs:
        while True:
            try:
                sub.sweep(trial=t["trial_id"])
                held = getattr(sub, "leftovers", lambda **kw: [])(trial=t["trial_id"],
                                                                   force=True)
            except Exception:  # an engine that does not answer: the queue finds out
                break
            if not held or time.monotonic() > end:
                break
            time.sleep(1.0)


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    die_with_parent(spec["parent"])
    t, config = spec["trial"], {**spec["config"], "hosts": None}
    camp = CampaignFile.model_validate(config)
    for agent in camp.agents:
        resolve_secrets(agent)
    run = Path(spec_path).parent.parent
    subs = substrates_for(camp, [PlannedTrial(**t)])
    hosts = HostSet.for_campaign(camp, subs)
    hosts.preflight(sorted(subs), log=lambda m: print(f"log {m}", flush=True))
    if RunPaths(run).trial(t["trial_id"]).root.exists():
        clean_unfinished(run, t, hosts)
    quiesce(hosts, t)

    def on_change(state) -> None:
        for phase in state.running.values():
            print(f"phase {phase}", flush=True)

    queue = TrialQueue(run, camp, subs, on_change=on_change, hosts=hosts)
    records = run_async(queue.run([t]))
    return 0 if records else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
