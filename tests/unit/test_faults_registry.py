"""The fault registry, its parameters (from each role's argument_specs) and the contract
every fault role and play follows."""

from __future__ import annotations

import pytest
import yaml

from harness.errors import InputError, RegistryError
from harness.faults import catalog, get_fault, get_spec, names
from harness.paths import PLAYBOOKS, ROLES

ROLE_FAULTS = [s for s in catalog().values() if s.kind == "role"]
POWER_FAULTS = [s for s in catalog().values() if s.kind == "power"]
VM_ONLY = {"clock_skew", "disk_latency", "disk_errors", "raid_member_fail", "netem"}


def plays() -> dict[str, dict]:
    doc = yaml.safe_load((PLAYBOOKS / "faults.yml").read_text())
    return {p["name"].split()[1]: p for p in doc}


def test_catalog_covers_every_layer_and_the_issue_list():
    assert {s.layer for s in catalog().values()} == {"L1", "L2", "L3", "L4"}
    assert set(names()) >= {"power_off", "power_cycle", "nic_down", "process_kill",
                            "process_pause", "service_stop", "disk_full", "cpu_starve",
                            "mem_starve", "clock_skew", "config_drift", "disk_latency",
                            "disk_errors", "raid_member_fail", "partition", "netem",
                            "bandwidth", "crash_loop", "tls_mismatch", "file_corrupt"}


@pytest.mark.parametrize("spec", ROLE_FAULTS, ids=lambda s: s.name)
def test_a_fault_is_one_folder_of_what_differs(spec):
    """Scripts, parameters and the registry entry; nothing shared is copied into it."""
    role = ROLES / spec.role
    assert spec.role == f"fi_{spec.layer.lower()}_{spec.name}"
    files = sorted(p.relative_to(role).as_posix() for p in role.rglob("*") if p.is_file())
    assert files == ["meta/argument_specs.yml", "meta/fault.yml", "templates/heal.sh.j2",
                     "templates/inject.sh.j2", "templates/verify.sh.j2"]
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())[
        "argument_specs"]["main"].get("options", {})
    assert all(k.startswith(f"{spec.role}_") for k in options), "only the fault's own"


def test_one_generic_fault_play_runs_any_folder():
    generic = plays()["-"]
    assert generic["tags"] == ["never", "fault"]
    include = generic["tasks"][0]["ansible.builtin.include_role"]
    assert include["name"] == "fi_common" and include["tasks_from"] == "fault"
    assert len(yaml.safe_load((ROLES / "fi_common" / "tasks" / "fault.yml").read_text())) == 1


def test_a_throwaway_fault_folder_is_registered(tmp_path):
    folder = tmp_path / "fi_l4_throwaway"
    (folder / "meta").mkdir(parents=True)
    (folder / "templates").mkdir()
    (folder / "meta" / "fault.yml").write_text(
        "name: throwaway\nlayer: L4\nkind: role\nsummary: A marker file\n"
        "requires: [own_clock]\nwhy: {own_clock: 'needs its own clock'}\n"
        "example: {targets: node1, params: {path: /tmp/y}}\n")
    (folder / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      fi_l4_throwaway_path:\n"
        "        type: str\n        default: /tmp/x\n")
    for action in ("inject", "heal", "verify"):
        (folder / "templates" / f"{action}.sh.j2").write_text("{{ fi_lib }}\ntrue\n")
    specs = catalog(roles=tmp_path)
    assert set(specs) == {"throwaway"}
    spec = specs["throwaway"]
    assert spec.role == "fi_l4_throwaway" and spec.example.params == {"path": "/tmp/y"}
    assert spec.selectors == ("one", "minority", "majority", "all", "named")
    assert spec.plan == "hosts" and spec.power_action == ""
    assert spec.substrates == ("baremetal", "cloudlab", "vm", "vm-cluster")
    with pytest.raises(InputError, match="needs its own clock"):
        spec.check_substrate("docker")


