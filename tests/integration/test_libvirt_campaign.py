"""A VM campaign through the CLI (markers: libvirt, slow): the 3-node seed tasks
vm-route-blackhole and vm-etcd-member-loss (a BMC on node2) with the oracle and nop agents
at concurrency 2, admitted by the host capacity pool (memory and cores); plan creates
nothing, apply runs all four (oracle 1.0, nop < 0.5), a second apply re-runs nothing, and
no domain, network, pool, disk, bridge or BMC of the campaign remains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.substrates import get_substrate
from tests.integration.faultcheck import REPO, cli
from tests.integration.test_libvirt_substrate import libvirt_unavailable

pytestmark = [pytest.mark.libvirt, pytest.mark.slow,
              pytest.mark.skipif(libvirt_unavailable() is not None,
                                 reason=str(libvirt_unavailable()))]

NAME = "pytest-vm-campaign"
TASKS = {"vm-route-blackhole": "node2 catalog API reachable from node0",
         "vm-etcd-member-loss": "dead member node2 removed from the membership (node0 and "
                                "node1 only)"}


def test_three_node_vm_campaign_oracle_and_nop(tmp_path):
    camp = tmp_path / "c.yaml"
    camp.write_text(yaml.safe_dump({
        "name": NAME, "tasks": [str(REPO / "tasks" / t) for t in TASKS],
        "agents": [{"name": "oracle"}, {"name": "nop"}], "attempts": 1, "concurrency": 2}))
    run_dir = tmp_path / "run"
    sub = get_substrate("vm-cluster")
    try:
        plan = json.loads(cli("campaign", "plan", str(camp), "--out", str(run_dir),
                              "--json").stdout)
        assert plan["trials"] == 4 and plan["states"] == {"pending": 4}
        assert sub.leftovers(campaign=NAME) == [], "plan must create nothing"
        res = cli("campaign", "apply", str(run_dir), "--json", timeout=1800)
        assert res.returncode == 0, res.stderr[-2000:]
        recs = {p.parent.name: json.loads(p.read_text())
                for p in (run_dir / "trials").glob("*/result.json")}
        assert len(recs) == 4
        for r in recs.values():
            task, agent = r["task"]["name"], r["agent"]["name"]
            took = sum(t["seconds"] for t in r["timings"].values())
            print(f"{task} {agent}: reward {r['reward']} in {took:.0f}s")
            assert TASKS[task] in {c["name"] for c in r["checks"]}, r["checks"]
            if agent == "oracle":
                assert (r["status"], r["reward"]) == ("passed", 1.0), (task, r["error"])
            else:
                assert r["status"] == "failed" and r["reward"] < 0.5, (task, r["error"])
            assert r["leaks"] == []
        again = json.loads(cli("campaign", "apply", str(run_dir), "--json").stdout)
        assert again["kept"] == 4 and again["ran"] == 0
    finally:
        cli("gc", "--campaign", NAME)
    assert sub.leftovers(campaign=NAME) == []
    assert not list(Path(run_dir).glob("trials/*/vm/disks/hx-*"))
