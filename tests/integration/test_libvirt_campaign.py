"""A VM campaign through the CLI (markers: libvirt, slow): the 3-node seed task
vm-route-blackhole and a bare-metal task the campaign maps to vm-cluster (every node a VM
with a virtual BMC): ipmi-power-recovery as a 2-node `baremetal` task, whose node1 is
powered off through its BMC from node0 and powered on by the oracle, both over IPMI 2.0
(lanplus, cipher suite 3); with the oracle and nop agents at concurrency 2
over two hosts, one trial at a time on each: this machine's libvirt reached directly
(`local`) and over SSH as a remote host would be (`loop`, qemu+ssh://root@localhost); plan
creates nothing, apply runs all four (oracle 1.0, nop < 0.5) on both hosts, a second apply
re-runs nothing, and no domain, network, pool, disk, bridge or BMC of the campaign remains.

(The 3-node etcd-member-loss was the mapped task before: two of its trials at once were six
TCG guests and a quarter of the VM lane. CI runs it on emulated bare metal in
test_cloudlab_portal.py::test_l3_seed_task_through_the_provider_and_portal;
baremetal-power-loss cannot stand in: it speaks IPMI 1.5, which the VMs' BMCs do not.)"""

from __future__ import annotations

import json
import shutil
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
         "ipmi-power-recovery-bm": "inventory API on node1 answers"}


def baremetal_power_task(dest: Path) -> Path:
    """ipmi-power-recovery as a bare-metal task (every node of which gets a BMC where it
    runs), renamed `ipmi-power-recovery-bm`."""
    shutil.copytree(REPO / "tasks" / "ipmi-power-recovery", dest)
    toml = dest / "task.toml"
    text = toml.read_text().replace('name = "ipmi-power-recovery"',
                                    'name = "ipmi-power-recovery-bm"')
    text = text.replace('type = "vm-cluster"', 'type = "baremetal"').replace("bmc = true\n", "")
    assert 'type = "baremetal"' in text and "bmc" not in text.split("[environment]")[1], text
    toml.write_text(text)
    return dest


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
        "name": NAME, "tasks": [str(REPO / "tasks" / "vm-route-blackhole"),
                                str(baremetal_power_task(tmp_path / "ipmi-power-recovery-bm"))],
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
