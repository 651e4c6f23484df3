"""Host capacity: the queue never starts more trials than memory and cores allow.

A trial of a substrate that `holds_capacity` (VMs) holds its planned memory and vCPUs from
a pool sized by the host (`/proc/meminfo`, `os.cpu_count()`) times a configurable
over-commit; a trial that could never fit alone (on any substrate) is refused before
anything starts.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import asynccontextmanager

from harness.errors import InputError
from harness.substrates.common import HOST_RESERVE_MB, host_memory_mb


class CapacityPool:
    """Memory (MiB) and vCPUs shared by concurrently running trials that hold them."""

    def __init__(self, memory_mb: int | None = None, cpus: int | None = None,
                 memory_overcommit: float = 1.0, cpu_overcommit: float = 4.0):
        mem = (memory_mb if memory_mb is not None else host_memory_mb() - HOST_RESERVE_MB)
        self.memory_mb = int(mem * memory_overcommit)
        self.cpus = int((cpus or os.cpu_count() or 1) * cpu_overcommit)
        self.used_mb = self.used_cpus = 0
        self._cond = asyncio.Condition()

    def check(self, trial_id: str, memory_mb: int, cpus: int) -> None:
        if memory_mb > self.memory_mb or cpus > self.cpus:
            raise InputError(f"trial {trial_id} needs {memory_mb} MiB and {cpus} vCPUs; this "
                             f"host offers {self.memory_mb} MiB and {self.cpus} vCPUs (after "
                             "over-commit); lower memory_mb/cpus in task.toml or raise "
                             "capacity.memory_overcommit / cpu_overcommit",
                             key="environment.memory_mb")

    @asynccontextmanager
    async def hold(self, memory_mb: int, cpus: int):
        async with self._cond:
            await self._cond.wait_for(lambda: self.used_mb + memory_mb <= self.memory_mb
                                      and self.used_cpus + cpus <= self.cpus)
            self.used_mb += memory_mb
            self.used_cpus += cpus
        try:
            yield
        finally:
            async with self._cond:
                self.used_mb -= memory_mb
                self.used_cpus -= cpus
                self._cond.notify_all()
