"""Every fault role's scripts rendered by real Ansible (local connection; the scripts are
written to files, never run) and checked with `bash -n`. The VM-only faults are tested
here until the VM substrate lands: their integration tests are skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.faults import catalog
from harness.paths import ROLES

ACTIONS = ("inject", "heal", "verify")
PARAMS = {
    "nic_down": {}, "bandwidth": {}, "partition": {"blocks": {"node0": ["node1"]}},
    "process_kill": {"service": "nginx"}, "process_pause": {"process": "etcd"},
    "service_stop": {"service": "nginx"}, "disk_full": {"path": "/srv/data"},
    "cpu_starve": {"quota_pct": 50}, "mem_starve": {"mb": 64},
    "clock_skew": {"offset_sec": 3600},
    "config_drift": {"path": "/etc/x.conf", "regexp": "^a=.*", "line": "a='1'"},
    "disk_latency": {"device": "/dev/vdb", "delay_ms": 250},
    "disk_errors": {"device": "/dev/vdc", "up_sec": 3, "down_sec": 2},
    "raid_member_fail": {"array": "/dev/md0", "member": "/dev/vdd"},
    "netem": {"delay_ms": 100, "jitter_ms": 10, "loss_pct": 5.0, "duplicate_pct": 1.0},
    "crash_loop": {"service": "nginx", "persistent": True},
    "tls_mismatch": {"key": "/etc/tls/k.pem", "cert": "/etc/tls/c.pem", "service": "nginx"},
    "file_corrupt": {"path": "/var/lib/db/data.db", "mode": "truncate"},
}
ROLE_FAULTS = sorted(s.name for s in catalog().values() if s.kind != "power")

RENDER_ROLE = """
- name: Render
  ansible.builtin.set_fact:
    rendered: "{{ rendered | default({}) | combine({role_name ~ '.' ~ item:
                  lookup('ansible.builtin.template', item ~ '.sh.j2')}) }}"
  loop: [inject, heal, verify]
  vars:
    fi_role_dir: "{{ role_path }}"
"""
PLAY = """
- name: Render fault scripts
  hosts: node0
  gather_facts: false
  connection: local
  vars:
    fi_lib: "{{ lookup('ansible.builtin.template', lib) }}"
  tasks:
    - name: Render each role
      ansible.builtin.include_role:
        name: "{{ item }}"
      loop: "{{ render_roles }}"
    - name: Write them out
      ansible.builtin.copy:
        dest: "{{ out_dir }}/rendered.json"
        content: "{{ rendered | to_json }}"
        mode: "0644"
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict:
    """All roles' scripts rendered in one ansible-playbook run (roles re-rooted so that
    their own tasks, which would run the scripts, are replaced by a render task);
    `{role.action: script}`."""
    base = tmp_path_factory.mktemp("render")
    out = base / "out"
    out.mkdir()
    extra = {"out_dir": str(out), "lib": str(ROLES / "fi_common/templates/lib.sh.j2"),
             "fi_id": "f1234567", "fi_fault": "x", "fi_record": {"id": "f1234567"},
             "fi_detail": {}, "fi_expect": "injected", "fi_deadman_sec": 300,
             "fi_actions": ["inject"], "render_roles": [], "harness_control_path": "network"}
    for name in ROLE_FAULTS:
        spec = catalog()[name]
        role = base / "roles" / spec.role
        (role / "tasks").mkdir(parents=True)
        (role / "tasks" / "main.yml").write_text(RENDER_ROLE)
        (role / "templates").symlink_to(ROLES / spec.role / "templates")
        extra["render_roles"].append(spec.role)
        extra.update({f"{spec.role}_{k}": v for k, v in spec.check_params(
            {k: v for k, v in PARAMS[name].items() if k != "blocks"}).items()})
        extra.update({f"{spec.role}_{k}": v for k, v in PARAMS[name].items() if k == "blocks"})
    (base / "play.yml").write_text(PLAY)
    (base / "extra.json").write_text(json.dumps(extra))
    (base / "inv.yml").write_text(
        "all:\n  hosts:\n    node0: {harness_cluster_ip: 10.1.0.10}\n"
        "    node1: {harness_cluster_ip: 10.1.0.11}\n"
        f"  vars: {{ansible_python_interpreter: {sys.executable}}}\n")
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(base / "roles"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOCALHOST_WARNING": "False"}
    res = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i",
                          str(base / "inv.yml"), str(base / "play.yml"), "-e",
                          f"@{base / 'extra.json'}"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-3000:]
    return json.loads((out / "rendered.json").read_text())


def script(rendered: dict, fault: str, action: str) -> str:
    return rendered[f"{catalog()[fault].role}.{action}"]


@pytest.mark.parametrize("fault", ROLE_FAULTS)
def test_scripts_are_valid_bash_and_follow_the_contract(rendered, fault):
    for action in ACTIONS:
        text = script(rendered, fault, action)
        res = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
        assert res.returncode == 0, f"{action}: {res.stderr}"
        assert "set -euo pipefail" in text and "HX_ID=f1234567" in text
    inject, heal = script(rendered, fault, "inject"), script(rendered, fault, "heal")
    assert "hx_begin <<'HX_HEAL'" in inject and inject.count("\nHX_HEAL\n") == 1
    assert "hx_healed" in heal and "hx_healed" in inject.split("HX_HEAL")[1]
    assert "--on-active=300" in inject
    assert 'hx_report' in script(rendered, fault, "verify")


@pytest.mark.parametrize("fault,needles", [
    ("disk_latency", ['dmsetup create "hx-$HX_ID" --table "0 $SECTORS delay $DEV 0 250"',
                      'DEV=/dev/vdb']),
    ("disk_errors", ['flakey $DEV 0 3 2"', 'dmsetup remove "hx-$HX_ID"']),
    ("raid_member_fail", ['mdadm --manage "$MD" --fail "$DEV"', "--re-add", "MD=/dev/md0"]),
    ("netem", ['netem delay 100ms 10ms loss 5.0% duplicate 1.0%', 'handle "$HX_HANDLE:"']),
    ("clock_skew", ['date -s "$OFF seconds"', "OFF=3600", "timedatectl set-ntp false"]),
    ("partition", ["ip saddr { 10.1.0.11 } drop", 'table inet hx_$HX_ID']),
    ("crash_loop", ["/etc/systemd/system/$UNIT.d", "Restart=always"]),
    ("nic_down", ['--unit="hx-$HX_ID-down" ip link set dev "$IF" down']),
])
def test_rendered_commands(rendered, fault, needles):
    inject = script(rendered, fault, "inject")
    for needle in needles:
        assert needle in inject, needle


def test_handle_is_owned_and_stable(rendered):
    lines = [x for x in script(rendered, "netem", "inject").splitlines()
             if x.startswith("HX_HANDLE=")]
    assert lines and lines[0][len("HX_HANDLE="):].startswith("48")
    assert lines[0] in script(rendered, "bandwidth", "heal")
