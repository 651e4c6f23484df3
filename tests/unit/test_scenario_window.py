"""Completion modes of the agent window, with small in-process agents and scenarios (no
environment: these scenarios only wait, emit and wait for signals)."""

from __future__ import annotations

import asyncio

import pytest

from harness.agents import AgentOutcome
from harness.trial.scenario import CompletionMode, ScenarioAPI, ScenarioController, run_window


class Events(list):
    def __call__(self, name, **data):
        self.append((name, data))

    @property
    def names(self):
        return [n if n != "scenario.signal" else f"signal:{d['signal']}" for n, d in self]


def api() -> ScenarioAPI:
    return ScenarioAPI(env=None, task=None, faults=None, event=Events())


async def agent(seconds: float, exit_code: int = 0) -> AgentOutcome:
    await asyncio.sleep(seconds)
    return AgentOutcome(exit_code=exit_code)


class Waits(ScenarioController):
    def __init__(self, mode, seconds=0.3, box=None):
        self.completion, self.seconds, self.timebox_sec = mode, seconds, box
        self.torn_down = False

    async def execute(self, api):
        api.emit("begin")
        await api.wait(self.seconds)
        api.emit("end")

    async def on_teardown(self, api):
        self.torn_down = True


def run(coro):
    return asyncio.run(coro)


def test_no_scenario_is_wait_for():
    assert run(run_window(agent(0.01, 3), 1)).exit_code == 3
    with pytest.raises(TimeoutError):
        run(run_window(agent(1), 0.05))


def test_agent_exit_cancels_the_scenario():
    a, scen = api(), Waits(CompletionMode.AGENT_EXIT, seconds=5)
    out = run(run_window(agent(0.05, 0), 5, scen, a))
    assert out.exit_code == 0 and scen.torn_down
    assert "scenario.begin" in a._event.names and "scenario.end" not in a._event.names
    assert a._event.names.index("signal:agent.exit") > a._event.names.index("signal:window.start")


def test_agent_exit_timeout_is_agent_timeout():
    with pytest.raises(TimeoutError):
        run(run_window(agent(5), 0.1, Waits(CompletionMode.AGENT_EXIT), api()))


def test_timeboxed_runs_the_whole_box_and_stops_the_agent():
    a = api()
    t = asyncio.run(_timed(run_window(agent(0.01), 5, Waits(CompletionMode.TIMEBOXED, 5,
                                                            box=0.3), a)))
    assert t[1] >= 0.3 and t[0].exit_code == 0
    b = api()
    out = run(run_window(agent(5), 5, Waits(CompletionMode.TIMEBOXED, 5, box=0.2), b))
    assert out.exit_code is None and "scenario.agent.stopped" in b._event.names


async def _timed(coro):
    loop = asyncio.get_running_loop()
    start = loop.time()
    out = await coro
    return out, loop.time() - start


def test_scenario_driven_waits_for_the_scenario_then_stops_the_agent():
    a = api()
    out, secs = run(_timed(run_window(agent(0.01), 5, Waits(CompletionMode.SCENARIO_DRIVEN,
                                                             0.3), a)))
    assert out.exit_code == 0 and secs >= 0.3
    assert a._event.names[-1] == "scenario.done"
    b = api()
    out = run(run_window(agent(5), 5, Waits(CompletionMode.SCENARIO_DRIVEN, 0.1), b))
    assert out.exit_code is None and "scenario.agent.stopped" in b._event.names
    with pytest.raises(TimeoutError):
        run(run_window(agent(5), 0.2, Waits(CompletionMode.SCENARIO_DRIVEN, 5), api()))


class Fails(ScenarioController):
    completion = CompletionMode.SCENARIO_DRIVEN

    async def execute(self, api):
        await api.wait_for("agent.exit")
        raise RuntimeError("injector broke")


def test_failing_scenario_is_recorded_not_raised():
    a = api()
    out = run(run_window(agent(0.05, 0), 5, Fails(), a))
    assert out.exit_code == 0
    assert a.error == "RuntimeError: injector broke"
    assert ("scenario.error" in a._event.names)


def test_timeline_waits_for_agent_exit():
    from harness.trial.scenario.timeline import TimelineFile, TimelineScenario

    doc = TimelineFile.model_validate({"completion": "SCENARIO_DRIVEN", "timeline": [
        {"after_event": "agent.exit", "delay_sec": 0.1, "name": "settled"},
        {"at_sec": 0.05, "name": "early"}]})
    a = api()
    run(run_window(agent(0.2), 5, TimelineScenario(doc), a))
    names = a._event.names
    assert names.index("scenario.early") < names.index("signal:agent.exit") \
        < names.index("scenario.settled") < names.index("scenario.done")


class SlowNode:
    """A node whose commands take `seconds` (in a thread, as a real exec's wait does)."""

    def __init__(self, seconds: float):
        self.seconds, self.running, self.primary = seconds, 0, type("N", (), {"name": "node0"})

    def _command(self) -> None:
        self.running += 1
        __import__("time").sleep(self.seconds)
        self.running -= 1

    async def exec(self, cmd, timeout, node=None, record=True):
        from harness.substrates.base import ExecResult

        await asyncio.to_thread(self._command)
        return ExecResult(0, "ok", "", self.seconds)


def test_a_probe_cut_off_by_the_window_has_ended_when_the_window_returns():
    """The window closes while a periodic probe runs: the window waits for the probe's
    command to end (the verifier must not find the harness's own probe still running on
    the node) and records it as cut off, without a verdict."""
    env = SlowNode(0.6)
    a = ScenarioAPI(env=env, task=None, faults=None, event=Events())
    scen = Waits(CompletionMode.AGENT_EXIT)
    scen.verifier_interval_sec, scen.probe = 0.1, {"cmd": "etcdctl put k v"}

    async def window():
        outcome = await run_window(agent(0.3), 5, scen, a)
        return outcome, env.running

    outcome, running = run(window())
    assert outcome.exit_code == 0 and running == 0
    probes = [d for n, d in a._event if n == "scenario.probe"]
    assert probes and probes[-1]["cut_off"] is True and probes[-1]["ok"] is None
