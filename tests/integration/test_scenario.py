"""Scenarios beside the agent and the lifecycle gates, on real Docker trials (marker:
docker): the L3 seed task's scenario-driven partition, a scenario.py task's event
sequence, the live gate's series, and the durability gate failing a fix that does not
survive a restart."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from harness.agents import Agent, AgentOutcome, get_agent
from harness.substrates import get_substrate
from harness.task import load_task
from harness.trial import Trial, make_trial_id
from tests.conftest import SEED, docker_ready, labeled
from tests.integration.faultcheck import write_task

pytestmark = [pytest.mark.docker,
              pytest.mark.skipif(docker_ready() is not None, reason=str(docker_ready()))]

CAMPAIGN = "faults-scenario"
DEMO = {
    "task.toml": """
        version = "1.0"
        [task]
        name = "faults-durable-demo"
        [agent]
        timeout_sec = 60
        [verifier]
        timeout_sec = 60
        [environment]
        type = "docker"
        memory_mb = 256
        [gates]
        live = { duration_sec = 2, interval_sec = 1 }
        durability = { restart = ["hxdemo"], reboot = ["node0"] }
        """,
    "instruction.md": "Make hxdemo report good.\n",
    "environment/Dockerfile": """
        FROM debian:bookworm
        COPY hxdemo.service /etc/systemd/system/hxdemo.service
        RUN printf 'MODE=broken\\n' > /etc/hxdemo.conf && systemctl enable hxdemo
        """,
    "environment/hxdemo.service": """
        [Unit]
        Description=reports its configured mode in /run/hxdemo/status when it starts
        [Service]
        EnvironmentFile=/etc/hxdemo.conf
        RuntimeDirectory=hxdemo
        RuntimeDirectoryPreserve=yes
        ExecStart=/bin/sh -c 'echo "$MODE" > /run/hxdemo/status; exec sleep infinity'
        [Install]
        WantedBy=multi-user.target
        """,
    "solution/solve.sh": """
        #!/bin/bash
        sed -i 's/^MODE=.*/MODE=good/' /etc/hxdemo.conf && systemctl restart hxdemo
        """,
    "tests/test.sh": """
        #!/bin/bash
        ok=false
        [ "$(cat /run/hxdemo/status 2>/dev/null)" = good ] && ok=true
        check='{"name": "hxdemo reports good", "passed": %s, "phase": "functional"}'
        printf "{\\"checks\\": [$check]}" "$ok" > /logs/verifier/reward.json
        """,
}
SCENARIO_PY = '''
from harness.trial.scenario import CompletionMode, ScenarioController


class Scenario(ScenarioController):
    completion = CompletionMode.SCENARIO_DRIVEN

    async def execute(self, api):
        await api.wait_for("agent.exit")
        stop = await api.inject("service_stop", targets="all", params={"service": "hxdemo"})
        down = await api.probe("systemctl is-active hxdemo")
        await api.heal(stop.id)
        up = await api.probe("systemctl is-active hxdemo")
        api.emit("checked", down=down.ok, up=up.ok, nodes=api.nodes)
'''


class SloppyAgent(Agent):
    """Makes the check pass at runtime only: nothing on disk changes."""

    name = "sloppy"

    async def run(self, instruction, env, ctx):
        await env.exec("echo good > /run/hxdemo/status", timeout=30)
        return AgentOutcome()


def make_trial(task_dir: Path, agent, tmp_path: Path) -> Trial:
    task = load_task(task_dir)
    agent = get_agent(agent) if isinstance(agent, str) else agent
    trial_id = make_trial_id(task.name, agent.name, 1)
    return Trial(task=task, agent=agent, substrate=get_substrate("docker"),
                 root=tmp_path / "trials" / trial_id, trial_id=trial_id, campaign=CAMPAIGN)


async def run_all(trials):
    return await asyncio.gather(*(t.run() for t in trials))




def events(trial: Trial) -> list[dict]:
    return [json.loads(x) for x in trial.paths.events.read_text().splitlines()]


def in_order(names: list[str], expected: list[str]) -> bool:
    it = iter(names)
    return all(any(n == e for n in it) for e in expected)


def test_l3_seed_task_partition_during_the_window(tmp_path):
    task_dir = tmp_path / "etcd-partition-quorum"
    shutil.copytree(SEED / "etcd-partition-quorum", task_dir)
    trials = [make_trial(task_dir, a, tmp_path) for a in ("oracle", "nop")]
    oracle, nop = asyncio.run(run_all(trials))
    assert oracle.status == "passed" and oracle.reward == 1.0, oracle.error
    assert nop.status == "failed" and nop.reward < 0.5
    assert {c["phase"] for c in oracle.checks if c["scored"]} == {
        "functional", "durability", "cleanup"}
    assert oracle.gates["decommission"]["reward"] == 1.0
    assert nop.gates["decommission"]["reward"] < 1.0
    for rec, trial in zip((oracle, nop), trials, strict=True):
        assert rec.leaks == [] and labeled(rec.trial_id) == []
        evs = events(trial)
        names = [e["name"] for e in evs]
        assert in_order(names, [
            "phase.agent.start", "scenario.signal", "fault.inject", "fault.injected",
            "scenario.done", "phase.agent.end", "verifier.result",
            "gate.decommission.start", "fault.heal", "fault.healed",
            "gate.decommission.result", "fault.heal_all", "trial.end"]), names
        assert "scenario.settled" in names[:names.index("scenario.done")]
        inject = next(e for e in evs if e["name"] == "fault.inject")["data"]
        assert inject["fault"] == "partition" and inject["targets"] == ["node1"]
        if rec.timings["agent"]["seconds"] > 3.5:  # the probe runs every 3 s of the window
            assert any(e["name"] == "scenario.probe" for e in evs)
        assert "heal" in rec.timings and "gates" in rec.timings
        ops = [json.loads(x)["op"] for x in (trial.paths.root / "faults" / "ledger.jsonl")
               .read_text().splitlines()]
        assert ops == ["inject", "injected", "healed"]


def test_scenario_py_event_sequence_and_durability_gate(tmp_path):
    demo = write_task(tmp_path / "demo", DEMO)
    scenario_task = write_task(tmp_path / "demo-scenario", {**DEMO, "scenario.py": SCENARIO_PY})
    nginx = tmp_path / "nginx-tls-mismatch"
    shutil.copytree(SEED / "nginx-tls-mismatch", nginx)
    trials = [make_trial(demo, "oracle", tmp_path), make_trial(demo, SloppyAgent(), tmp_path),
              make_trial(scenario_task, "nop", tmp_path), make_trial(nginx, "oracle", tmp_path)]
    proper, sloppy, scripted, tls = asyncio.run(run_all(trials))

    assert proper.reward == 1.0 and proper.gates["durability"]["reward"] == 1.0
    live = proper.gates["live"]
    assert live["reward"] == 1.0 and len(live["series"]) == 3
    assert [c["passed"] for c in live["checks"]] == [True, True]
    assert scripted.gates["live"]["reward"] == 0.0
    assert list(proper.gates) == ["immediate", "live", "durability"]
    assert sloppy.reward == 1.0 and sloppy.status == "passed", "status stays the immediate's"
    durability = sloppy.gates["durability"]
    assert durability["reward"] == 0.0
    checks = {c["name"]: c["passed"] for c in durability["checks"]}
    assert checks == {"restart hxdemo on node0": True, "reboot node0 and come back": True,
                      "hxdemo reports good": False}
    assert tls.status == "passed" and tls.gates["durability"]["reward"] == 1.0

    evs = events(trials[2])
    names = [e["name"] for e in evs]
    assert in_order(names, ["scenario.signal", "fault.inject", "fault.injected",
                            "scenario.probe", "fault.heal", "fault.healed", "scenario.probe",
                            "scenario.checked", "scenario.done", "verifier.result"]), names
    checked = next(e for e in evs if e["name"] == "scenario.checked")["data"]
    assert checked["down"] is False and checked["up"] is True and checked["nodes"] == ["node0"]
    assert scripted.error is None and scripted.reward == 0.0
    for rec in (proper, sloppy, scripted, tls):
        assert rec.leaks == [] and labeled(rec.trial_id) == []
