"""Which waiting trial goes next: fair across configurations, no starving large trials.

`submit` queues trials; `dispatch` places them while any fits and returns what to start:

- fairness: the configuration (agent and model) with the fewest placements so far goes
  first (a deficit counter; one that becomes active starts level with the least-served
  active one, so it neither waits nor gets a burst), then the one listed first;
- within a configuration: trials of the shape the hosts can hold fewest of at once first
  (`_width`: large VMs and substrates only some hosts run before small containers; first-fit
  decreasing packs better and keeps container-only hosts busy to the end), then the older;
  a trial that fits nowhere now does not block the others;
- no starving: when a configuration's first trial fits nowhere, a host is reserved for it
  (the one closest to holding it); nothing else starts there unless that trial still fits
  beside it. At most a tenth of the hosts (at least one) are reserved at a time.

The host for each trial is `HostPools._choose` (spread, balance, seeded rank).

`AsyncPlacer.hold(trial)` is the asyncio entry point of `TrialQueue._one`: it queues the
trial, waits until the fair dispatch gives it a host, yields the host's name and gives the
room back on exit (also on cancellation, waiting or running). A trial no host could ever
hold fails at once with `NoHostError` (the queue should have refused it with `check`), and
`drain(host)` fails the waiters no remaining host could hold, so nobody waits forever.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import itertools
from contextlib import asynccontextmanager
from typing import Any

from harness.errors import HarnessError
from harness.placement.hosts import HostsFile, HostSpec
from harness.placement.pools import Demand, HostPools, Shape

Heap = list[tuple[int, Demand]]


class _Agent:
    """A configuration's waiting trials: a heap (oldest first) per shape, and its shapes
    in dispatch order (width, shape)."""

    __slots__ = ("order", "served", "queues", "shapes", "waiting")

    def __init__(self, order: int):
        self.order, self.served, self.waiting = order, 0, 0
        self.queues: dict[Shape, Heap] = {}
        self.shapes: list[tuple[int, Shape]] = []


class Placer(HostPools):
    """Per-host pools plus a fair queue; synchronous and deterministic per seed.

    Direct use: `place(trial)` -> host or None, `release(trial, host)`. Queue use:
    `submit(trial)` for every trial, then `dispatch()` -> [(trial_id, host)] to start, after
    each submit, release or drain. `drain(host)` takes a failed host out; `stranded()` then
    lists the waiting trials no usable host could hold.
    """

    def __init__(self, hosts: HostsFile | list[HostSpec], *, cpu_overcommit: float = 4.0,
                 memory_overcommit: float = 1.0, seed: int = 0):
        super().__init__(hosts, cpu_overcommit=cpu_overcommit,
                         memory_overcommit=memory_overcommit, seed=seed)
        self._agents: dict[str, _Agent] = {}
        self._waiting: dict[str, Demand] = {}
        self._seq: dict[str, int] = {}
        self._counter = itertools.count()
        self._reserved: dict[str, int] = {}  # trial id -> host index
        self._rshapes: set[Shape] = set()  # their shapes
        self._widths: dict[Shape, int] = {}
        self._reopened = 0  # counts reservations given up (room for others came back)
        self.max_reserved = max(1, len(self._pools) // 10)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _width(self, shape: Shape) -> int:
        """How many trials of the shape all hosts could hold at once, idle."""
        width = self._widths.get(shape)
        if width is None:
            sub, cpus, mem = shape
            width = 0
            for i in self._eligible(sub):
                p = self._pools[i]
                n = p.slots[sub][1]
                n = min(n, p.cpus // cpus) if cpus else n
                width += min(n, p.memory_mb // mem) if mem else n
            self._widths[shape] = width
        return width

    def submit(self, trial: Any) -> None:
        """Queue a trial for `dispatch` (a re-submitted one keeps its place: first)."""
        d = Demand.of(trial)
        tid = d.trial_id
        if tid in self._waiting or tid in self._running:
            raise ValueError(f"trial {tid} is already waiting or placed")
        seq = self._seq.setdefault(tid, next(self._counter))
        agent = self._agents.get(d.config)
        if agent is None:
            agent = self._agents[d.config] = _Agent(len(self._agents))
        if agent.waiting == 0:
            active = [a.served for a in self._agents.values() if a.waiting]
            if active:
                agent.served = max(agent.served, min(active))
        heap = agent.queues.get(d.shape)
        if heap is None:
            heap = agent.queues[d.shape] = []
            bisect.insort(agent.shapes, (self._width(d.shape), d.shape))
        heapq.heappush(heap, (seq, d))
        agent.waiting += 1
        self._waiting[tid] = d
        self._hand_reservation(d, seq)

    def _hand_reservation(self, d: Demand, seq: int) -> None:
        """A re-submitted trial (its host drained) goes first among its configuration's
        trials of its shape: a host reserved for a later one of them is now reserved for
        it (else the reservation would wait behind it forever)."""
        for rid, i in self._reserved.items():
            r = self._pools[i].reserved
            if r.config == d.config and r.shape == d.shape and self._seq[rid] > seq:
                del self._reserved[rid]
                self._reserved[d.trial_id] = i
                self._pools[i].reserved = d
                return

    def withdraw(self, trial_id: str) -> bool:
        """Take a waiting trial out of the queue; False when it is not waiting."""
        d = self._waiting.pop(trial_id, None)
        if d is None:
            return False
        self._agents[d.config].waiting -= 1
        self._unreserve(trial_id)
        return True

    def _unreserve(self, trial_id: str) -> None:
        i = self._reserved.pop(trial_id, None)
        if i is not None:
            self._pools[i].reserved = None
            self._rshapes = {self._pools[j].reserved.shape for j in self._reserved.values()}
            self._reopen(i)
            self._reopened += 1

    def _commit(self, d: Demand, i: int) -> str:
        self._unreserve(d.trial_id)
        return super()._commit(d, i)

    def _choose(self, d: Demand, also: int | None = None) -> int | None:
        return super()._choose(d, self._reserved.get(d.trial_id))

    def drain(self, host: str) -> list[str]:
        r = self._pools[self._index[host]].reserved
        if r is not None:
            self._unreserve(r.trial_id)
        return super().drain(host)

    def _first(self, agent: _Agent, ready: bool = True) -> Heap | None:
        """The heap holding the agent's next trial (`ready`: among those that may fit
        somewhere now, a reserved trial counting its host)."""
        cand, waiting, queues = self._cand, self._waiting, agent.queues
        reserved, rshapes = self._reserved, self._rshapes
        best, best_w, empty = None, 0, []
        for w, shape in agent.shapes:
            if best is not None and w > best_w:
                break
            blocked = False
            if ready:
                c = cand.get(shape)
                blocked = c is not None and not c
                if blocked and shape not in rshapes:
                    continue
            heap = queues[shape]
            while heap and waiting.get(heap[0][1].trial_id) is not heap[0][1]:
                heapq.heappop(heap)  # withdrawn or re-submitted
            if not heap:
                empty.append((w, shape))
                continue
            if blocked:
                i = reserved.get(heap[0][1].trial_id)
                if i is None or not self._pools[i].fits(shape):
                    continue
            if best is None or heap[0][0] < best[0][0]:
                best, best_w = heap, w
        for entry in empty:
            agent.shapes.remove(entry)
            del queues[entry[1]]
        return best

    def _active(self) -> list[_Agent]:
        return sorted((a for a in self._agents.values() if a.waiting),
                      key=lambda a: (a.served, a.order))

    def dispatch(self, limit: int | None = None) -> list[tuple[str, str]]:
        """Place waiting trials fairly while any fits: [(trial_id, host)] to start now."""
        out: list[tuple[str, str]] = []
        agents, reopened = self._active(), self._reopened
        while agents and (limit is None or len(out) < limit):
            heap = None
            while agents and (heap := self._first(agents[0])) is None:
                agents.pop(0)  # nothing of it fits now; capacity only shrinks in this call
            if heap is None:
                break
            agent, d = agents[0], heap[0][1]
            i = self._choose(d)
            if i is None:
                continue  # the shape fits nowhere now: skipped until a release
            heapq.heappop(heap)
            del self._waiting[d.trial_id]
            agent.waiting -= 1
            agent.served += 1
            out.append((d.trial_id, self._commit(d, i)))
            if self._reopened != reopened:  # a reservation given up: others may fit again
                agents, reopened = self._active(), self._reopened
            else:
                agents = sorted((a for a in agents if a.waiting),
                                key=lambda a: (a.served, a.order))
        if limit is None or len(out) < limit:
            self._reserve()
        return out

    def _reserve(self) -> None:
        """Reserve a host for each configuration's first trial that fits nowhere now."""
        if len(self._reserved) >= self.max_reserved:
            return
        for agent in self._active():
            heap = self._first(agent, ready=False)
            if heap is None:
                continue
            d = heap[0][1]
            cand = self._cand.get(d.shape)
            if d.trial_id in self._reserved or cand is None or cand:
                continue  # already reserved for, or not known to fit nowhere
            best, best_key = None, None
            for i in self._eligible(d.substrate):
                p = self._pools[i]
                if p.healthy and p.reserved is None and p.why_not(d) is None:
                    key = (p.shortfall(d), p.rank)
                    if best_key is None or key < best_key:
                        best, best_key = i, key
            if best is not None:
                self._pools[best].reserved = d
                self._reserved[d.trial_id] = best
                self._rshapes.add(d.shape)
                if len(self._reserved) >= self.max_reserved:
                    return

    def stranded(self) -> list[str]:
        """Waiting trials no usable host could hold any more (after a drain)."""
        memo: dict[Shape, bool] = {}
        out = []
        for tid, d in self._waiting.items():
            if d.shape not in memo:
                memo[d.shape] = bool(self.refuse_reasons(d))
            if memo[d.shape]:
                out.append(tid)
        return out


