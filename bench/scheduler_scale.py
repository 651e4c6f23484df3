#!/usr/bin/env python3
"""Scheduler scale: the placement logic alone on a simulated campaign over many hosts.

A seeded campaign (default 50 tasks x 10 configurations x 20 attempts = 10,000 trials;
60% docker, 30% vm, 10% vm-cluster, sizes and durations drawn per task, configuration and
attempt) runs in a discrete-event loop in simulated time over 100 hosts of mixed capacity
(small, medium, large; a tenth docker-only), with `--fail` hosts failing mid-campaign
(drained, their trials re-queued). Side by side, on the same trials and failures:

- `placer`: `harness.placement.Placer` (spread, dominant-share balance, fair dispatch);
- `naive`: first-fit over one global FIFO in plan order, hosts in file order: every waiter
  re-checks on each release (what `CapacityPool`'s wake-all does, over several hosts),
  skipping shapes already seen not to fit in that pass.

Per decision: an event's scheduler CPU time (thread time: preemption on a busy machine
does not count; wall-clock totals are printed too) for the submits at the start, a release,
or a drain and its re-submits, then dispatch, split over the trials it placed (an event
placing none is one decision). Utilization counts only while trials wait: busy / available
resource-time over the hosts still up, per resource, and "dominant": each host's larger
share (vCPU or memory), averaged over hosts; "usable" counts only hosts with a free
`max_trials` slot for a substrate still waiting (slot limits are configuration, not
placement). Fairness: Jain's index (1 = equal) of the
configurations' fractions started (at 5%, ..., 95% of the time until the queue is empty:
the scheduler's share) and completed (over the run; slower configurations finish later
whatever the scheduler does). Spread: distinct hosts per (task, configuration) over the
most it could have. Exits non-zero when the placer misses a target.

    python bench/scheduler_scale.py [--tasks 50] [--agents 10] [--attempts 20] [--hosts 100]
                                    [--fail 2] [--order plan|config] [--seed 7]
"""

from __future__ import annotations

import argparse
import gc
import heapq
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.placement import Demand, Placer, load_hosts  # noqa: E402
from harness.substrates.common import HOST_RESERVE_MB  # noqa: E402

CPU_OC, MEM_OC = 4.0, 1.0
CLOCK = time.thread_time  # the scheduler's CPU time: a busy, shared machine does not inflate it
HOST_CLASSES = [  # share, cpus, GiB, max_trials, libvirt
    (0.30, 8, 32, {"docker": 16, "vm": 4, "vm-cluster": 2}, True),
    (0.35, 16, 64, {"docker": 32, "vm": 8, "vm-cluster": 4}, True),
    (0.25, 32, 128, {"docker": 64, "vm": 16, "vm-cluster": 8}, True),
    (0.10, 16, 64, {"docker": 32}, False),
]


def make_hosts(n: int) -> list[dict]:
    out, i = [], 0
    for k, (share, cpus, gib, slots, virt) in enumerate(HOST_CLASSES):
        count = n - i if k == len(HOST_CLASSES) - 1 else round(n * share)
        for _ in range(count):
            h = {"name": f"h{i:03d}", "docker": f"ssh://hx@h{i:03d}",
                 "capacity": {"cpus": cpus, "memory_mb": gib * 1024, "max_trials": slots}}
            if virt:
                h["libvirt"] = f"qemu+ssh://hx@h{i:03d}/system"
            out.append(h)
            i += 1
    return out


