"""The nop agent: does nothing; the baseline every task must fail."""

from __future__ import annotations

from harness.agents.base import Agent, AgentContext, AgentOutcome


class NopAgent(Agent):
    name = "nop"

    async def run(self, instruction: str, env, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome(exit_code=0)
