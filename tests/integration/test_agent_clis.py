"""The real agent CLIs, end to end on hello-docker (markers: docker, slow): each CLI's bundle
(made from npm or PyPI on first use, cached under $HARNESS_HOME/agents) goes into the
trial's container, the CLI runs headless against the model gateway's scripted model, and
its own shell tool (aider: its file edits) solves the task: reward 1.0, the model calls in
llm.jsonl, the commands the CLI spawned in the trajectory, its version in the record. The
caller's provider keys are set on the controller; a step of the conversation greps the
agent's environment, every process's environ and the disk for them: nothing. A
conversation that does nothing scores 0.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from harness.agents import bundles, get_agent
from harness.gateway.wiring import plan_for
from harness.trajectory import read_trajectory
from tests.conftest import SEED, docker_ready, labeled
from tests.integration.test_agents import files_containing, make_trial

pytestmark = [pytest.mark.docker, pytest.mark.slow,
              pytest.mark.skipif(docker_ready() is not None, reason=str(docker_ready()))]

KEY = "sk-cli-test-REALKEY-0b9d2e7c41"
SOLVE = ("mkdir -p /srv/hello && printf 'Hello, harness!\\n' > /srv/hello/greeting.txt "
         "&& chmod 0644 /srv/hello/greeting.txt")
# the pattern is a regex that matches the key but not its own command line (which the
# node's command log keeps); no $() or <(): gemini-cli refuses command substitution
PAT = "'sk-cli-test-REALKE[Y]'"
LOOK = (f"env | grep -c {PAT} | sed s/^/env=/; grep -l {PAT} /proc/*/environ 2>/dev/null "
        "| wc -l | sed s/^/proc=/; grep -rl --exclude-dir=proc --exclude-dir=sys "
        f"--exclude-dir=dev {PAT} / 2>/dev/null | wc -l | sed s/^/disk=/")
MINI_SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SHELL_CLIS = ["claude-code", "codex", "gemini-cli", "opencode", "qwen-code", "mini-swe-agent"]


def conversation(tmp_path, name: str, steps: list[dict]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(steps))  # YAML is a superset of JSON
    return f"scripted:{path}"


def run_cli(tmp_path, agent: str, model: str):
    trial = make_trial(SEED / "hello-docker", get_agent(agent, model=model), tmp_path,
                       gateway=plan_for(model))
    return trial, asyncio.run(trial.run())


@pytest.fixture(autouse=True)
def provider_keys(monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(var, KEY)


@pytest.mark.parametrize("agent", SHELL_CLIS)
def test_cli_solves_hello_docker_through_its_own_shell_tool(agent, tmp_path):
    # mini-swe-agent ends on its submit command (a plain answer is a format error to it)
    last = {"run": f"echo {MINI_SUBMIT}"} if agent == "mini-swe-agent" else \
        {"say": "Created /srv/hello/greeting.txt."}
    model = conversation(tmp_path, agent, [{"run": LOOK}, {"run": SOLVE}, last])
    trial, rec = run_cli(tmp_path, agent, model)
    assert rec.status == "passed" and rec.reward == 1.0, (rec.status, rec.error)
    assert rec.agent.version not in ("", "?") and rec.agent.version[0].isdigit()
    calls = [json.loads(x) for x in trial.paths.llm.read_text().splitlines()]
    assert len([c for c in calls if c["status"] == 200]) >= 3, calls
    assert rec.tokens["input"] and rec.tokens["output"]
    spawned = [r for r in read_trajectory(trial.paths.trajectory) if r.source == "agent-child"]
    assert any("mkdir -p /srv/hello" in r.cmd for r in spawned), [r.cmd for r in spawned]
    assert any("REALKE[Y]" in r.cmd for r in spawned), "the CLI did not run the look step"
    answers = " ".join(json.dumps(c["request"]) for c in calls)
    assert all(f"{k}=0" in answers for k in ("env", "proc", "disk")), \
        "the key was found in the environment"
    assert files_containing(trial.paths.root, KEY) == []
    atif = json.loads(trial.paths.atif.read_text())
    assert any((s.get("extra") or {}).get("llm_call") and s.get("tool_calls")
               for s in atif["steps"]), "no model step with its tool calls in atif.json"
    # the CLI's own session log merged in: what its shell tool returned to it, per model step
    seen = [r["content"] for s in atif["steps"] if (s.get("extra") or {}).get("llm_call")
            for r in (s.get("observation") or {}).get("results", [])]
    if agent != "gemini-cli":  # (its JSON output holds the final answer alone)
        assert any("env=0" in c and "disk=0" in c for c in seen), seen
    if agent != "mini-swe-agent":
        assert atif["agent"]["extra"]["session"]["session_id"], atif["agent"]
    else:  # it ended on its submit command, not on format errors
        assert "RepeatedFormatError" not in trial.paths.agent_log.read_text()
        assert len(calls) == 3, len(calls)
    assert labeled(rec.trial_id) == []


def test_aider_solves_hello_docker_by_editing_the_file(tmp_path):
    """aider runs no shell commands headless (`--yes-always` never approves them): its
    whole-file edit format writes the file."""
    model = conversation(tmp_path, "aider", [
        {"say": "/srv/hello/greeting.txt\n```\nHello, harness!\n```"}])
    trial, rec = run_cli(tmp_path, "aider", model)
    assert rec.status == "passed" and rec.reward == 1.0, (rec.status, rec.error)
    assert "Applied edit to /srv/hello/greeting.txt" in trial.paths.agent_log.read_text()


def test_a_cli_that_does_nothing_scores_zero(tmp_path):
    model = conversation(tmp_path, "nothing", [{"say": "I will not change anything."}])
    trial, rec = run_cli(tmp_path, "codex", model)
    assert rec.status == "failed" and rec.reward == 0.0, (rec.status, rec.error)
    assert [json.loads(x)["status"] for x in trial.paths.llm.read_text().splitlines()] == [200]


def test_a_cli_that_exits_at_once_is_an_agent_error_with_its_reason(tmp_path):
    model = conversation(tmp_path, "unused", [{"say": "never asked"}])
    trial = make_trial(SEED / "hello-docker", get_agent(
        "codex", model=model, extra_args="--no-such-flag"), tmp_path, gateway=plan_for(model))
    rec = asyncio.run(trial.run())
    assert rec.status == "agent_error" and rec.reward == 0.0, rec.status
    assert "codex exited 2" in rec.error["message"] and "--no-such-flag" in rec.error["message"]
    assert not trial.paths.llm.exists() or trial.paths.llm.read_text() == ""


def test_the_bundle_store_mounted_into_the_node_is_out_of_the_agents_reach(tmp_path):
    """On this machine's engine the agent's bundles are mounted read-only, not copied:
    /opt/hx-agent/bundle links into them. The agent (root in the node, with SYS_ADMIN in
    its namespace) remounts them read-write and writes: its writes fail (the files are
    the host root's, which a remapped root is not), the controller's bundle is unchanged."""
    bundle = bundles.ensure("codex")
    entry = bundles.unpacked(bundle) / bundle.entry.lstrip("/")
    before = entry.read_bytes()
    attack = ("ls -ld /opt/hx-agent/bundle | sed 's/^/link=/'; mount -o remount,rw,bind "
              "/opt/hx-agent/store && echo remounted; touch /opt/hx-agent/store/hx-pwned "
              f"&& echo WROTE''STORE; echo pwned >> {bundle.entry} && echo WROTE''ENTRY")
    model = conversation(tmp_path, "attack", [{"run": attack}, {"say": "done"}])
    trial, rec = run_cli(tmp_path, "codex", model)
    assert rec.status == "failed" and rec.reward == 0.0, (rec.status, rec.error)
    answers = " ".join(json.dumps(json.loads(x)["request"])
                       for x in trial.paths.llm.read_text().splitlines())
    assert "link=l" in answers and "-> /opt/hx-agent/store/" in answers, answers[-2000:]
    # (the command's own text is in the requests too: its markers are quoted apart)
    assert "WROTESTORE" not in answers and "WROTEENTRY" not in answers, answers[-2000:]
    assert not (bundles.agent_dir("codex") / "hx-pwned").exists()
    assert entry.read_bytes() == before
    assert labeled(rec.trial_id) == []
