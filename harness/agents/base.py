"""The Agent interface: what is evaluated in a trial's window."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from harness import __version__


@dataclass
class AgentContext:
    """What an agent is given besides the instruction."""

    trial_id: str
    task: Any
    timeout_sec: float
    env_vars: dict[str, str] = field(default_factory=dict)


@dataclass
class AgentOutcome:
    """How the agent's window ended."""

    exit_code: int | None = 0
    timed_out: bool = False
    error: str | None = None
    tokens: dict[str, int | None] = field(
        default_factory=lambda: {"input": None, "output": None, "cache": None})
    cost_usd: float | None = None


def task_workdir(env, task) -> str | None:
    """Where agent and oracle commands start: the image's WORKDIR for Harbor tasks whose
    image sets one (as Harbor runs them), else None (the agent's own default)."""
    if getattr(task, "format", "harness") != "harbor":
        return None
    return (env.primary.extra or {}).get("workdir") or None


class Agent(ABC):
    """An agent under evaluation. Subclasses are registered by name in harness.agents."""

    name: ClassVar[str]
    version: ClassVar[str] = __version__
    node_memory_mb: ClassVar[int] = 0   # memory its own program needs on the primary node
    keys: ClassVar[tuple[str, ...]] = ()  # the caller's variables it needs (its API keys)

    def __init__(self, model: str | None = None, **kwargs: Any):
        self.model = model
        self.kwargs = kwargs

    def check_task(self, task) -> str | None:
        """Why this agent cannot run `task` at all (checked before anything is
        provisioned), or None."""
        return None

    async def setup(self, env) -> None:
        """Install or prepare what the agent needs (pre-window: failures are retried)."""

    def node_files(self) -> Path | None:
        """A directory of this machine that its program comes from, which a substrate that
        can (a local engine) mounts read-only into the primary node before `setup`, so that
        setup copies nothing; None (the default): setup copies what it needs."""
        return None

    @abstractmethod
    async def run(self, instruction: str, env, ctx: AgentContext) -> AgentOutcome:
        """Work on the task inside the window; return how it ended."""

    def session(self, agent_dir) -> Any:
        """What the agent's own session log (kept in the trial's `agent_dir`) adds to the
        ATIF export: an object with `results` (tool call id -> output), `ordered` (outputs
        in order, for calls without ids) and `info`; None when it keeps none."""
        return None
