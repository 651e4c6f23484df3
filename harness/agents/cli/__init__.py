"""CLI agents: a coding agent's own CLI, run on the primary node.

`claude-code`, `codex`, `gemini-cli`, `opencode`, `qwen-code`, `mini-swe-agent` and `aider`
differ only in a `CliSpec` (harness.agents.cli.specs). Pre-window (`setup`), the CLI's
bundle (harness.agents.bundles: made on the controller from npm or PyPI, cached, prepared
once under a lock) is put into the node at /opt/hx-agent/bundle and its entry is checked;
the trial needs no network for it. `bundle=False` uses a CLI the task image already has
(`command -v`), or installs it from a mirror the trial network reaches (`npm_registry`,
`pip_index`). With the model gateway (a `models:` name, `scripted:FILE` or `local`), the
CLI gets the gateway's base URL and the trial's token in the shape it reads (variables, a
settings file, flags), its telemetry and update checks off. In the window (`run`) the
instruction is uploaded to `PROMPT` and the CLI reads it from there; keys and tokens go only
into the exec's environment (never into a command line or a file); the run is capped by
the task's agent timeout; stdout and stderr, redacted, go to `agent/agent.log` and the
CLI's own event stream to `agent/session.jsonl`; the commands it spawns are read back by
the node's command log. The bundle's version is the agent version in result.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shlex
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from harness.agents import bundles
from harness.agents.base import Agent, AgentContext, AgentOutcome, task_workdir
from harness.agents.cli.parsers import (  # noqa: F401  (re-exported for callers and tests)
    Usage,
    json_objects,
    parse_aider,
    parse_claude,
    parse_codex,
    parse_gemini,
    parse_opencode,
)
from harness.agents.cli.session import Session, read_session
from harness.agents.cli.specs import SPECS, TOKEN, CliSpec
from harness.agents.prices import cost_usd
from harness.config import load_settings
from harness.errors import ConfigError, HarnessError
from harness.gateway.models import is_gateway_model, resolve

PROMPT_DIR = "/opt/hx-agent"
PROMPT = f"{PROMPT_DIR}/instruction.md"
_ASK = f'"$(cat {PROMPT})"'
SESSION_MAX = 16 << 20


class AgentSetupError(HarnessError):
    """An agent could not be prepared before the window (retried, never scored)."""


class CliAgent(Agent):
    """A coding-agent CLI on the primary node; subclasses only name their `CliSpec`.

    kwargs: `version` (the CLI's version; default: the one first prepared, else the
    registry's latest; also `--agent NAME@VERSION`), `bundle` (False: the task image's own
    CLI), `npm_registry` / `pip_index` (with `bundle=False`: a mirror reachable from the
    trial network), `workdir` (default: the image WORKDIR for Harbor tasks, else /root),
    `extra_args` (appended to the CLI's flags), `prices` (overrides for
    harness.agents.prices).
    """

    spec: ClassVar[CliSpec]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.node_memory_mb, cls.keys = cls.spec.memory_mb, cls.spec.keys

    def __init__(self, model: str | None = None, version: str | None = None,
                 bundle: bool = True, npm_registry: str | None = None,
                 pip_index: str | None = None, install: bool = True, workdir: str | None = None,
                 extra_args: str = "", prices: dict | None = None, **kwargs: Any):
        super().__init__(model=model, **kwargs)
        self.pin, self.use_bundle = version, bundle
        self.npm_registry = npm_registry or os.environ.get("HARNESS_NPM_REGISTRY")
        self.pip_index = pip_index or os.environ.get("HARNESS_PIP_INDEX")
        self.install, self.workdir, self.extra_args = install, workdir, extra_args
        self.prices = prices
        self.entry = self.spec.binary
        self._checked = False

    def install_script(self) -> str:
        """Shell that installs the CLI from a mirror; its last stdout line says why when it
        fails."""
        s = self.spec
        if s.installer == "pip":
            index = f" --index-url {shlex.quote(self.pip_index)}" if self.pip_index else ""
            return ("python3 -m pip --version >/dev/null 2>&1 || { echo 'pip is not installed';"
                    " exit 3; }; python3 -m pip install -q --retries 0 --timeout 15 "
                    f"--break-system-packages{index} {s.package} >/tmp/hx-agent-install.log "
                    "2>&1 || { echo \"pip install failed: $(tail -n 1 "
                    "/tmp/hx-agent-install.log)\"; exit 5; }; command -v " + s.binary)
        reg = f" --registry {shlex.quote(self.npm_registry)}" if self.npm_registry else ""
        return ("command -v npm >/dev/null 2>&1 || { echo 'npm is not installed'; exit 3; }; "
                f"timeout 20 npm ping{reg} >/dev/null 2>&1 || {{ echo \"the npm registry "
                f"$(npm config get registry{reg}) is unreachable from the node\"; exit 4; }}; "
                f"npm install -g{reg} {s.package} >/tmp/hx-agent-install.log 2>&1 || {{ "
                "echo \"npm install failed: $(tail -n 1 /tmp/hx-agent-install.log)\"; exit 5; }; "
                f"command -v {s.binary}")

    def check_task(self, task) -> str | None:
        """Before anything is provisioned: the bundle is made if missing (once, under a
        lock: `harness run` and `campaign plan|apply` come here first), so that an unknown
        agent version or an unreachable registry is a clear error now."""
        if self.use_bundle and not self._checked:
            settings = load_settings()
            if not self.model:
                raise ConfigError(f"{self.name} needs --model: a name of config.yaml's "
                                  "models:, PROVIDER/MODEL, local or scripted:FILE (its calls "
                                  "go through the harness's model gateway)", key="--model")
            if not is_gateway_model(self.model, settings):
                resolve(self.model, settings)  # raises: which names are valid
            bundle = bundles.ensure(self.name, self.pin, platform.machine())
            self.pin, self._checked = bundle.version, True
        return None

    def node_files(self) -> Path | None:
        """The agent's bundle store (`bundles.NODE_STORE` in the node)."""
        return bundles.agent_dir(self.name) if self.use_bundle else None

    async def setup(self, env) -> None:
        if self.use_bundle:
            await self._install_bundle(env)
            return
        s = self.spec
        if (await env.exec(f"command -v {s.binary}", timeout=30, record=False)).ok:
            return
        reason = "installing is disabled (install=False)"
        if self.install:
            res = await env.exec(self.install_script(), timeout=900, record=False)
            if res.ok:
                return
            reason = (res.stdout.strip().splitlines() or [res.stderr.strip()[-200:]])[-1]
        how = f"RUN npm install -g {s.package}" if s.installer == "npm" else \
            f"RUN pip install {s.package}"
        kwarg = "npm_registry" if s.installer == "npm" else "pip_index"
        raise AgentSetupError(
            f"{self.name}: `{s.binary}` is not on node {env.primary.name} and could not be "
            f"installed ({reason}). Trial networks have no route out: use the bundle (the "
            f"default), put the CLI in the task image (environment/Dockerfile: `{how}`) or "
            f"pass {kwarg}=<a mirror reachable from the trial network>.")

    async def _install_bundle(self, env) -> None:
        """The CLI's bundle for the node's architecture (and Python), made on the controller
        if missing, put into the node."""
        probe = await env.exec("uname -m; python3 -c 'import sys; print(\"%d.%d\" % "
                               "sys.version_info[:2])' 2>/dev/null || true", timeout=60,
                               record=False)
        lines = probe.stdout.split()
        arch = lines[0] if lines else "x86_64"
        python = lines[1] if len(lines) > 1 and self.spec.installer == "pip" else None
        if self.spec.installer == "pip" and python is None:
            raise AgentSetupError(f"{self.name} runs on the node's own Python, and node "
                                  f"{env.primary.name} has no python3")
        bundle = await asyncio.to_thread(bundles.ensure, self.name, self.pin, arch, python)
        await bundles.install(bundle, env)
        self.entry, self.version = bundle.entry, bundle.version

    def cli_model(self, gateway: bool) -> str | None:
        """The model name the CLI is given: under the gateway a name the CLI accepts (the
        gateway serves the trial's upstream whatever it is), else the agent's model."""
        return self.spec.gateway_model if gateway else self.model

    def command_line(self, workdir: str | None = None, gw: dict[str, str] | None = None
                     ) -> str:
        workdir = self.workdir or workdir or "/root"
        model = self.cli_model(gw is not None)
        flags = f"{self.spec.model_flag} {shlex.quote(model)} " if model else ""
        if gw is not None:
            flags += self.spec.gateway_flags(gw, model)
        if self.extra_args:
            flags += f"{self.extra_args} "
        cmd = self.spec.command.format(bin=shlex.quote(self.entry), flags=flags, prompt=_ASK)
        return f"cd {shlex.quote(workdir)} 2>/dev/null || cd /; {cmd} </dev/null"

    def exec_env(self, ctx: AgentContext) -> dict[str, str]:
        """With the model gateway: what points the CLI at it (base URL, the trial's token).
        Otherwise the keys from the context (never from a file) and their aliases. Then
        the CLI's own settings (telemetry and updates off)."""
        s = self.spec
        gw = self.gateway_vars(ctx)
        if gw is not None:
            return {**s.gateway(gw, self.cli_model(True)), **s.env}
        env = {k: v for k, v in ctx.env_vars.items() if k in self.keys}
        env.update({alias: env[k] for alias, k in s.aliases.items() if k in env})
        env.update({k: os.environ[k] for k in s.passthrough if os.environ.get(k)})
        return {**env, **s.env}

    @staticmethod
    def gateway_vars(ctx: AgentContext) -> dict[str, str] | None:
        return dict(ctx.env_vars) if TOKEN in ctx.env_vars else None

    async def run(self, instruction: str, env, ctx: AgentContext) -> AgentOutcome:
        gw = self.gateway_vars(ctx)
        exec_env = self.exec_env(ctx)
        for name, value in ctx.env_vars.items():  # keys and the token (base URLs are not)
            if value and value not in env.secrets and not name.endswith("_BASE_URL"):
                env.secrets.append(value)
        files = self.spec.files(gw or {}, self.cli_model(gw is not None))
        with tempfile.TemporaryDirectory() as tmp:
            prompt = Path(tmp) / Path(PROMPT).name
            prompt.write_text(instruction)
            await env.put(prompt, PROMPT_DIR)
            for n, (path, text) in enumerate(files.items()):  # settings files: no secrets
                local = Path(tmp) / f"f{n}" / Path(path).name
                local.parent.mkdir()
                local.write_text(text)
                await env.put(local, str(Path(path).parent))
        cmd = self.command_line(task_workdir(env, ctx.task), gw)
        res = await env.exec(cmd, timeout=ctx.timeout_sec, env=exec_env)
        usage = self.spec.parse(res.stdout)
        cost = usage.cost_usd if usage.cost_usd is not None else \
            cost_usd(self.model, usage.tokens, self.prices)
        self._write_log(env, cmd, exec_env, res)
        await self._collect_session(env)
        error = None
        if not res.timed_out and res.exit_code != 0:
            tail = (res.stderr.strip() or res.stdout.strip())[-300:]
            error = f"{self.spec.binary} exited {res.exit_code}: {tail}"
            if res.exit_code == 137:
                error += (" (killed by SIGKILL: the node's memory limit is the usual cause; "
                          "the task's memory_mb plus the agent's own)")
        elif usage.error and not res.timed_out:
            error = f"{self.spec.binary} reported an error: {usage.error}"
        return AgentOutcome(exit_code=res.exit_code, timed_out=res.timed_out,
                            error=env.redact(error), tokens=usage.tokens, cost_usd=cost)

    def session(self, agent_dir: Path) -> Session | None:
        return read_session(self.name, agent_dir)

    async def _collect_session(self, env) -> None:
        """The CLI's own trajectory file, if it writes one: a bounded, redacted copy in the
        trial's agent dir (what the node wrote is data, never a path the harness opens)."""
        path = self.spec.session_file
        if not path:
            return
        res = await env.exec(f"head -c {SESSION_MAX} {shlex.quote(path)}", timeout=60,
                             record=False)
        if res.ok and res.stdout:
            dest = env.paths.agent_log.parent / f"session-{Path(path).name}"
            dest.write_text(env.redact(res.stdout) or "")

    def _write_log(self, env, cmd: str, exec_env: dict[str, str], res) -> None:
        shown = {**self.spec.env, "OPENCODE_CONFIG_CONTENT": None}
        names = ", ".join(f"{k}={v}" if shown.get(k) else f"{k}=[set]"
                          for k, v in sorted(exec_env.items()))
        text = (f"$ {cmd}\n# env: {names or '(none)'}\n# exit {res.exit_code}"
                f"{' (timed out)' if res.timed_out else ''} after {res.seconds:.1f}s\n"
                f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}\n")
        env.paths.agent_log.parent.mkdir(parents=True, exist_ok=True)
        with env.paths.agent_log.open("a") as fh:
            fh.write(env.redact(text) or "")
        events = json_objects(res.stdout)
        if events:  # the CLI's own event stream (stream-json, JSONL), for the trajectory
            lines = "".join(env.redact(json.dumps(e)) + "\n" for e in events)
            (env.paths.agent_log.parent / "session.jsonl").write_text(lines)


def _agent_class(name: str, spec: CliSpec) -> type[CliAgent]:
    """The agent class of one CLI: its name and spec, nothing else (the registry finds it
    in this module's namespace)."""
    title = "".join(part.title() for part in name.split("-"))
    return type(title if title.endswith("Agent") else f"{title}Agent", (CliAgent,), {
        "name": name, "spec": spec, "__module__": __name__,
        "__doc__": f"The {name} CLI ({spec.package}), run headless through the gateway."})


# one class per CliSpec: adding a CLI is adding its spec (specs.py) and its bundle recipe
globals().update({cls.__name__: cls for cls in (_agent_class(n, s) for n, s in SPECS.items())})
