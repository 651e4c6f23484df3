"""A VM campaign through the CLI (markers: libvirt, slow): the 3-node seed tasks
vm-route-blackhole and etcd-member-loss (a bare-metal task the campaign maps to vm-cluster:
every node a VM with a virtual BMC) with the oracle and nop agents
at concurrency 2 over two hosts, one trial at a time on each: this machine's libvirt
reached directly (`local`) and over SSH as a remote host would be (`loop`,
qemu+ssh://root@localhost); plan creates nothing, apply runs all four (oracle 1.0,
nop < 0.5) on both hosts, a second apply re-runs nothing, and no domain, network, pool,
disk, bridge or BMC of the campaign remains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.paths import harness_home
from harness.substrates import get_substrate
from tests.integration.faultcheck import REPO, cli
from tests.integration.test_libvirt_substrate import libvirt_unavailable

pytestmark = [pytest.mark.libvirt, pytest.mark.slow,
              pytest.mark.skipif(libvirt_unavailable() is not None,
                                 reason=str(libvirt_unavailable()))]

NAME = "pytest-vm-campaign"
TASKS = {"vm-route-blackhole": "node2 catalog API reachable from node0",
         "etcd-member-loss": "dead member node2 removed from the membership (node0 and "
                                "node1 only)"}


def hosts() -> list[dict]:
    """This machine's libvirt twice: directly, and over SSH with the key setup.sh made."""
    key = harness_home() / "ssh" / "id_ed25519"
    cap = {"cpus": 2, "memory_mb": 12288, "max_trials": {"vm-cluster": 1}}
    return [{"name": "local", "libvirt": "qemu:///system", "capacity": cap},
            {"name": "loop", "libvirt": f"qemu+ssh://root@localhost/system?keyfile={key}"
                                        "&no_tty=1", "capacity": cap}]


@pytest.mark.timeout(1800)  # (a bootstrap that fails under load is retried once)
def test_three_node_vm_campaign_oracle_and_nop_over_two_hosts(tmp_path):
    camp = tmp_path / "c.yaml"
    camp.write_text(yaml.safe_dump({
        "name": NAME, "tasks": [str(REPO / "tasks" / t) for t in TASKS],
        "agents": [{"name": "oracle"}, {"name": "nop"}], "attempts": 1, "concurrency": 2,
        "substrate": {"baremetal": "vm-cluster"}, "hosts": hosts()}))
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
        assert {r["host"] for r in recs.values()} == {"local", "loop"}, \
            {t: r["host"] for t, r in recs.items()}
        for r in recs.values():
            task, agent = r["task"]["name"], r["agent"]["name"]
            took = sum(t["seconds"] for t in r["timings"].values())
            print(f"{task} {agent} on {r['host']}: reward {r['reward']} in {took:.0f}s")
            assert TASKS[task] in {c["name"] for c in r["checks"]}, r["checks"]
            if agent == "oracle":
                assert (r["status"], r["reward"]) == ("passed", 1.0), (task, r["error"])
            else:
                assert r["status"] == "failed" and r["reward"] < 0.5, (task, r["error"])
            assert r["leaks"] == []
        again = json.loads(cli("campaign", "apply", str(run_dir), "--json").stdout)
        assert again["kept"] == 4 and again["ran"] == 0
    finally:
        cli("gc", "--hosts", str(camp), "--campaign", NAME)
    assert sub.leftovers(campaign=NAME) == []
    assert not list(Path(run_dir).glob("trials/*/vm/disks/hx-*"))
