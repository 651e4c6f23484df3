"""The fault registry, its parameters (from each role's argument_specs) and the contract
every fault role and play follows."""

from __future__ import annotations

import pytest
import yaml

from harness.errors import InputError, RegistryError
from harness.faults import CATALOG, get_fault, get_spec, names
from harness.paths import PLAYBOOKS, ROLES

ROLE_FAULTS = [s for s in CATALOG.values() if s.role]
VM_ONLY = {"clock_skew", "disk_latency", "disk_errors", "raid_member_fail", "netem"}


def plays() -> dict[str, dict]:
    doc = yaml.safe_load((PLAYBOOKS / "faults.yml").read_text())
    return {p["name"].split()[1]: p for p in doc}


def test_catalog_covers_every_layer_and_the_issue_list():
    assert {s.layer for s in CATALOG.values()} == {"L1", "L2", "L3", "L4"}
    assert set(names()) >= {"power_off", "power_cycle", "nic_down", "process_kill",
                            "process_pause", "service_stop", "disk_full", "cpu_starve",
                            "mem_starve", "clock_skew", "config_drift", "disk_latency",
                            "disk_errors", "raid_member_fail", "partition", "netem",
                            "bandwidth", "crash_loop", "tls_mismatch", "file_corrupt"}


@pytest.mark.parametrize("spec", ROLE_FAULTS, ids=lambda s: s.name)
def test_role_layout_and_tagged_play(spec):
    role = ROLES / spec.role
    assert spec.role == f"fi_{spec.layer.lower()}_{spec.name}"
    for rel in ("tasks/main.yml", "tasks/inject.yml", "tasks/heal.yml", "tasks/verify.yml",
                "templates/inject.sh.j2", "templates/heal.sh.j2", "templates/verify.sh.j2",
                "meta/argument_specs.yml", "meta/main.yml"):
        assert (role / rel).is_file(), rel
    play = plays()[spec.name]
    assert play["tags"] == ["never", f"fault_{spec.name}", f"layer_{spec.layer}"]
    assert play["tasks"][0]["ansible.builtin.include_role"]["name"] == spec.role
    for action in ("inject", "heal", "verify"):
        tasks = yaml.safe_load((role / "tasks" / f"{action}.yml").read_text())
        assert len(tasks) <= 2, f"{action}.yml should stay at 1-2 tasks (speed)"


def test_every_fault_role_is_registered():
    on_disk = {p.name for p in ROLES.glob("fi_l*")}
    assert on_disk == {s.role for s in ROLE_FAULTS}


def test_vm_only_faults_say_so():
    for name in VM_ONLY:
        assert get_spec(name).substrates == ("vm", "vm-cluster")
    with pytest.raises(InputError, match="share the host clock"):
        get_spec("clock_skew").check_substrate("docker")
    with pytest.raises(InputError, match="no netem.*use bandwidth.*supported: vm, vm-cluster"):
        get_spec("netem").check_substrate("docker")
    get_spec("bandwidth").check_substrate("docker")


def test_unknown_fault_lists_the_valid_ones():
    with pytest.raises(RegistryError) as exc:
        get_spec("meteor_strike")
    assert "unknown fault 'meteor_strike'; valid: bandwidth, clock_skew" in exc.value.message


def test_params_come_from_argument_specs():
    params = get_spec("disk_full").params
    assert params["path"].required and params["path"].type == "str"
    assert params["max_mb"].default == 1024
    assert "blocks" not in {p["name"] for p in get_spec("partition").to_dict()["params"]}


def test_check_params_types_defaults_and_refusals():
    spec = get_spec("disk_full")
    assert spec.check_params({"path": "/srv", "leave_mb": "5"}) == {
        "path": "/srv", "leave_mb": 5, "max_mb": 1024}
    with pytest.raises(InputError, match=r"unknown parameter\(s\) \['size'\]; valid: path "
                                         r"\(str, required\), leave_mb"):
        spec.check_params({"path": "/srv", "size": 3})
    with pytest.raises(InputError, match="parameter path is required"):
        spec.check_params({})
    with pytest.raises(InputError, match="leave_mb: expected int, got 'lots'"):
        spec.check_params({"path": "/srv", "leave_mb": "lots"})
    with pytest.raises(InputError, match="not one of"):
        get_spec("file_corrupt").check_params({"path": "/x", "mode": "shred"})
    assert get_spec("service_stop").check_params({"service": "x", "disable": "yes"})["disable"]


def test_drivers_load_lazily():
    assert type(get_fault("partition")).__name__ == "PartitionFault"
    assert type(get_fault("power_off")).__name__ == "PowerFault"
    assert type(get_fault("tls_mismatch")).__name__ == "RoleFault"
