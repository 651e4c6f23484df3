"""The capacity pool never admits more VM trials than memory and cores allow."""

from __future__ import annotations

import asyncio

import pytest

from harness.errors import InputError
from harness.substrates.capacity import CapacityPool


def test_pool_bounds_concurrent_holders():
    pool = CapacityPool(memory_mb=3000, cpus=4, cpu_overcommit=1.0)
    peak = {"mem": 0, "now": 0}

    async def trial(mem: int):
        async with pool.hold(mem, 1):
            peak["now"] += mem
            peak["mem"] = max(peak["mem"], peak["now"])
            await asyncio.sleep(0.01)
            peak["now"] -= mem

    async def main():
        await asyncio.gather(*(trial(1024) for _ in range(6)))

    asyncio.run(main())
    assert peak["mem"] == 2048
    assert pool.used_mb == 0 and pool.used_cpus == 0


def test_overcommit_and_refusal():
    pool = CapacityPool(memory_mb=2000, cpus=2, memory_overcommit=1.5, cpu_overcommit=2.0)
    assert (pool.memory_mb, pool.cpus) == (3000, 4)
    pool.check("ok", 3000, 4)
    with pytest.raises(InputError, match="needs 4096 MiB and 1 vCPUs; this host offers 3000"):
        pool.check("big", 4096, 1)
