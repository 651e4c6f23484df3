"""A VM campaign through the CLI (markers: libvirt, slow): the 3-node seed task
vm-route-blackhole with the oracle and nop agents at concurrency 2, admitted by the host
capacity pool (memory and cores); plan creates nothing, apply runs both, a second apply
re-runs nothing, and no domain, network, pool, disk or bridge of the campaign remains."""

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


def test_three_node_vm_campaign_oracle_and_nop(tmp_path):
    camp = tmp_path / "c.yaml"
    camp.write_text(yaml.safe_dump({
        "name": NAME, "tasks": [str(REPO / "tasks" / "vm-route-blackhole")],
        "agents": [{"name": "oracle"}, {"name": "nop"}], "attempts": 1, "concurrency": 2}))
    run_dir = tmp_path / "run"
    sub = get_substrate("vm-cluster")
    try:
        plan = json.loads(cli("campaign", "plan", str(camp), "--out", str(run_dir),
                              "--json").stdout)
        assert plan["trials"] == 2 and plan["states"] == {"pending": 2}
        assert sub.leftovers(campaign=NAME) == [], "plan must create nothing"
        res = cli("campaign", "apply", str(run_dir), "--json", timeout=1800)
        assert res.returncode == 0, res.stderr[-2000:]
        recs = {p.parent.name: json.loads(p.read_text())
                for p in (run_dir / "trials").glob("*/result.json")}
        assert len(recs) == 2
        for r in recs.values():
            nodes = {c["name"] for c in r["checks"]}
            assert "node2 catalog API reachable from node0" in nodes, r["checks"]
            if r["agent"]["name"] == "oracle":
                assert (r["status"], r["reward"]) == ("passed", 1.0), r["error"]
            else:
                assert r["status"] == "failed" and r["reward"] < 0.5, r["error"]
            assert r["leaks"] == []
        again = json.loads(cli("campaign", "apply", str(run_dir), "--json").stdout)
        assert again["kept"] == 2 and again["ran"] == 0
    finally:
        cli("gc", "--campaign", NAME)
    assert sub.leftovers(campaign=NAME) == []
    assert not list(Path(run_dir).glob("trials/*/vm/disks/hx-*"))