def make_trials(n_tasks: int, n_agents: int, attempts: int,
                rng: random.Random) -> tuple[list[Demand], dict[str, float]]:
    """Plan order (task, configuration, attempt), and each trial's duration in seconds."""
    tasks = []
    for k in range(n_tasks):
        u = rng.random()
        if u < 0.6:
            nodes = rng.choice([1, 1, 2, 3])
            tasks.append((f"task-{k:02d}", "docker", nodes * rng.choice([1, 2]),
                          nodes * rng.choice([512, 1024, 2048]), rng.lognormvariate(5.5, 0.6)))
        elif u < 0.9:
            tasks.append((f"task-{k:02d}", "vm", rng.choice([2, 4]),
                          rng.choice([2048, 4096, 8192]), rng.lognormvariate(6.4, 0.5)))
        else:
            tasks.append((f"task-{k:02d}", "vm-cluster", 6, 3 * rng.choice([2048, 4096]),
                          rng.lognormvariate(7.1, 0.4)))
    speed = [rng.lognormvariate(0, 0.4) for _ in range(n_agents)]
    trials, durations = [], {}
    for name, sub, cpus, mem, base in tasks:
        for a in range(n_agents):
            for n in range(1, attempts + 1):
                tid = f"{name}-agent{a}-{n}"
                trials.append(Demand(tid, name, f"agent{a}", sub, cpus, mem))
                early = rng.random() < 0.05  # a setup error ends it early
                durations[tid] = max(20.0, base * speed[a] * rng.lognormvariate(0, 0.3)
                                     * (0.1 if early else 1.0))
    return trials, durations


def slot_caps(h: dict) -> dict[str, int]:
    """The substrates a host runs and its trial slots for each (uncapped: a large number)."""
    subs = ["docker"] + (["vm", "vm-cluster"] if "libvirt" in h else [])
    return {s: h["capacity"]["max_trials"].get(s, 1 << 30) for s in subs}


class NaivePlacer:
    """First fit over one global FIFO; per-host pools (it never over-commits a host)."""

    def __init__(self, hosts: list[dict]):
        self.names = [h["name"] for h in hosts]
        self.cap = [(int(h["capacity"]["cpus"] * CPU_OC),
                     int((h["capacity"]["memory_mb"] - HOST_RESERVE_MB) * MEM_OC),
                     h["capacity"]["max_trials"]) for h in hosts]
        self.used = [[0, 0, defaultdict(int)] for _ in hosts]
        self.up = [True] * len(hosts)
        self.queue: list[Demand] = []
        self.running: dict[str, tuple[int, Demand]] = {}
        self.seen: set[str] = set()

    def submit(self, d: Demand) -> None:
        """Append; a trial submitted again (after a drain) goes first, as in the placer."""
        if d.trial_id in self.seen:
            self.queue.insert(0, d)
        else:
            self.seen.add(d.trial_id)
            self.queue.append(d)

    def dispatch(self) -> list[tuple[str, str]]:
        out, keep, failed = [], [], set()
        for d in self.queue:
            shape = (d.substrate, d.cpus, d.memory_mb)
            i = None if shape in failed else next(
                (i for i, (c, m, slots) in enumerate(self.cap) if self.up[i]
                 and d.substrate in slots and self.used[i][0] + d.cpus <= c
                 and self.used[i][1] + d.memory_mb <= m
                 and self.used[i][2][d.substrate] < slots[d.substrate]), None)
            if i is None:
                failed.add(shape)
                keep.append(d)
                continue
            u = self.used[i]
            u[0] += d.cpus
            u[1] += d.memory_mb
            u[2][d.substrate] += 1
            self.running[d.trial_id] = (i, d)
            out.append((d.trial_id, self.names[i]))
        self.queue = keep
        return out

    def release(self, tid: str, host: str | None = None) -> bool:
        i, d = self.running.pop(tid)
        u = self.used[i]
        u[0] -= d.cpus
        u[1] -= d.memory_mb
        u[2][d.substrate] -= 1
        return True

    def drain(self, host: str) -> list[str]:
        i = self.names.index(host)
        self.up[i] = False
        ids = [tid for tid, (j, _) in self.running.items() if j == i]
        for tid in ids:
            self.release(tid)
        return ids


