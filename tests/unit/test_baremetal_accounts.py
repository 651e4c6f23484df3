"""The BMC account model of bare-metal pools (`accounts.py`): a task-facing account and the
harness's own in another slot, `secret:` references, quarantines, and the restore of both
accounts against a real BMC simulator (OpenIPMI's ipmi_sim on the loopback, no VM): an
agent with administrator rights on the BMC changes passwords, privileges, channel access
and LAN parameters; the check tells a refusal from silence; the out-of-band restore and
the in-band script put everything back."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from harness.errors import ConfigError, InputError, SubstrateError
from harness.substrates import ipmi
from harness.substrates.metal import accounts, lease, reset
from harness.substrates.metal.emulated_machine import EMU
from harness.substrates.metal.pool import load_pool, pools_dir, write_secret

POOL = """\
machines:
{machines}
"""
MACHINE = """\
  - name: node{i}
    ssh: {{host: 10.0.0.{i}, key: ~/.ssh/k}}
    bmc: {{address: 10.0.1.{i}, user: "${{HX_TASK_USER}}", password: "${{HX_TASK_PW}}",
          {harness}}}
"""
HARNESS = ('harness: {{user_id: {uid}, user: "secret:lab/node{i}.user", '
           'password: "secret:lab/node{i}.password"}}')


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    monkeypatch.setenv("HX_TASK_USER", "elabman")
    monkeypatch.setenv("HX_TASK_PW", "task-pw-1")
    pools_dir().mkdir()
    return tmp_path


def write_pool(n=3, uid=4, harness=True):
    machines = "".join(MACHINE.format(i=i, harness=HARNESS.format(uid=uid, i=i) if harness
                                      else "") for i in range(n))
    (pools_dir() / "lab.yaml").write_text(POOL.format(machines=machines.rstrip()))
    for i in range(n):
        secrets = Path(os.environ["HARNESS_HOME"]) / "secrets" / "lab"
        write_secret(secrets / f"node{i}.user", f"hxctl{i}\n")
        write_secret(secrets / f"node{i}.password", f"harness-pw-{i}\n")


def test_the_harness_account_is_another_slot_the_task_is_never_given(home):
    write_pool()
    pool = load_pool("lab")
    m = pool.machine("node1")
    task, mine = pool.task_credentials(m), pool.bmc_credentials(m)
    assert (task["user_id"], task["user"], task["password"]) == (2, "elabman", "task-pw-1")
    assert (mine["user_id"], mine["user"], mine["password"]) == (4, "hxctl1", "harness-pw-1")
    assert mine["address"] == task["address"] == "10.0.1.1" and mine["channel"] == 1
    assert pool.has_harness_account(m)
    # redaction knows both accounts, each value once
    assert set(pool.secrets()) == {"elabman", "task-pw-1", *(f"hxctl{i}" for i in range(3)),
                                   *(f"harness-pw-{i}" for i in range(3))}
    assert len(pool.secrets()) == len(set(pool.secrets()))


def test_a_pool_without_a_harness_account_uses_the_task_account(home):
    write_pool(harness=False)
    pool = load_pool("lab")
    m = pool.machines[0]
    assert not pool.has_harness_account(m)
    assert pool.bmc_credentials(m) == pool.task_credentials(m)


def test_secret_references_are_owner_only_files_under_the_secrets_directory(home):
    write_pool()
    path = home / "secrets" / "lab" / "node0.password"
    path.chmod(0o644)
    pool = load_pool("lab")
    with pytest.raises(ConfigError, match=r"machines.0.bmc.harness.password: secret file .* "
                                          r"must be a regular file of mode 0600"):
        pool.bmc_credentials(pool.machines[0])
    path.unlink()
    with pytest.raises(ConfigError, match="does not exist"):
        pool.bmc_credentials(pool.machines[0])
    text = (pools_dir() / "lab.yaml").read_text()
    for bad in ("secret:../escape", "secret:/etc/shadow", "secret:a/../../b"):
        (pools_dir() / "lab.yaml").write_text(text.replace("secret:lab/node0.user", bad, 1))
        with pytest.raises(ConfigError, match="a literal credential"):
            load_pool("lab")


def test_the_harness_slot_must_differ_from_the_task_slot(home):
    write_pool(uid=2)
    with pytest.raises(ConfigError, match=r"harness.user_id 2 is the task-facing account's "
                                          "slot"):
        load_pool("lab")


def test_restore_commands_set_both_accounts_without_a_password_on_any_command_line():
    task = {"user_id": 2, "user": "elabman", "password": "t" * 18}
    mine = {"user_id": 4, "user": "hxctl", "password": "h-pw"}
    cmds = accounts.restore_commands([task, mine], channel=1)
    assert cmds[:5] == ["user set name 2 elabman", f"user set password 2 {'t' * 18} 20",
                        "channel setaccess 1 2 callin=on ipmi=on link=on privilege=4",
                        "user priv 2 4 1", "user enable 2"]
    assert "user set password 4 h-pw" in cmds and cmds[-1] == "lan set 1 access on"
    script = accounts.in_band_script("10.0.1.5")
    assert "h-pw" not in script and "ttt" not in script and "ipmitool shell" in script
    stdin = accounts.in_band_stdin({**mine, "channel": 1}, task).decode()
    assert "user set password 4 h-pw\n" in stdin and stdin.endswith("exit\n")
    for bad in ("has space", "quo'te", "x" * 21):
        with pytest.raises(SubstrateError):
            accounts.restore_commands([{**task, "password": bad}])
    assert accounts.ipmi_sim_users([task, mine]) == (
        f'  user 2 true "elabman" "{"t" * 18}" admin 10 md5 md2 straight\n'
        '  user 4 true "hxctl" "h-pw" admin 10 md5 md2 straight\n')


def test_a_quarantined_machine_is_never_leased_until_lifted(home):
    write_pool()
    pool = load_pool("lab")
    first = lease.quarantine("lab", "node1", "BMC 10.0.1.1:623 refuses the harness", "t-1")
    again = lease.quarantine("lab", "node1", "another reason")
    assert again == first and first["repair"] == "harness pool repair lab node1"
    assert list(lease.quarantined("lab")) == ["node1"] and lease.read("lab") == {}
    with pytest.raises(InputError, match=r"3 machine\(s\) needed, 2 not quarantined; "
                                         r"quarantined .*harness pool repair lab.*: node1 "
                                         r"\(BMC 10.0.1.1:623 refuses the harness\)"):
        lease.acquire(pool, "t-2", "c", 3, wait_sec=30)
    assert [m.name for m in lease.acquire(pool, "t-2", "c", 2)] == ["node0", "node2"]
    lease.release("lab", "t-2")
    assert lease.lift("lab", "node1") and not lease.lift("lab", "node1")
    assert len(lease.acquire(pool, "t-3", "c", 3)) == 3
    lease.release("lab", "t-3")


def test_a_reset_the_bmc_refuses_quarantines_and_releases_the_machine(home, monkeypatch,
                                                                       capsys):
    write_pool()
    pool = load_pool("lab")
    lease.acquire(pool, "t-1", "c", 2)
    calls = []

    def refused(pool, name, log=print):
        calls.append(name)
        raise ipmi.BmcRefused(f"BMC of {name} refuses the harness account (user id 4): "
                              "wrong password")

    monkeypatch.setattr(reset, "reset", refused)
    assert reset.main(["release", "--pool", "lab", "--trial", "t-1", "--machine",
                       "node0"]) == 0
    assert "node0" not in lease.read("lab")  # released: the pool stays usable
    record = lease.quarantined("lab")["node0"]
    assert record["trial"] == "t-1" and "wrong password" in record["reason"]
    assert "is quarantined" in capsys.readouterr().err
    # a quarantined machine is not reset again (gc, the portal): left for the repair
    assert reset.reset_or_quarantine(pool, "node0") == \
        "quarantined: left for `harness pool repair`"
    assert calls == ["node0"]
    # another failure keeps the lease, for gc
    monkeypatch.setattr(reset, "reset", lambda *a, **k: (_ for _ in ()).throw(
        SubstrateError("baremetal", "ssh timed out")))
    assert reset.main(["release", "--pool", "lab", "--trial", "t-1", "--machine",
                       "node1"]) == 1
    assert lease.read("lab")["node1"]["trial"] == "t-1"
    lease.release("lab", "t-1")


# -- against a real BMC simulator --------------------------------------------------------

SIM_CONF = """name "hxtest"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 {port}
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid 00112233445566778899aabbccddeeff
  endlan
{users}"""


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def sim(tmp_path):
    """ipmi_sim on 127.0.0.1 with the task account (user 2) and the harness's (user 4);
    yields (task creds, harness creds)."""
    if not (shutil.which("ipmi_sim") and shutil.which("ipmitool")):
        pytest.skip("ipmi_sim / ipmitool missing (Debian packages openipmi, ipmitool)")
    port = _free_udp_port()
    base = {"address": "127.0.0.1", "port": port, "interface": "lanplus", "cipher_suite": 3,
            "channel": 1}
    task = {**base, "user_id": 2, "user": "elabman", "password": "task-pw-1"}
    mine = {**base, "user_id": 4, "user": "hxctl", "password": "harness-pw-1"}
    (tmp_path / "lan.conf").write_text(SIM_CONF.format(
        port=port, users=accounts.ipmi_sim_users([task, mine])))
    (tmp_path / "bmc.emu").write_text(EMU)
    (tmp_path / "state").mkdir()
    proc = subprocess.Popen(["ipmi_sim", "-c", str(tmp_path / "lan.conf"), "-f",
                             str(tmp_path / "bmc.emu"), "-s", str(tmp_path / "state"), "-n"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while ipmi.run(mine, "chassis", "power", "status", retries=(1, 1)).returncode:
            assert time.monotonic() < deadline, "ipmi_sim did not answer"
            time.sleep(0.1)
        yield task, mine
    finally:
        proc.kill()
        proc.wait()


def as_agent(task: dict, *commands: str) -> None:
    """What an agent with the task-facing (administrator) account does to the BMC."""
    out = ipmi.shell(task, list(commands))
    assert "ipmitool>" in out


def test_check_tells_a_refusal_from_silence(sim):
    task, mine = sim
    accounts.check(mine)
    accounts.check(task, "the task-facing account")
    with pytest.raises(ipmi.BmcRefused, match=r"refuses the harness account \(user id 4\): "
                                              "wrong password"):
        accounts.check({**mine, "password": "not-it"})
    with pytest.raises(ipmi.BmcRefused, match="no such user name"):
        accounts.check({**mine, "user": "nobody"})
    with pytest.raises(SubstrateError, match="no answer") as silent:
        accounts.check({**mine, "port": _free_udp_port()})
    assert not isinstance(silent.value, ipmi.BmcRefused)
    as_agent(task, "user priv 4 2 1")  # the harness's slot down to USER
    with pytest.raises(ipmi.BmcRefused, match="lost its administrator privilege"):
        accounts.check(mine)
    assert "harness-pw-1" not in str(silent.value)


def test_the_out_of_band_restore_undoes_an_agents_changes(sim):
    task, mine = sim
    as_agent(task, "user priv 4 1 1", "channel setaccess 1 4 ipmi=off privilege=1",
             "lan set 1 cipher_privs XXXXXXXXXXXXXXX", "lan set 1 access off",
             "user set name 2 pwned", "user set password 2 agent-pw")
    with pytest.raises(ipmi.BmcRefused):
        accounts.check(mine)
    with pytest.raises(ipmi.BmcRefused):
        accounts.check(task, "the task-facing account")
    accounts.restore_out_of_band(mine, task)  # (checks both accounts afterwards)
    assert ipmi.power({**task, "interface": "lan"}, "status") == "off"  # IPMI 1.5 too


def test_the_in_band_script_restores_a_harness_account_the_bmc_refuses(sim, tmp_path):
    """The agent disabled the harness's slot and changed its password: nothing out of band
    works for the harness. The in-band script (run here with an `ipmitool` that reaches
    the simulator as the node's /dev/ipmi0 would) restores it, the passwords on stdin."""
    task, mine = sim
    as_agent(task, "user set password 4 agent-pw", "user disable 4")
    with pytest.raises(ipmi.BmcRefused):
        accounts.check(mine)
    with pytest.raises(SubstrateError):
        accounts.restore_out_of_band(mine, task)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ipmitool").write_text(
        f"#!/bin/sh\nexec {shutil.which('ipmitool')} -I lanplus -C 3 -H 127.0.0.1 -p "
        f"{task['port']} -U {task['user']} -E \"$@\"\n")
    (fake / "ipmitool").chmod(0o755)
    script = accounts.in_band_script("127.0.0.1").replace("[ -e /dev/ipmi0 ]", "true")
    proc = subprocess.run(["sh", "-c", script], input=accounts.in_band_stdin(mine, task),
                          capture_output=True, timeout=60,
                          env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}",
                               "IPMI_PASSWORD": task["password"]})
    assert proc.returncode == 0, proc.stderr
    accounts.check(mine)
    accounts.check(task, "the task-facing account")


