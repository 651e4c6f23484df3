"""The ScenarioController axis: what runs beside the agent during its window.

A task's `scenario.py` defines `class Scenario(ScenarioController)`::

    from harness.trial.scenario import CompletionMode, ScenarioController

    class Scenario(ScenarioController):
        completion = CompletionMode.SCENARIO_DRIVEN

        async def execute(self, api):
            await api.wait(5)
            cut = await api.inject("partition", targets="minority")
            await api.wait_for("agent.exit")
            await api.heal(cut.id)

Completion modes decide when the window closes:

- `AGENT_EXIT` (default): when the agent exits; the scenario is then cancelled.
- `TIMEBOXED`: after `timebox_sec` (default: the agent's timeout), whatever the agent does;
  an agent still working then is stopped, a scenario still running is cancelled.
- `SCENARIO_DRIVEN`: when `execute()` returns; an agent still working then is stopped.

`verifier_interval_sec` runs a periodic verifier beside the agent (the `probe` command if
set, else `tests/test.sh`) and reports each result to `on_verifier`. Note that running
test.sh during the window copies `tests/` onto the primary node for the run (it is removed
right after); use a probe when the agent must never see the tests.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import StrEnum
from typing import Any, ClassVar


class CompletionMode(StrEnum):
    AGENT_EXIT = "AGENT_EXIT"
    TIMEBOXED = "TIMEBOXED"
    SCENARIO_DRIVEN = "SCENARIO_DRIVEN"


class ScenarioController(ABC):
    """Base class of task scenarios; `execute` is the only method to write."""

    completion: ClassVar[CompletionMode] = CompletionMode.AGENT_EXIT
    timebox_sec: ClassVar[float | None] = None
    verifier_interval_sec: ClassVar[float | None] = None
    probe: ClassVar[dict[str, Any] | None] = None
    seed: ClassVar[int | None] = None

    @abstractmethod
    async def execute(self, api) -> None:
        """The scenario: inject, wait, probe, heal through `api` (a ScenarioAPI)."""

    async def on_teardown(self, api) -> None:
        """Runs once the window has closed, before the gates (default: nothing)."""

    async def on_verifier(self, api, result) -> None:
        """Each periodic verifier or probe result (default: nothing; all are in events)."""
