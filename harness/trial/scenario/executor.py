"""The agent window with a scenario beside it: completion modes and the periodic verifier.

`run_window(agent_coro, timeout, scenario, api)` behaves like
`asyncio.wait_for(agent_coro, timeout)` when there is no scenario (same outcome, same
TimeoutError, same agent exceptions), and otherwise closes the window according to the
scenario's completion mode (see harness.trial.scenario.controller). An agent stopped by the
scenario or the time box ends with `AgentOutcome(exit_code=None)` and an `agent.stopped`
event; a failing scenario is recorded (`scenario.error`) and never crashes the trial.
"""

from __future__ import annotations

import asyncio
import contextlib

from harness.agents import AgentOutcome
from harness.trial.scenario.controller import CompletionMode, ScenarioController

TEARDOWN_TIMEOUT = 120.0


async def _cancel(task: asyncio.Task | None) -> None:
    if task is not None and not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


class Window:
    """One agent window: the agent task, the scenario task, the periodic verifier."""

    def __init__(self, scenario: ScenarioController, api, timeout: float):
        self.scenario, self.api, self.timeout = scenario, api, timeout
        self.error: str | None = None

    async def _scenario(self) -> None:
        try:
            await self.scenario.execute(self.api)
            self.api.emit("done")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.api.emit("error", error=self.error[:2000])

    async def _periodic(self) -> None:
        interval = self.scenario.verifier_interval_sec
        probe = self.scenario.probe
        while True:
            await asyncio.sleep(interval)
            try:
                if probe:
                    result = await self.api.probe(probe["cmd"], probe.get("node"),
                                                  probe.get("timeout_sec", 30))
                    self.api.rewards.append((self.api.elapsed, result.reward))
                else:
                    result = await self.api.verify()
                await self.scenario.on_verifier(self.api, result)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broken sample is an event, not the end
                self.api.emit("error", step="periodic verifier", error=str(exc)[:500])

    async def run(self, agent_coro) -> AgentOutcome:
        api, mode = self.api, self.scenario.completion
        api.restart_clock()
        api.signal("window.start", completion=mode.value)
        agent = asyncio.create_task(agent_coro)
        agent.add_done_callback(lambda _t: api.signal("agent.exit"))
        scen = asyncio.create_task(self._scenario())
        periodic = (asyncio.create_task(self._periodic())
                    if self.scenario.verifier_interval_sec else None)
        try:
            if mode == CompletionMode.AGENT_EXIT:
                await asyncio.wait({agent}, timeout=self.timeout)
            elif mode == CompletionMode.TIMEBOXED:
                await asyncio.sleep(min(self.scenario.timebox_sec or self.timeout,
                                        self.timeout))
            else:
                await asyncio.wait({scen}, timeout=self.timeout)
                if not scen.done():
                    api.emit("timeout", after_sec=self.timeout)
        finally:
            stopped, finished = not agent.done(), scen.done()
            await _cancel(periodic)
            await _cancel(scen)
            await _cancel(agent)
            for timer in list(api.timers):
                await _cancel(timer)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.scenario.on_teardown(api), TEARDOWN_TIMEOUT)
        if stopped:
            if mode == CompletionMode.AGENT_EXIT or (
                    mode == CompletionMode.SCENARIO_DRIVEN and not finished):
                raise TimeoutError(f"agent still running after {self.timeout:.0f}s")
            api.emit("agent.stopped", completion=mode.value)
            return AgentOutcome(exit_code=None)
        return agent.result()


async def run_window(agent_coro, timeout: float, scenario: ScenarioController | None = None,
                     api=None) -> AgentOutcome:
    """The agent's window, with the scenario (if any) running beside it."""
    if scenario is None:
        return await asyncio.wait_for(agent_coro, timeout)
    window = Window(scenario, api, timeout)
    try:
        return await window.run(agent_coro)
    finally:
        api.error = window.error