def test_a_trial_that_meets_a_refusing_bmc_quarantines_it_before_its_window(home,
                                                                           monkeypatch,
                                                                           tmp_path):
    """wait_ready logs in to every leased machine's BMC with the harness account first: a
    refusal quarantines the machine (the trial stops before the agent's window, naming
    it and the repair); the node files only ever get the task-facing account."""
    import asyncio
    from types import SimpleNamespace

    from harness.config import Settings
    from harness.substrates import get_substrate
    from harness.substrates.base import TrialSpec

    write_pool()
    sub = get_substrate("baremetal", settings=Settings(substrates={"baremetal": {
        "pool": "lab"}}))
    nodes = [SimpleNamespace(name=f"n{i}", host="") for i in range(2)]
    spec = TrialSpec("bm-q", "c", SimpleNamespace(name="t", nodes=nodes, primary=nodes[0]),
                     tmp_path / "trial")
    sub.terraform_vars(spec)
    got = sub.nodes(spec, {})
    assert {n.extra["bmc"]["user"] for n in got} == {"elabman"}
    assert all("harness-pw" not in str(n.extra) and "user_id" not in n.extra["bmc"]
               for n in got)

    def check(creds, what="the harness account"):
        if creds["address"] == "10.0.1.1":
            raise ipmi.BmcRefused("BMC 10.0.1.1:623 refuses the harness account (user id "
                                  "4): wrong password")

    monkeypatch.setattr(accounts, "check", check)
    with pytest.raises(SubstrateError, match=r"machine node1 of pool lab is quarantined: BMC "
                                             r"10.0.1.1:623 refuses .*harness pool repair lab "
                                             r"node1"):
        asyncio.run(sub.wait_ready(got))
    assert lease.quarantined("lab")["node1"]["trial"] == "bm-q"
    lease.release("lab", "bm-q")
