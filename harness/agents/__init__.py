"""Agent registry: name -> lazily imported class; errors list every valid name."""

from __future__ import annotations

import importlib

from harness.agents.base import Agent, AgentContext, AgentOutcome
from harness.errors import RegistryError

_REGISTRY: dict[str, str] = {
    "oracle": "harness.agents.oracle:OracleAgent",
    "nop": "harness.agents.nop:NopAgent",
    "replay": "harness.agents.replay:ReplayAgent",
    "claude-code": "harness.agents.cli:ClaudeCodeAgent",
    "codex": "harness.agents.cli:CodexAgent",
    "gemini-cli": "harness.agents.cli:GeminiCliAgent",
    "opencode": "harness.agents.cli:OpenCodeAgent",
    "aider": "harness.agents.cli:AiderAgent",
    "openai": "harness.agents.openai_agent:OpenAIAgent",
}

__all__ = ["Agent", "AgentContext", "AgentOutcome", "get_agent", "names"]


def names() -> list[str]:
    return sorted(_REGISTRY)


def get_agent(name: str, model: str | None = None, **kwargs) -> Agent:
    if name not in _REGISTRY:
        raise RegistryError("agent", name, names())
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)(model=model, **kwargs)
