"""The Ray executor: each trial a Ray task, placed by Ray on a worker node that runs it
with that node's own engines (`node.py`), its trial directory shipped back into the
campaign's run dir exactly once (`ship.py`).

`harness campaign apply RUN --executor ray [--address ADDR]` is the driver: it connects to
the cluster (ADDR, else `$RAY_ADDRESS`, else the local cluster), submits one task per
trial to run, holding the Ray resources of `node.demand` (the slots worker nodes offer from
their hosts files), and installs each shipped trial as it comes back. A node lost mid-trial
(its raylet killed) fails its tasks with a system error, which Ray retries on another node
(`max_retries`); the lost node's leftovers carry the trial id for `harness gc` there.
Phases reach the driver through a small actor on the driver's node (`Progress`) and go
into the journal with the node's name, which `campaign status` reports per node
(`results/nodes.json`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from analysis import index
from harness.campaign.executors import Executor
from harness.campaign.executors.ray.node import SLOTS, demand, run_trial, slot_resource
from harness.campaign.executors.ray.ship import install
from harness.campaign.model import move_aside, trial_state
from harness.campaign.queue import Journal, QueueState, _campaign_secrets, plan_crash_record
from harness.errors import InputError
from harness.paths import RunPaths
from harness.redact import Redactor
from harness.results import TrialRecord, write_json_atomic

MAX_RETRIES = 3  # system failures (a node or worker lost) Ray retries a trial's task after
NODES_FILE = "nodes.json"
LOST = (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError)


@ray.remote(num_cpus=0)
class Progress:
    """Phases reported by the nodes' trials, drained by the driver."""

    def __init__(self):
        self.events: list[tuple[str, str, str]] = []

    def event(self, trial: str, node: str, phase: str) -> None:
        self.events.append((trial, node, phase))

    def drain(self) -> list[tuple[str, str, str]]:
        out, self.events = self.events, []
        return out


def _interrupt(signum, frame) -> None:
    """SIGTERM stops the driver as Ctrl-C does: cancel the trials (each tears down)."""
    raise KeyboardInterrupt


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """A one-line error when `host:port` does not accept a connection."""
    if address in ("auto", "local") or address.startswith("ray://"):
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot reach the Ray cluster at {address!r} ({exc}); start its "
                         "head with `ray start --head` or give its GCS host:port",
                         key="--address") from None


