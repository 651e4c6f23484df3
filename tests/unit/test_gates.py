"""Which gates a task gets, in lifecycle order, and how live samples are folded."""

from __future__ import annotations

from harness.task import load_task
from harness.trial.gates import DecommissionGate, DurabilityGate, LiveGate, _held, gates_for
from tests.conftest import SEED


def test_gates_from_task_toml(seed_task):
    assert gates_for(load_task(SEED / "hello-docker")) == []
    (gate,) = gates_for(load_task(SEED / "nginx-tls-mismatch"))
    assert isinstance(gate, DurabilityGate) and gate.restart == ["nginx"]
    assert [type(g) for g in gates_for(load_task(SEED / "etcd-partition-quorum"))] == [
        DecommissionGate]
    d = seed_task("hello-docker")
    with (d / "task.toml").open("a") as fh:
        fh.write('\n[gates]\nlive = { duration_sec = 30, interval_sec = 10 }\n'
                 'durability = { reboot = ["node0"] }\ndecommission = true\n')
    gates = gates_for(load_task(d))
    assert [g.name for g in gates] == ["live", "durability", "decommission"]
    assert isinstance(gates[0], LiveGate) and gates[0].interval == 10
    assert gates[1].reboot == ["node0"] and gates[1].restart == []


def test_live_checks_hold_only_when_every_sample_passed():
    a = {"name": "a", "passed": True, "scored": True, "phase": "functional"}
    b = {"name": "b", "passed": True, "scored": True, "phase": "durability"}
    held = _held([[a, b], [a, {**b, "passed": False}], [a, b]])
    assert [(c["name"], c["passed"], c["phase"]) for c in held] == [
        ("a", True, "functional"), ("b", False, "durability")]
