"""The oracle agent: uploads the task's solution/ to /solution and runs solve.sh there (a
Harbor task's in the image WORKDIR, as Harbor does), `[solution.env]` exported."""

from __future__ import annotations

import shlex

from harness.agents.base import Agent, AgentContext, AgentOutcome, task_workdir
from harness.errors import InputError


class OracleAgent(Agent):
    name = "oracle"

    def check_task(self, task) -> str | None:
        if not task.has_solution:
            return (f"{task.solution_dir / 'solve.sh'}: missing; the oracle agent runs the "
                    "task's reference solution (add solution/solve.sh or choose another agent)")
        return None

    async def run(self, instruction: str, env, ctx: AgentContext) -> AgentOutcome:
        task = ctx.task
        if not task.has_solution:
            raise InputError("the oracle needs solution/solve.sh", file=str(task.solution_dir))
        workdir = task_workdir(env, task) or "/solution"
        exports = "".join(f"export {k}={shlex.quote(v)}; "
                          for k, v in task.config.solution.env.items())
        cmd = f"cd {shlex.quote(workdir)} && {exports}bash /solution/solve.sh"
        res = await env.exec(cmd, timeout=ctx.timeout_sec,
                             source="oracle", files=(task.solution_dir, "/solution"))
        error = None if res.ok or res.timed_out else \
            f"solve.sh exited {res.exit_code}: {res.stderr.strip()[-300:]}"
        return AgentOutcome(exit_code=res.exit_code, timed_out=res.timed_out, error=error)
