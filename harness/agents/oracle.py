"""The oracle agent: uploads the task's solution/ and runs solve.sh."""

from __future__ import annotations

from harness.agents.base import Agent, AgentContext, AgentOutcome
from harness.errors import InputError


class OracleAgent(Agent):
    name = "oracle"

    async def run(self, instruction: str, env, ctx: AgentContext) -> AgentOutcome:
        task = ctx.task
        if not task.has_solution:
            raise InputError("the oracle needs solution/solve.sh", file=str(task.solution_dir))
        res = await env.exec("cd /solution && bash /solution/solve.sh", timeout=ctx.timeout_sec,
                             source="oracle", files=(task.solution_dir, "/solution"))
        error = None if res.ok or res.timed_out else \
            f"solve.sh exited {res.exit_code}: {res.stderr.strip()[-300:]}"
        return AgentOutcome(exit_code=res.exit_code, timed_out=res.timed_out, error=error)