class RayExecutor(Executor):
    """Trials as Ray tasks on the worker nodes of the cluster at `address`."""

    name = "ray"

    def __init__(self, address: str | None = None):
        self.address = address or os.environ.get("RAY_ADDRESS") or "auto"
        self.nodes: dict[str, dict[str, Any]] = {}

    def prepare(self, run_dir: Path, camp: Any, substrates: dict[str, Any],
                log: Callable[[str], None]) -> None:
        self.run_dir, self.camp, self.log = run_dir, camp, log
        self.config = camp.model_dump(mode="json")
        check_reachable(self.address)
        # Ray prints its cluster's error messages (a node lost) on stdout: the driver's
        # stdout is `apply --json`'s, so they go to stderr until `run` disconnects
        self._stdout = contextlib.redirect_stdout(sys.stderr)
        self._stdout.__enter__()
        try:
            ray.init(address=self.address, log_to_driver=False, logging_level="ERROR",
                     configure_logging=False)
        except Exception as exc:  # ConnectionError, a version mismatch, no cluster
            self._stdout.__exit__(None, None, None)
            raise InputError(f"cannot connect to the Ray cluster at {self.address!r}: "
                             f"{str(exc).strip().splitlines()[0][:300]}",
                             key="--address") from None
        offered = ray.cluster_resources()
        wanted = [SLOTS] + [slot_resource(s) for s in sorted(substrates)]
        missing = [r for r in wanted if not offered.get(r)]
        if missing:
            self._disconnect()
            raise InputError(f"no node of the Ray cluster at {self.address!r} offers "
                             f"{', '.join(missing)}; start worker nodes with `ray start "
                             "--address ADDR --resources \"$(harness campaign "
                             "node-resources)\"`", key="--address")
        log(f"ray: {len(ray.nodes())} node(s), {int(offered[SLOTS])} trial slot(s)")

    def clean(self, t: dict[str, Any]) -> None:
        """Keep an unfinished trial's evidence aside; its leftovers are on the node that
        ran it (swept there before the trial runs there again, or by `harness gc`)."""
        if RunPaths(self.run_dir).trial(t["trial_id"]).trial_json.exists():
            move_aside(self.run_dir, t["trial_id"], trial_state(self.run_dir, t))

    def hosts(self) -> dict[str, str]:
        return {n: "ok" for n in sorted(self.nodes)}

    def run(self, todo: list[dict[str, Any]], on_change: Callable[[QueueState], None]
            ) -> list[TrialRecord]:
        journal = Journal(RunPaths(self.run_dir).journal,
                          Redactor(_campaign_secrets(self.camp)))
        state = QueueState(total=len(todo))
        self._load_nodes()
        here = ray.get_runtime_context().get_node_id()
        progress = Progress.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
            here, soft=False)).remote()
        task = ray.remote(run_trial)
        journal.write("apply", trials=len(todo), pid=os.getpid(), executor="ray",
                      address=self.address)
        def submit(t: dict[str, Any]) -> Any:
            ref = task.options(num_cpus=0, resources=demand(t), max_retries=MAX_RETRIES,
                               retry_exceptions=False, name=f"trial {t['trial_id']}"
                               ).remote(t, self.config, progress)
            refs[ref] = t
            return ref

        # the campaign's concurrency (or --concurrency) caps the trials in flight on the
        # cluster, as it does on this machine; the nodes' slots place them
        limit, waiting, refs = self.camp.concurrency.total, list(todo), {}
        pending = [submit(waiting.pop(0)) for _ in range(min(limit, len(waiting)))]
        records, where, ended = [], {}, set()
        old_term = signal.signal(signal.SIGTERM, _interrupt)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
                while waiting and len(pending) < limit:
                    pending.append(submit(waiting.pop(0)))
                for tid, node, phase in ray.get(progress.drain.remote()):
                    if tid in ended:  # a late report of a trial already installed
                        continue
                    if where.get(tid) != node:
                        if tid in where:
                            self.log(f"trial {tid}: node {where[tid]} lost; running again "
                                     f"on {node}")
                            self._running(where[tid], tid, None)
                        where[tid] = node
                        journal.write("started", trial=tid, node=node)
                    journal.write("phase", trial=tid, phase=phase, node=node)
                    state.running[tid] = f"{phase} @ {node}"
                    self._running(node, tid, phase)
                for ref in done:
                    records.append(self._finish(refs[ref], ref, journal, where))
                    tid = refs[ref]["trial_id"]
                    ended.add(tid)
                    state.running.pop(tid, None)
                    state.done += 1
                    state.statuses[records[-1].status] = (
                        state.statuses.get(records[-1].status, 0) + 1)
                self._write_nodes()
                on_change(state)
        except KeyboardInterrupt:
            self.cancelled = True
            journal.write("stopping")
            for ref in pending:
                ray.cancel(ref)
            ray.wait(pending, num_returns=len(pending), timeout=60)
        finally:
            signal.signal(signal.SIGTERM, old_term)
        journal.write("stopped" if self.cancelled else "completed")
        self._write_nodes(final=True)
        self._disconnect()
        return records

    def _disconnect(self) -> None:
        ray.shutdown()
        self._stdout.__exit__(None, None, None)

    def _finish(self, t: dict[str, Any], ref: Any, journal: Journal,
                where: dict[str, str]) -> TrialRecord:
        """Install the trial a task shipped (once), or record why it has none."""
        tid, size = t["trial_id"], None
        try:
            out = ray.get(ref)
        except ray.exceptions.RayError as exc:
            lost = isinstance(exc, LOST)
            message = str(exc).strip().splitlines()[-1][:1000] if str(exc).strip() else ""
            rec = plan_crash_record(self.run_dir, t, self.camp.name, RuntimeError(message),
                                    "NodeLost" if lost else "HarnessCrash")
            node = where.get(tid, "?")
        else:
            node, size = out["node"], len(out["data"])
            try:
                if not install(self.run_dir, t, out["data"]):
                    journal.write("duplicate", trial=tid, node=node)
                rec = TrialRecord.model_validate_json(
                    RunPaths(self.run_dir).trial(tid).result.read_text())
            except (OSError, ValueError, tarfile.TarError) as exc:
                rec = plan_crash_record(self.run_dir, t, self.camp.name, RuntimeError(
                    f"the trial directory node {node} shipped could not be installed: "
                    f"{exc}"))
        index.record(self.run_dir, [tid])
        journal.write("finished", trial=tid, status=rec.status, node=node,
                      reward=rec.reward, bytes=size)
        self._running(node, tid, None)
        done = self.nodes.setdefault(node, {"done": {}, "running": {}})["done"]
        done[rec.status] = done.get(rec.status, 0) + 1
        return rec

    def _running(self, node: str, tid: str, phase: str | None) -> None:
        running = self.nodes.setdefault(node, {"done": {}, "running": {}})["running"]
        if phase is None:
            running.pop(tid, None)
        else:
            running[tid] = phase

    def _load_nodes(self) -> None:
        """Per-node counts of earlier applies of this run (resume adds to them)."""
        import json

        try:
            old = json.loads((RunPaths(self.run_dir).results / NODES_FILE).read_text())
        except (OSError, ValueError):
            old = {}
        self.nodes = {n: {"done": dict(v.get("done") or {}), "running": {}}
                      for n, v in (old.get("nodes") or {}).items()}

    def _write_nodes(self, final: bool = False) -> None:
        if final:
            for v in self.nodes.values():
                v["running"] = {}
        write_json_atomic(RunPaths(self.run_dir).results / NODES_FILE,
                          {"updated": time.time(), "nodes": self.nodes})