class Sim:
    """Simulated time; the scheduler's own time measured around each of its calls."""

    def __init__(self, hosts: list[dict], trials: list[Demand], durations: dict[str, float]):
        self.hosts, self.trials, self.durations = hosts, trials, durations
        self.by_id = {d.trial_id: d for d in trials}
        self.index = {h["name"]: i for i, h in enumerate(hosts)}
        self.cap = [(h["capacity"]["cpus"] * CPU_OC,
                     (h["capacity"]["memory_mb"] - HOST_RESERVE_MB) * MEM_OC) for h in hosts]
        self.slot_cap = [slot_caps(h) for h in hosts]

    def run(self, sched, failures: list[tuple[float, str]]) -> dict:
        now, waiting, heap, seq = 0.0, 0, [], 0
        used = [[0, 0] for _ in self.hosts]
        slots = [defaultdict(int) for _ in self.hosts]
        wsub = Counter(d.substrate for d in self.trials)  # waiting, by substrate
        up = [True] * len(self.hosts)
        dom = [0.0] * len(self.hosts)
        token: dict[str, int] = {}
        samples: list[float] = []
        acc = defaultdict(float)  # busy/available resource-seconds while trials wait
        events: dict[str, list[tuple[float, str]]] = {"started": [], "done": []}
        where: dict[str, str] = {}
        fails = sorted(failures)

        def started(placed: list[tuple[str, str]], secs: float, wall: float) -> None:
            nonlocal seq, waiting
            samples.extend([secs / max(1, len(placed))] * max(1, len(placed)))
            acc["sched_cpu"] += secs
            acc["sched_wall"] += wall
            waiting -= len(placed)
            if placed and not waiting:
                acc["queue_empty"] = now
            for tid, host in placed:
                i, d = self.index[host], self.by_id[tid]
                used[i][0] += d.cpus
                used[i][1] += d.memory_mb
                slots[i][d.substrate] += 1
                wsub[d.substrate] -= 1
                assert used[i][0] <= self.cap[i][0] and used[i][1] <= self.cap[i][1], host
                seq += 1
                token[tid] = seq
                where[tid] = host
                events["started"].append((now, d.config))
                heapq.heappush(heap, (now + self.durations[tid], seq, tid, host))
                touch(i)

        def touch(i: int) -> None:
            new = max(used[i][0] / self.cap[i][0], used[i][1] / self.cap[i][1]) if up[i] else 0
            acc["dom_sum"] += new - dom[i]
            dom[i] = new

        def advance(t: float) -> None:
            nonlocal now
            if waiting and t > now:
                dt, live = t - now, [i for i in range(len(up)) if up[i]]
                acc["cpu_busy"] += dt * sum(used[i][0] for i in live)
                acc["cpu_cap"] += dt * sum(self.cap[i][0] for i in live)
                acc["mem_busy"] += dt * sum(used[i][1] for i in live)
                acc["mem_cap"] += dt * sum(self.cap[i][1] for i in live)
                acc["dom_busy"] += dt * acc["dom_sum"]
                acc["dom_cap"] += dt * len(live)
                usable = [i for i in live if any(n and slots[i][s] < self.slot_cap[i].get(s, 0)
                                                 for s, n in wsub.items())]
                acc["use_busy"] += dt * sum(dom[i] for i in usable)
                acc["use_cap"] += dt * len(usable)
            now = t

        t0, w0 = CLOCK(), time.perf_counter()
        for d in self.trials:
            sched.submit(d)
        waiting = len(self.trials)
        placed = sched.dispatch()
        started(placed, CLOCK() - t0, time.perf_counter() - w0)
        while heap or waiting:
            if fails and (not heap or fails[0][0] <= heap[0][0]):
                at, host = fails.pop(0)
                advance(at)
                t0, w0 = CLOCK(), time.perf_counter()
                gone = sched.drain(host)
                for tid in gone:  # ended as pre-window failures, retried elsewhere
                    sched.submit(self.by_id[tid])
                placed = sched.dispatch()
                secs, wall = CLOCK() - t0, time.perf_counter() - w0
                i = self.index[host]
                up[i], used[i], slots[i] = False, [0, 0], defaultdict(int)
                for tid in gone:
                    token.pop(tid)
                touch(i)
                waiting += len(gone)
                wsub.update(self.by_id[tid].substrate for tid in gone)
                acc["retried"] += len(gone)
                started(placed, secs, wall)
                continue
            if not heap:
                raise SystemExit(f"{waiting} trials wait and nothing runs: stranded")
            end, s, tid, host = heapq.heappop(heap)
            if token.get(tid) != s:
                continue  # ended by a drain
            advance(end)
            del token[tid]
            i, d = self.index[host], self.by_id[tid]
            t0, w0 = CLOCK(), time.perf_counter()
            sched.release(tid, host)
            placed = sched.dispatch()
            secs, wall = CLOCK() - t0, time.perf_counter() - w0
            used[i][0] -= d.cpus
            used[i][1] -= d.memory_mb
            slots[i][d.substrate] -= 1
            touch(i)
            events["done"].append((now, d.config))
            started(placed, secs, wall)
        return {"samples": samples, "acc": acc, "makespan": now, "events": events,
                "where": where}


