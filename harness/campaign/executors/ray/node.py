"""The worker-node side of the Ray executor: what a node offers, and one trial on it.

A node's offer comes from its own hosts file (`$HARNESS_HOME/hosts.yaml`, else this
machine): `node_resources` turns the slots of its hosts into Ray resources, given to
`ray start --resources` (`harness campaign node-resources` prints them):

    {"harness_trials": <slots of all its hosts>, "harness_docker": <docker slots>, ...}

`run_trial` is the body of the Ray task: it runs the trial in a child process
(`python -m harness.campaign.executors.ray.trial_main`), in the node's own run dir
`$HARNESS_HOME/ray-runs/<campaign>/`, forwards the phases the child prints to the driver's
progress actor, and returns the trial directory packed (`ship.pack`). The child dies with
the Ray worker (PR_SET_PDEATHSIG: SIGTERM, so it tears its trial down as on Ctrl-C) when
the node's raylet is lost; what it could not tear down carries the trial id and the
child's owner tag, for `harness gc` on that node.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.campaign.executors.ray.ship import pack
from harness.paths import REPO_ROOT, RunPaths, harness_home
from harness.placement import HostsFile, engine_for, resolve_hosts
from harness.substrates import names

SLOTS = "harness_trials"
DEFAULT_SLOTS = 2  # per substrate of a host whose capacity does not say (max_trials)


def slot_resource(substrate: str) -> str:
    return f"harness_{substrate}"


def node_resources(hosts: HostsFile | None = None) -> dict[str, int]:
    """The Ray resources a node with `hosts` offers: per substrate the sum over its
    enabled hosts of `capacity.max_trials` (DEFAULT_SLOTS for an engine it has and no
    limit given), and `harness_trials`, the most trials it runs at once."""
    hosts = hosts or resolve_hosts()
    out: dict[str, int] = {}
    total = 0
    for h in hosts.hosts:
        if not h.enabled:
            continue
        slots = dict(h.capacity.max_trials)
        for sub in names():
            engine = engine_for(sub)
            if engine and h.endpoint(engine) is not None:
                slots.setdefault(sub, DEFAULT_SLOTS)
        slots = {s: n for s, n in slots.items() if n > 0}
        for sub, n in slots.items():
            out[slot_resource(sub)] = out.get(slot_resource(sub), 0) + n
        total += max(slots.values(), default=0)
    return {SLOTS: total, **dict(sorted(out.items()))}


def demand(t: dict[str, Any]) -> dict[str, float]:
    """The Ray resources one planned trial holds while it runs."""
    return {SLOTS: 1, slot_resource(t["substrate"]): 1}


def node_name() -> str:
    """How this node is named in the journal and `campaign status`: `$HARNESS_NODE`, else
    the host name and the Ray node id's first 8 characters."""
    if os.environ.get("HARNESS_NODE"):
        return os.environ["HARNESS_NODE"]
    try:
        import ray

        return f"{socket.gethostname()}:{ray.get_runtime_context().get_node_id()[:8]}"
    except Exception:  # outside a Ray worker (tests)
        return socket.gethostname()


def local_run_dir(campaign: str) -> Path:
    return harness_home() / "ray-runs" / campaign


def run_trial(t: dict[str, Any], config: dict[str, Any], progress: Any = None
              ) -> dict[str, Any]:
    """Run planned trial `t` of the campaign `config` on this node; its packed trial dir.
    Raises when the child ended without a result (the driver records a crash)."""
    node, tid = node_name(), t["trial_id"]
    run = local_run_dir(config["name"])
    spec = run / "specs" / f"{tid}.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({"trial": t, "config": config, "parent": os.getpid()}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    started = time.monotonic()
    # stderr to a file, not a second pipe: read after stdout's end, a pipe the child
    # filled meanwhile would block both
    errors = spec.with_suffix(".stderr")
    with errors.open("w") as err:
        child = subprocess.Popen([sys.executable, "-m",
                                  "harness.campaign.executors.ray.trial_main", str(spec)],
                                 stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    try:
        for line in child.stdout:
            if progress is not None and line.startswith("phase "):
                progress.event.remote(tid, node, line.split(" ", 1)[1].strip())
        child.wait()
    except BaseException:  # cancelled (ray.cancel) or interrupted: the child tears down
        child.send_signal(signal.SIGTERM)
        child.wait()
        raise
    paths = RunPaths(run).trial(tid)
    if not paths.result.is_file():
        with errors.open("rb") as fh:  # its last lines only
            fh.seek(max(0, errors.stat().st_size - 4096))
            stderr = fh.read().decode(errors="replace")
        tail = " ".join(stderr.strip().splitlines()[-3:])[:600]
        raise RuntimeError(f"trial {tid} on node {node} ended without a result "
                           f"(exit {child.returncode}): {tail}")
    data = pack(paths.root)
    shutil.rmtree(paths.root, ignore_errors=True)
    spec.unlink(missing_ok=True)
    errors.unlink(missing_ok=True)
    return {"trial_id": tid, "node": node, "data": data,
            "seconds": round(time.monotonic() - started, 1)}
