"""The controller-side ledger: append-only, replayed into the current state."""

from __future__ import annotations

from harness.faults.base import FaultRecord
from harness.faults.ledger import Ledger, ledger_path
from harness.paths import TrialPaths


def rec(i: str) -> dict:
    return FaultRecord(id=i, fault="partition", layer="L3", targets=["node1"],
                       hosts=["node0", "node1"], params={}).to_dict()


def test_replay_statuses_and_active_order(tmp_path):
    path = ledger_path(TrialPaths(tmp_path))
    assert path == tmp_path / "faults" / "ledger.jsonl"
    led = Ledger(path)
    led.append("inject", record=rec("fa"))
    led.append("injected", id="fa", detail={"node0": {"cut_off": ["node1"]}})
    led.append("inject", record=rec("fb"))
    led.append("inject_failed", id="fb", error="boom")
    led.append("inject", record=rec("fc"))
    led.append("injected", id="fc", detail={})
    led.append("healed", id="fc", changed={"node0": True})
    records = led.records()
    assert [r.status for r in records.values()] == ["active", "inject_failed", "healed"]
    assert records["fa"].detail["node0"]["cut_off"] == ["node1"]
    assert [r.id for r in led.active()] == ["fa", "fb"]


def test_torn_last_line_after_kill_9_is_ignored(tmp_path):
    led = Ledger(tmp_path / "ledger.jsonl")
    led.append("inject", record=rec("fa"))
    with led.path.open("a") as fh:
        fh.write('{"ts": "x", "op": "inj')
    assert [r.id for r in led.active()] == ["fa"]
    assert Ledger(tmp_path / "none.jsonl").records() == {}