class NoHostError(HarnessError):
    """No usable host is left for a waiting trial (its hosts were drained)."""


class AsyncPlacer(Placer):
    """A `Placer` whose waiters are futures resolved by dispatch."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._futures: dict[str, tuple[Demand, asyncio.Future]] = {}

    def _wake(self) -> None:
        """Dispatch and hand hosts to their waiters (a waiter gone meanwhile gives its
        place back and the dispatch goes on)."""
        again = True
        while again:
            again = False
            for tid, host in self.dispatch():
                _, fut = self._futures.pop(tid, (None, None))
                if fut is None:
                    continue
                if fut.done():
                    self.release(tid, host)
                    again = True
                else:
                    fut.set_result(host)

    @asynccontextmanager
    async def hold(self, trial: Any):
        """Wait for a host, yield its name, release it on exit."""
        d = Demand.of(trial)
        reasons = self.refuse_reasons(d)
        if reasons:  # it would wait forever
            raise NoHostError(f"trial {d.trial_id}: no host can hold it: "
                              + "; ".join(reasons[:3]))
        fut = asyncio.get_running_loop().create_future()
        self._futures[d.trial_id] = (d, fut)
        self.submit(d)
        self._wake()
        try:
            host = await fut
        except BaseException:
            self._futures.pop(d.trial_id, None)
            if not self.withdraw(d.trial_id) and self._holds(d):
                self.release(d.trial_id)
                self._wake()
            raise
        try:
            yield host
        finally:
            if self._holds(d):
                self.release(d.trial_id)
                self._wake()

    def _holds(self, d: Demand) -> bool:
        """Whether this very request holds room (not a later one of the same trial id)."""
        entry = self._running.get(d.trial_id)
        return entry is not None and entry[1] is d

    def drain(self, host: str) -> list[str]:
        ids = super().drain(host)
        for tid in self.stranded():
            d, fut = self._futures.pop(tid, (None, None))
            self.withdraw(tid)
            if fut is not None and not fut.done():
                fut.set_exception(NoHostError(
                    f"trial {tid}: no usable host left for it after {host} was drained: "
                    + "; ".join(self.refuse_reasons(d)[:3])))
        return ids