def jain(xs: list[float]) -> float:
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else 1.0


def fairness(events: list[tuple[float, str]], totals: dict[str, int],
             until: float) -> tuple[float, float]:
    """(min, mean) of Jain's index over the configurations' fractions (of their trials)
    started or completed by 5%, 10%, ..., 95% of `until`."""
    counts: dict[str, int] = defaultdict(int)
    out, k = [], 0
    for step in range(1, 20):
        t = until * step / 20
        while k < len(events) and events[k][0] <= t:
            counts[events[k][1]] += 1
            k += 1
        out.append(jain([counts[c] / n for c, n in totals.items()]))
    return min(out), statistics.fmean(out)


def spread(trials: list[Demand], where: dict[str, str], hosts: list[dict]) -> float:
    """Mean over (task, configuration) of distinct hosts / min(attempts, hosts that run it)."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    subs = {}
    for d in trials:
        groups[(d.task, d.config)].append(where[d.trial_id])
        subs[(d.task, d.config)] = d.substrate
    eligible = {"docker": len(hosts), "vm": sum("libvirt" in h for h in hosts)}
    return statistics.fmean(
        len(set(got)) / min(len(got), eligible.get(subs[key], eligible["vm"]))
        for key, got in groups.items())


def lower_bounds(hosts: list[dict], trials: list[Demand],
                 durations: dict[str, float]) -> dict[str, float]:
    """No schedule runs the resource-seconds faster than the capacity allows (all hosts; VM
    trials on the libvirt hosts only: `work`), a substrate's trial-seconds faster than its
    slots allow (`max_trials`: `slots`), nor ends before its longest trial (`longest`)."""
    cap = [(h["capacity"]["cpus"] * CPU_OC, (h["capacity"]["memory_mb"] - HOST_RESERVE_MB)
            * MEM_OC, "libvirt" in h) for h in hosts]

    def work(ds: list[Demand], k: int) -> float:
        return sum((d.cpus, d.memory_mb)[k] * durations[d.trial_id] for d in ds)

    vms = [d for d in trials if d.substrate != "docker"]
    out = {"work": max(work(trials, 0) / sum(c[0] for c in cap),
                       work(trials, 1) / sum(c[1] for c in cap),
                       work(vms, 0) / sum(c[0] for c in cap if c[2]),
                       work(vms, 1) / sum(c[1] for c in cap if c[2]))}
    secs: dict[str, float] = defaultdict(float)
    for d in trials:
        secs[d.substrate] += durations[d.trial_id]
    out["slots"] = max(v / sum(slot_caps(h).get(sub, 0) for h in hosts)
                       for sub, v in secs.items())
    out["longest"] = max(durations.values())
    return out


def summary(res: dict, trials: list[Demand], hosts: list[dict]) -> dict:
    s, acc = res["samples"], res["acc"]
    totals: dict[str, int] = defaultdict(int)
    for d in trials:
        totals[d.config] += 1
    smin, _ = fairness(res["events"]["started"], totals, acc["queue_empty"])
    cmin, cmean = fairness(res["events"]["done"], totals, res["makespan"])
    return {"decisions": len(s), "mean_us": statistics.fmean(s) * 1e6,
            "p99_us": sorted(s)[int(len(s) * 0.99)] * 1e6, "max_us": max(s) * 1e6,
            "util_dom": acc["dom_busy"] / acc["dom_cap"],
            "util_cpu": acc["cpu_busy"] / acc["cpu_cap"],
            "util_mem": acc["mem_busy"] / acc["mem_cap"],
            "util_use": acc["use_busy"] / acc["use_cap"], "started_min": smin,
            "done_min": cmin, "done_mean": cmean,
            "spread": spread(trials, res["where"], hosts),
            "queue_h": acc["queue_empty"] / 3600, "makespan_h": res["makespan"] / 3600,
            "retried": acc["retried"], "sched_cpu": acc["sched_cpu"],
            "sched_wall": acc["sched_wall"]}


ROWS = [("decisions", "{:.0f}", "decisions"), ("per decision, mean (us)", "{:.1f}", "mean_us"),
        ("per decision, p99 (us)", "{:.1f}", "p99_us"),
        ("per decision, max (us)", "{:.0f}", "max_us"),
        ("utilization, dominant", "{:.1%}", "util_dom"),
        ("utilization, vCPU", "{:.1%}", "util_cpu"),
        ("utilization, memory", "{:.1%}", "util_mem"),
        ("utilization, usable", "{:.1%}", "util_use"),
        ("queue empty at (h)", "{:.2f}", "queue_h"),
        ("fair starts, Jain min", "{:.3f}", "started_min"),
        ("fair completions, min", "{:.3f}", "done_min"),
        ("fair completions, mean", "{:.3f}", "done_mean"),
        ("attempt spread", "{:.1%}", "spread"), ("retried (drained)", "{:.0f}", "retried"),
        ("makespan (h)", "{:.2f}", "makespan_h"),
        ("scheduler CPU (s)", "{:.2f}", "sched_cpu"),
        ("scheduler wall (s)", "{:.2f}", "sched_wall"), ("sim wall (s)", "{:.1f}", "wall")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--attempts", type=int, default=20)
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--fail", type=int, default=2, help="hosts failing while trials wait")
    ap.add_argument("--order", choices=["plan", "config"], default="plan",
                    help="queue order: the plan's (task-major), or configuration by "
                         "configuration (as campaigns submitted one after another)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    hosts = make_hosts(args.hosts)
    trials, durations = make_trials(args.tasks, args.agents, args.attempts, rng)
    if args.order == "config":
        trials.sort(key=lambda d: int(d.config.removeprefix("agent")))
    bounds = lower_bounds(hosts, trials, durations)
    lb = max(bounds.values())
    failures = [(bounds["work"] * (k + 1) / (args.fail + 1), h["name"])
                for k, h in enumerate(rng.sample(hosts, args.fail))]
    sim = Sim(hosts, trials, durations)
    gc.freeze()  # a full collection over the simulator's tables is no placement decision
    rows = {}
    for name, sched in (("placer", Placer(load_hosts(hosts), cpu_overcommit=CPU_OC,
                                          memory_overcommit=MEM_OC, seed=args.seed)),
                        ("naive", NaivePlacer(hosts))):
        t = time.perf_counter()
        rows[name] = summary(sim.run(sched, failures), trials, hosts)
        rows[name]["wall"] = time.perf_counter() - t
    subs: dict[str, int] = defaultdict(int)
    for d in trials:
        subs[d.substrate] += 1
    print(f"{len(trials)} trials ({', '.join(f'{n} {s}' for s, n in sorted(subs.items()))}) | "
          f"{args.tasks} tasks x {args.agents} configurations x {args.attempts} attempts, "
          f"{args.order} order | {len(hosts)} hosts, {args.fail} failing | seed {args.seed}")
    p, n = rows["placer"], rows["naive"]
    print(f"{'':<26}{'placer':>10}{'naive':>10}{'placer/naive':>14}")
    for label, fmt, key in ROWS:
        ratio = f"{p[key] / n[key]:.2f}" if n[key] else "-"
        print(f"{label:<26}{fmt.format(p[key]):>10}{fmt.format(n[key]):>10}{ratio:>14}")
    print(f"makespan lower bound {lb / 3600:.2f} h = max(resource-seconds / capacity "
          f"{bounds['work'] / 3600:.2f} h, trial-seconds / max_trials slots "
          f"{bounds['slots'] / 3600:.2f} h, longest trial {bounds['longest'] / 3600:.2f} h) | "
          f"makespan / bound: placer {p['makespan_h'] * 3600 / lb:.2f}, "
          f"naive {n['makespan_h'] * 3600 / lb:.2f}")
    ok = p["mean_us"] < 1000 and p["p99_us"] < 1000 and p["util_dom"] > 0.9
    print(f"target: < 1 ms per decision (mean and p99) and > 90% utilization (dominant): "
          f"{'met' if ok else 'MISSED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
