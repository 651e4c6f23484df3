"""gc's fault pass: what a node reports is found and healed; a node that does not answer is
reported as unreachable, never as a fault, and is not asked to heal."""

from __future__ import annotations

from harness.faults.sweep import gc_faults
from harness.substrates.base import ExecResult, Node


class _Substrate:
    """Two nodes of one dead trial: node0 holds a fault, node1 is powered off."""

    name = "fake"

    def __init__(self, off_exit: int | None = None):
        self.calls: list[tuple[str, str]] = []
        self.off_exit = off_exit

    def live_nodes(self, campaign, trial, force):
        return {"t1": [Node(name="node0", host="10.0.0.1", cluster_ip="10.0.0.1"),
                       Node(name="node1", host="10.0.0.2", cluster_ip="10.0.0.2")]}

    async def exec(self, node, script, timeout):
        mode = script.split("\n", 1)[0].split()[-1]
        self.calls.append((node.name, mode))
        if node.name == "node1":
            if self.off_exit is None:
                raise ConnectionError("no route to host")
            return ExecResult(self.off_exit, "", "ssh: connect to host 10.0.0.2: No route")
        return ExecResult(0, "fault disk-full (heal.sh)\n" if mode == "list" else
                          "healed disk-full\n", "")


def test_an_unreachable_node_is_reported_apart_and_not_healed():
    for off_exit in (None, 255):
        sub = _Substrate(off_exit)
        found, healed, unreachable = gc_faults(sub)
        assert found == ["t1/node0: fault disk-full (heal.sh)"]
        assert healed == ["t1/node0: healed disk-full"]
        assert len(unreachable) == 1 and unreachable[0].startswith("t1/node1: ")
        assert ("node1", "heal") not in sub.calls and ("node0", "heal") in sub.calls


def test_a_dry_run_heals_nothing():
    sub = _Substrate(255)
    found, healed, unreachable = gc_faults(sub, dry_run=True)
    assert found and not healed and unreachable
    assert all(mode == "list" for _, mode in sub.calls)


def test_a_failing_sweep_that_ran_is_a_finding():
    sub = _Substrate(1)  # the script ran and failed: that is the node's answer
    found, _, unreachable = gc_faults(sub, dry_run=True)
    assert "t1/node1: failed sweep exit 1: ssh: connect to host 10.0.0.2: No route" in found
    assert unreachable == []