def test_where_a_dead_man_switch_runs_is_declared_and_checked(tmp_path):
    """A powered-off node runs no timer: power_off's switch is the controller's; nic_down's
    node may stop answering, so its heal power-cycles it first. A bad value names the file
    and the valid ones."""
    assert get_spec("power_off").deadman == "controller"
    assert get_spec("nic_down").deadman == "node"
    assert get_spec("nic_down").heal_unreachable == "power_cycle"
    assert get_spec("power_cycle").deadman == ""
    folder = tmp_path / "fi_l1_bad"
    (folder / "meta").mkdir(parents=True)
    (folder / "meta" / "fault.yml").write_text(
        "name: bad\nlayer: L1\nkind: power\npower_action: cycle\nsummary: x\n"
        "deadman: sometimes\nexample: {targets: all}\n")
    (folder / "meta" / "argument_specs.yml").write_text("argument_specs: {main: {}}\n")
    with pytest.raises(InputError, match=r"fi_l1_bad/meta/fault.yml: deadman: 'sometimes' is "
                                         r"not valid; valid: node, controller"):
        catalog(roles=tmp_path)


def test_every_fault_role_is_registered():
    on_disk = {p.name for p in ROLES.glob("fi_l*")}
    assert on_disk == {s.role for s in ROLE_FAULTS + POWER_FAULTS}


@pytest.mark.parametrize("spec", POWER_FAULTS, ids=lambda s: s.name)
def test_a_power_fault_is_a_folder_of_its_registry_entry(spec):
    """Driven through the substrate's power(): its folder has no scripts, only meta/."""
    role = ROLES / spec.role
    assert spec.role == f"fi_{spec.layer.lower()}_{spec.name}" and spec.requires == ("power",)
    files = sorted(p.relative_to(role).as_posix() for p in role.rglob("*") if p.is_file())
    assert files == ["meta/argument_specs.yml", "meta/fault.yml"]
    assert spec.params == {} and type(get_fault(spec.name)).__name__ == "PowerFault"
    assert get_fault(spec.name).action == spec.power_action in ("off", "cycle")


def test_vm_only_faults_say_so():
    for name in VM_ONLY:  # (bare metal has its own kernel and clock, not spare disks)
        found = get_spec(name).substrates
        assert "docker" not in found and {"vm", "vm-cluster"} <= set(found), (name, found)
    with pytest.raises(InputError, match="share the host clock"):
        get_spec("clock_skew").check_substrate("docker")
    with pytest.raises(InputError, match="no netem.*use bandwidth.*supported: baremetal, "
                                         "cloudlab, vm, vm-cluster"):
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


def test_drivers_load_lazily_by_kind():
    assert {s.kind for s in catalog().values()} == {"role", "power"}
    for spec in catalog().values():
        cls = type(get_fault(spec.name)).__name__
        assert cls == {"role": "RoleFault", "power": "PowerFault"}[spec.kind], spec.name


def test_a_host_whose_report_was_lost_is_verified_again_alone():
    """A step that succeeded on every host but whose report from one host did not arrive
    (its command's output lost on the way): that host, and only it, is verified once
    more, and its state is the second report's."""
    import asyncio

    from harness.faults.base import FaultRecord

    fault = get_fault("bandwidth")
    calls = []

    async def run(env, rec, actions, expect="", hosts=None):
        calls.append((actions, hosts))
        if hosts is None:
            return {"node0": {"detail": {"x": 1}}, "node1": {"state": "injected"}}
        return {h: {"state": "injected"} for h in hosts}

    fault.run = run
    rec = FaultRecord(id="f1", fault="bandwidth", layer="network", targets=["all"],
                      hosts=["node0", "node1"], params={})
    asyncio.run(fault.inject(None, rec))
    assert rec.states == {"node0": "injected", "node1": "injected"}
    assert calls == [(["inject", "verify"], None), (["verify"], ["node0"])]
