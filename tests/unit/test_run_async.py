"""run_async can be called many times in one process (tests, notebooks, campaigns)."""

from __future__ import annotations

import asyncio

from harness.trial import _EXECUTOR, run_async


def test_run_async_twice_keeps_the_trial_executor_alive():
    async def work():
        await asyncio.to_thread(lambda: None)
        return await asyncio.wrap_future(_EXECUTOR.submit(lambda: 42))

    assert run_async(work()) == 42
    assert run_async(work()) == 42
