"""Bare metal on an emulated pool, for real (marker: libvirt). `harness pool emulate` makes
three QEMU machines whose BMCs are OpenIPMI's ipmi_sim: IPMI 1.5 (`-I lan`) and 2.0
(`-I lanplus`) answer from this host and from node0 over the management network, in-band
`ipmitool` works on the node (`/dev/ipmi0`), chassis power off really stops the machine
and power on brings it back, Serial-over-LAN carries the console both ways, and a non-root
SSH login with sudo acts as root. An InfraBench CloudLab task then runs unmodified on the
pool (leases, the reimage reset at teardown, a clean machine for the next trial), a killed
trial's stale lease is reset and reclaimed by gc, InfraBench's IPMI task (its bootstrap
sets BMC user 2's password in-band) runs with an agent that also rewrites the BMCs' other
accounts and LAN settings in-band and the pool is usable again after it, a BMC that
refuses the harness is quarantined until `harness pool repair`, the L1 faults act through
the BMCs of a kept trial, the L1 and L3 seed tasks score as they should, and `harness pool
remove` leaves nothing behind."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.agents import get_agent
from harness.cli.main import run as cli
from harness.config import Settings
from harness.errors import InputError, SubstrateError
from harness.substrates import get_substrate, ipmi, ssh
from harness.substrates.hypervisor import host
from harness.substrates.metal import accounts, booted, emulate, lease, reset
from harness.substrates.metal.pool import load_pool, pool_path, pools_dir
from harness.task import load_task
from harness.trial import Trial, make_trial_id
from tests.integration.faultcheck import cli as fault_cli
from tests.integration.faultcheck import inject_verify_heal_twice, session, write_task
from tests.integration.faultcheck import on_node as on_fault_node
from tests.integration.test_libvirt_substrate import libvirt_unavailable

pytestmark = [pytest.mark.libvirt,
              pytest.mark.skipif(libvirt_unavailable() is not None,
                                 reason=str(libvirt_unavailable())),
              pytest.mark.skipif(shutil.which("ipmi_sim") is None,
                                 reason="ipmi_sim missing (Debian package openipmi)"),
              pytest.mark.skipif(os.geteuid() != 0, reason="BMC addresses need root")]


def on_node(pool, node: str, cmd: str, timeout: float = 60, stdin: bytes | None = None):
    m = pool.machine(node)
    return asyncio.run(ssh.exec_on(m.ssh.host, m.ssh.key_path, cmd, timeout, stdin=stdin))


def domain_active(name: str) -> bool:
    conn = host.connect(emulate.URI)
    try:
        return bool(conn.lookupByName(name).isActive())
    finally:
        conn.close()


def test_emulated_pool_bmcs_speak_ipmi_in_and_out_of_band(pool_name):
    name = pool_name
    assert cli(["pool", "emulate", name, "--nodes", "3"]) == 0
    pool = load_pool(name)
    assert pool.emulated and [m.name for m in pool.machines] == ["node0", "node1", "node2"]
    creds = {m.name: pool.task_credentials(m) for m in pool.machines}  # user 2, elabman
    mine = {m.name: pool.bmc_credentials(m) for m in pool.machines}  # the harness's own
    assert {(c["user_id"], c["user"]) for c in creds.values()} == {(2, "elabman")}
    assert {c["user_id"] for c in mine.values()} == {accounts.HARNESS_USER_ID}
    written = pool_path(name).read_text() + (pools_dir() / f"{name}.vault.yml").read_text()
    assert all(c["password"] not in written for c in [*creds.values(), *mine.values()])
    for m in pool.machines:  # both accounts work; the harness's password is owner-only
        accounts.check(mine[m.name])
        accounts.check(creds[m.name], "the task-facing account")
        assert emulate.machine_files(name, m.name)["harness_password"].stat().st_mode \
            & 0o077 == 0

    for interface in ("lan", "lanplus"):  # IPMI 1.5 and 2.0 from the controller
        assert ipmi.power({**creds["node1"], "interface": interface}, "status") == "on"
    res = on_node(pool, "node0", "ipmitool mc info")  # in-band, through /dev/ipmi0
    assert res.ok and "Device ID" in res.stdout, res.stderr
    b = creds["node1"]  # out-of-band from node0 over the management network
    res = on_node(pool, "node0", f"IPMI_PASSWORD='{b['password']}' ipmitool -I lan -H "
                  f"{b['address']} -U {b['user']} -E chassis power status")
    assert res.ok and "Chassis Power is on" in res.stdout, res.stderr

    node1 = pool.machine("node1")
    ipmi.power(creds["node1"], "off")
    deadline = time.monotonic() + 90
    while domain_active(node1.domain) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not domain_active(node1.domain)
    assert ipmi.power(creds["node1"], "status") == "off"
    ipmi.power(creds["node1"], "on")
    asyncio.run(ssh.wait_ready(node1.ssh.host, node1.ssh.key_path, 240))
    assert domain_active(node1.domain)
    assert lease.read(name) == {}
    assert_a_sudo_login_runs_as_root(pool, "node2")
    # Serial-over-LAN: the guest's serial console both ways (its login prompt arrives, what
    # is typed reaches getty, which echoes it and asks for the password)
    before, after = sol_session(creds["node1"])
    assert b"SOL Session operational" in before and b"node1 login:" in before, before
    assert b"root" in after and b"Password:" in after, after


def assert_a_sudo_login_runs_as_root(pool, node: str) -> None:
    """A machine whose pool file says `ssh: {user: labops}` (a non-root user with
    password-less sudo): the harness's commands and copies still act as root."""
    m = pool.machine(node)
    add = ("useradd -m -s /bin/bash labops && install -d -m 700 -o labops ~labops/.ssh"
           " && install -m 600 -o labops /root/.ssh/authorized_keys ~labops/.ssh/ && echo "
           "'labops ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/labops")
    assert on_node(pool, node, add).ok
    try:
        async def as_labops():
            await ssh.wait_ready(m.ssh.host, m.ssh.key_path, 30, user="labops")
            res = await ssh.exec_on(m.ssh.host, m.ssh.key_path, "id -un; echo \"$V\"", 30,
                                    env={"V": "it's"}, user="labops")
            await ssh.put(m.ssh.host, m.ssh.key_path, Path(__file__), "/root/hx-put",
                          user="labops")
            return res
        res = asyncio.run(as_labops())
        assert res.ok and res.stdout.split("\n")[:2] == ["root", "it's"], res
        owner = on_node(pool, node, f"stat -c %U /root/hx-put/{Path(__file__).name}")
        assert owner.stdout.strip() == "root"
    finally:
        ssh.close_master(m.ssh.host, m.ssh.key_path)
        assert on_node(pool, node, "rm -rf /root/hx-put /etc/sudoers.d/labops; "
                                   "userdel -r labops").ok


def sol_session(creds: dict, typed: bytes = b"root\r", wait: float = 180) -> tuple[bytes, bytes]:
    """What an IPMI 2.0 Serial-over-LAN console shows, as a user at a terminal sees it:
    `ipmitool sol activate` on a pty; Enter every 2 s until the guest's login prompt arrives,
    then `typed`, then `~.` once more output came back (or at `wait` seconds). Returns the
    output before and after `typed`."""
    env = {**os.environ, "IPMI_PASSWORD": creds["password"]}
    base = ["ipmitool", "-I", "lanplus", "-H", creds["address"], "-U", creds["user"], "-E"]
    subprocess.run([*base, "sol", "deactivate"], capture_output=True, env=env)
    pid, fd = pty.fork()
    if pid == 0:  # the child: ipmitool on the pty
        os.execvpe("ipmitool", [*base, "sol", "activate"], env)
    before, after, sent, enter_at = b"", b"", False, 0.0
    deadline = time.monotonic() + wait
    try:
        while time.monotonic() < deadline and not (sent and b"Password:" in after):
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if sent:
                    after += chunk
                else:
                    before += chunk
            if not sent and b"login:" in before:
                os.write(fd, typed)
                sent = True
            elif not sent and b"operational" in before and time.monotonic() > enter_at:
                os.write(fd, b"\r")
                enter_at = time.monotonic() + 2
        os.write(fd, b"~.")
        time.sleep(1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
        subprocess.run([*base, "sol", "deactivate"], capture_output=True, env=env)
    return before, after


CLOUDLAB_TASK = Path(__file__).resolve().parent / "tasks" / "cloudlab-cluster"


def test_cloudlab_task_runs_unmodified_on_the_emulated_pool(pool_name, tmp_path):
    settings = Settings(substrates={"baremetal": {"pool": pool_name}})
    task = load_task(CLOUDLAB_TASK)
    assert task.format == "infrabench" and task.env.type == "cloudlab"
    sub = get_substrate("baremetal", settings=settings)
    trial_id = make_trial_id(task.name, "oracle", 1)
    trial = Trial(task=task, agent=get_agent("oracle"), substrate=sub,
                  root=tmp_path / "trials" / trial_id, trial_id=trial_id, campaign="bm-pytest")
    rec = asyncio.run(trial.run())
    assert rec.status == "passed" and rec.reward == 1.0, (rec.error, rec.checks)
    assert rec.leaks == [] and lease.read(pool_name) == {}
    plan = json.loads((trial.root / "baremetal" / "machines.json").read_text())
    assert [(p["node"], p["machine"], p["host_hint"]) for p in plan] == [
        ("node0", "node0", "ms0101.example.cloudlab.us"),
        ("node1", "node1", "ms0102.example.cloudlab.us")]
    pool = load_pool(pool_name)
    for m in pool.machines:  # reimaged at teardown: nothing of the trial is left
        asyncio.run(ssh.wait_ready(m.ssh.host, m.ssh.key_path, 240))
        assert reset.dirty(m) == []
        res = on_node(pool, m.name, "test ! -e /root/bootstrap-ran && test ! -e /root/ready")
        assert res.ok
    secrets = pool.secrets()
    for path in trial.root.rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            assert not any(s.encode() in text for s in secrets), path


INFRABENCH_IPMI = Path(__file__).resolve().parent / "tasks" / "infrabench-ipmi"
# InfraBench's reference steps for its IPMI task (its solution.md, with the BMC address and
# node name from the files its bootstrap and the runtime write instead of a lab's)
REFERENCE_STEPS = [
    '. /etc/syscraft/ipmi-incident.env; ipmitool -I lan -H "$node1_bmc" -U elabman '
    "-P Test1234 chassis power status",
    '. /etc/syscraft/ipmi-incident.env; ipmitool -I lan -H "$node1_bmc" -U elabman '
    "-P Test1234 chassis power on",
    {"cmd": ". /etc/syscraft/ipmi-incident.env; for i in $(seq 100); do ssh -o "
            "ConnectTimeout=5 -o BatchMode=yes \"root@$node1_host\" true && exit 0; "
            "sleep 3; done; exit 1", "timeout_sec": 400}]
# then what a hostile agent with root does to every BMC in-band (/dev/ipmi0): every other
# account's password changed, its privilege lowered, it disabled; the LAN channel's
# access, authentication types and cipher suites changed; on node2 user 2 renamed too
TAMPER = ("for id in $(seq 3 8); do ipmitool user set password $id agent-owns-it; "
          "ipmitool user priv $id 1 1; ipmitool channel setaccess 1 $id ipmi=off; "
          "ipmitool user disable $id; done; ipmitool lan set 1 access off; "
          "ipmitool lan set 1 auth ADMIN NONE; ipmitool lan set 1 cipher_privs "
          "XXXXXXXXXXXXXXX; ipmitool lan set 1 ipaddr 10.9.9.9; ipmitool user list 1; true")
# (on the three machines at once: each in-band ipmitool call takes about a second in a TCG guest)
TAMPER_STEPS = [{"cmd": f"{{ {TAMPER}; }} & ssh -o BatchMode=yes root@node1 '{TAMPER}' & "
                        f"ssh -o BatchMode=yes root@node2 '{TAMPER}; ipmitool user set name 2 "
                        "pwned' & wait", "timeout_sec": 300}]


def infrabench_ipmi_task() -> Path:
    """InfraBench's published `ipmi-node-power-recovery` when HARNESS_INFRABENCH_TASKS names
    a checkout of its tasks/ directory, else the stand-in written with its conventions."""
    published = Path(os.environ.get("HARNESS_INFRABENCH_TASKS", "/nonexistent")) / \
        "ipmi-node-power-recovery"
    return published if (published / "task.toml").is_file() else INFRABENCH_IPMI


def ensure_pool(name: str):
    """The worker's pool (the first test of the module makes it; alone, a test makes it)."""
    if not pool_path(name).exists():
        emulate.emulate(name, 3)
    return load_pool(name)


def test_an_agent_with_root_cannot_wedge_the_pool_through_its_bmcs(pool_name, tmp_path):
    """InfraBench's IPMI task through the plain trial path on the pool: its bootstrap sets
    BMC user 2's password in-band on every machine (as it does on CloudLab, whose user 2
    is `elabman`) and powers node1 off as elabman. The agent (replay) runs the reference
    steps, then rewrites every other BMC account and the LAN settings in-band, so the
    harness's own account no longer works anywhere. The node files name the task account
    only. The reset (gc of the kept trial) gives the harness its account back and the task
    account its password, nothing is quarantined; a second trial (nop) leases the same
    machines, its bootstrap powers node1 off again and its teardown powers it back on."""
    pool = ensure_pool(pool_name)
    settings = Settings(substrates={"baremetal": {"pool": pool_name}})
    task = load_task(infrabench_ipmi_task())
    assert task.format == "infrabench" and task.env.type == "cloudlab"
    trial_id = make_trial_id(task.name, "replay", 1)
    trial = Trial(task=task, agent=get_agent("replay", commands=REFERENCE_STEPS + TAMPER_STEPS),
                  substrate=get_substrate("baremetal", settings=settings),
                  root=tmp_path / "trials" / trial_id, trial_id=trial_id,
                  campaign="bm-wedge", keep=True)
    rec = asyncio.run(trial.run())
    try:
        assert rec.status == "passed" and rec.reward == 1.0, (rec.error, rec.checks)
        task_creds = {m.name: pool.task_credentials(m) for m in pool.machines}
        mine = {m.name: pool.bmc_credentials(m) for m in pool.machines}
        # the node files give the primary the task-facing account of every BMC, and nothing
        # on any node names the harness's account
        res = on_node(pool, "node0", "cat /etc/harness/bmc-credentials")
        assert res.ok, res.stderr
        assert sorted(res.stdout.split()) == sorted(
            f"{n}_bmc{k}={v}" for n, c in task_creds.items()
            for k, v in (("", f"{c['address']}:623"), ("_user", "elabman"),
                         ("_password", c["password"]), ("_interface", "lanplus"),
                         ("_cipher", c["cipher_suite"])))
        values = "".join(f"{c[k]}\n" for c in mine.values() for k in ("user", "password"))
        for m in pool.machines:  # (the values on stdin: on no command line a logger keeps)
            leak = on_node(pool, m.name, "grep -rlsFf /dev/stdin /etc/harness /etc/syscraft "
                           "/opt /root /tmp /var/log/harness; true", stdin=values.encode())
            assert leak.ok and leak.stdout.strip() == "", (m.name, leak.stdout)
        info = on_node(pool, "node0", "cat /etc/harness/cluster-info /etc/syscraft/cluster-info")
        assert "_user" not in info.stdout and "_password" not in info.stdout, info.stdout
        # what the agent did took hold: the harness's own account is refused everywhere
        for m in pool.machines:
            with pytest.raises(ipmi.BmcRefused):
                accounts.check(mine[m.name])
    finally:
        gc = fault_cli("gc", "--trial", trial_id, "--json")
        assert gc.returncode == 0, gc.stderr
    assert lease.read(pool_name) == {} and lease.quarantined(pool_name) == {}, gc.stdout
    for m in pool.machines:  # the reset restored both accounts and the LAN settings
        accounts.check(pool.bmc_credentials(m))
        accounts.check(pool.task_credentials(m), "the task-facing account")
        lan = on_node(pool, m.name, "ipmitool lan print 1; ipmitool user list 1")
        assert f"IP Address              : {m.bmc.address}" in lan.stdout, lan.stdout
        assert "pwned" not in lan.stdout
    for path in trial.root.rglob("*"):  # the harness's account is in no file of the run
        if path.is_file():
            text = path.read_bytes()
            assert not any(str(c[k]).encode() in text for c in mine.values()
                           for k in ("user", "password")), path

    trial_id = make_trial_id(task.name, "nop", 1)
    trial = Trial(task=task, agent=get_agent("nop"), substrate=get_substrate(
        "baremetal", settings=settings), root=tmp_path / "trials" / trial_id,
        trial_id=trial_id, campaign="bm-wedge")
    rec = asyncio.run(trial.run())
    assert rec.status == "failed" and rec.reward == 0.0, (rec.error, rec.checks)
    assert rec.leaks == [] and lease.read(pool_name) == {}
    assert lease.quarantined(pool_name) == {}
    for m in pool.machines:  # node1 left off by nop: the reset powered it on
        assert ipmi.power(pool.bmc_credentials(m), "status") == "on"
        accounts.check(pool.task_credentials(m), "the task-facing account")


def test_a_bmc_that_refuses_the_harness_is_quarantined_until_repaired(pool_name, capsys):
    """A machine whose BMC no longer takes the harness account (changed in-band on a free
    machine, as a real pool's reset could not undo) is quarantined by `harness pool check`
    with the reason; status and list say so; no trial can lease it; `harness pool repair`
    makes its BMC configuration again (a new harness password), restarts it and reimages
    the machine, then lifts the quarantine."""
    pool = ensure_pool(pool_name)
    m = pool.machine("node1")
    before = pool.bmc_credentials(m)
    res = on_node(pool, "node1", f"ipmitool user set password {accounts.HARNESS_USER_ID} "
                                 f"x-agent-x; ipmitool user disable {accounts.HARNESS_USER_ID}")
    assert res.ok, res.stderr
    capsys.readouterr()
    assert cli(["pool", "check", pool_name]) == 1
    out = capsys.readouterr().out
    assert "node0      ok" in out and "node1      quarantined: BMC" in out, out
    assert cli(["pool", "status", pool_name, "--json"]) == 0
    rows = {r["machine"]: r for r in json.loads(capsys.readouterr().out)["machines"]}
    reason = rows["node1"]["quarantine"]["reason"]
    assert f"refuses the harness account (user id {accounts.HARNESS_USER_ID})" in reason
    assert rows["node0"]["quarantine"] is None
    assert before["password"] not in reason and before["user"] not in reason
    assert cli(["pool", "list"]) == 0
    assert "1 quarantined (node1" in capsys.readouterr().out
    with pytest.raises(InputError, match="quarantined .*: node1 "):
        lease.acquire(pool, "bm-quarantine", "c", 3)
    assert cli(["pool", "repair", pool_name]) == 0
    assert "node1: repaired in" in capsys.readouterr().out
    assert lease.quarantined(pool_name) == {} and lease.read(pool_name) == {}
    after = load_pool(pool_name).bmc_credentials(m)
    assert after["password"] != before["password"]  # rotated
    accounts.check(after)
    assert ipmi.power(after, "status") == "on"
    asyncio.run(ssh.wait_ready(m.ssh.host, m.ssh.key_path, 240))
    assert reset.dirty(m) == []


def test_a_killed_trials_lease_is_reset_and_reclaimed_by_gc(pool_name):
    pool = load_pool(pool_name)
    code = ("import time; from harness import owner; "
            "from harness.substrates.metal import lease; "
            "from harness.substrates.metal.pool import load_pool; "
            f"owner.hold_trial('bm-dead'); lease.acquire(load_pool('{pool_name}'), "
            "'bm-dead', 'bm-pytest', 1); print('held', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    [machine] = lease.read(pool_name)
    assert on_node(pool, machine, "mkdir -p /opt/syscraft && touch /opt/syscraft/x").ok
    assert reset.dirty(pool.machine(machine)) == ["/opt/syscraft"]
    sub = get_substrate("baremetal", settings=Settings(substrates={"baremetal": {
        "pool": pool_name}}))
    assert sub.leftovers(trial="bm-dead") == []  # live: never touched
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # its BMC is gone too (as after a host reboot): the reimage starts it again
    bmc_pid = int(emulate.machine_files(pool_name, machine)["pid"].read_text().split()[0])
    os.killpg(bmc_pid, signal.SIGKILL)
    m = pool.machine(machine)
    with pytest.raises(SubstrateError):
        ipmi.power(pool.bmc_credentials(m), "status")
    assert sub.leftovers(trial="bm-dead") == [f"lease {pool_name}/{machine} (trial bm-dead)"]
    swept = sub.sweep(trial="bm-dead")
    assert swept == [f"lease {pool_name}/{machine} (trial bm-dead; reimage)"], swept
    assert lease.read(pool_name) == {}
    assert ipmi.power(pool.bmc_credentials(m), "status") == "on"
    asyncio.run(ssh.wait_ready(m.ssh.host, m.ssh.key_path, 240))
    assert reset.dirty(m) == []
    # the reimage restored the machine's saved first boot (same kernel boot, not a new one),
    # its clock stepped to this host's
    saved = json.loads(booted.files(emulate.pool_dir(pool_name), machine)["meta"].read_text())
    before = time.time()
    res = on_node(pool, machine, "cat /proc/sys/kernel/random/boot_id; date +%s.%N")
    after = time.time()
    boot_id, clock = res.stdout.split()
    assert boot_id == saved["boot_id"], res.stdout
    assert before - 1 <= float(clock) <= after + 1, (before, res.stdout, after)


FAULT_FIXTURE = {
    "task.toml": """
        version = "1.0"
        [task]
        name = "faults-bm-fixture"
        [agent]
        timeout_sec = 60
        [verifier]
        timeout_sec = 60
        [environment]
        type = "baremetal"
        [[environment.nodes]]
        name = "node0"
        [[environment.nodes]]
        name = "node1"
        """,
    "instruction.md": "Nothing to do: the fixture of the bare-metal fault tests.\n",
    "tests/test.sh": "#!/bin/bash\necho 1.0 > /logs/verifier/reward.txt\n",
    "environment/bootstrap.sh": """
        #!/bin/bash
        set -euo pipefail
        cat > /etc/systemd/system/hxsvc.service <<'EOF'
        [Unit]
        Description=fixture service of the fault tests
        [Service]
        ExecStart=/usr/bin/python3 -m http.server 8080 --directory /etc
        [Install]
        WantedBy=multi-user.target
        EOF
        systemctl daemon-reload
        systemctl enable --now hxsvc
        """,
}


def test_l1_faults_act_through_the_bmcs_of_a_kept_trial(pool_name, tmp_path):
    """The L1 faults on bare metal, on a kept trial as `harness fault` uses it (its nodes
    rebuilt from the inventory: pool and machine, no credentials): a service stopped; the
    NIC taken down and healed through the BMC (the node no longer answers: a power cycle);
    a power cycle through the machine's BMC (heal waits for the boot); a power-off left to
    the controller's dead-man switch, which powers the machine on through its BMC after
    the injecting process is gone. Then `harness gc --trial` resets the machines and
    releases the leases."""
    settings = Settings(substrates={"baremetal": {"pool": pool_name}})
    task = load_task(write_task(tmp_path / "task", FAULT_FIXTURE))
    trial_id = make_trial_id(task.name, "nop", 1)
    trial = Trial(task=task, agent=get_agent("nop"), substrate=get_substrate(
        "baremetal", settings=settings), root=tmp_path / "trials" / trial_id,
        trial_id=trial_id, campaign="bm-faults", keep=True)
    rec = asyncio.run(trial.run())
    try:
        assert rec.status == "passed", rec.error
        kept = trial.paths.root
        asyncio.run(inject_verify_heal_twice(kept, "service_stop", "node1",
                                             {"service": "hxsvc"}))

        async def nic_down():
            s = session(kept)
            rec = await s.inject("nic_down", "node1", {}, deadman_sec=900)
            assert rec.states == {"node1": "injected"}, rec.states
            for _ in range(20):  # the NIC goes down once the inject's session has returned
                if not (await on_fault_node(s, "node0", "ping -c1 -W1 node1")).ok:
                    break
                await asyncio.sleep(1)
            else:
                raise AssertionError("node0 still reaches node1 with its NIC down")
            assert await s.heal(rec) == {"node1": True}  # unreachable: cycled by its BMC
            assert {h: st for h, (st, _) in (await s.verify(rec)).items()} == \
                {"node1": "healed"}
            assert (await on_fault_node(s, "node0", "ping -c1 -W2 node1")).ok
            left = await s.remaining()
            assert left == {}, left

        asyncio.run(nic_down())
        # power faults last (as on VMs): a power cycle restarts everything on the node
        asyncio.run(inject_verify_heal_twice(kept, "power_cycle", "node1", {}))
        res = fault_cli("fault", "inject", str(kept), "power_off", "--targets", "node1",
                        "--deadman", "5", "--json")
        assert res.returncode == 0, res.stderr
        fid = json.loads(res.stdout)["id"]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and session(kept).get(fid).active:
            time.sleep(2)
        log = (kept / "faults" / f"deadman-{fid}.log").read_text()
        assert not session(kept).get(fid).active and "dead-man switch healed" in log, log
        env = session(kept).env
        assert asyncio.run(env.substrate.power(env.node("node1"), "status")) == "on"
        assert asyncio.run(on_fault_node(session(kept), "node1", "true")).ok
    finally:
        gc = fault_cli("gc", "--trial", trial_id, "--json")
        assert gc.returncode == 0, gc.stderr
    assert lease.read(pool_name) == {}
    pool = load_pool(pool_name)
    for m in pool.machines:
        assert ipmi.power(pool.bmc_credentials(m), "status") == "on"


POWER_TASK = Path(__file__).resolve().parents[2] / "tasks" / "baremetal-power-loss"


def test_two_campaigns_take_turns_on_one_pool_with_the_l1_power_task(pool_name, tmp_path):
    """The L1 seed task as a user runs it: `harness campaign apply`, twice at once on the
    three-machine pool (the oracle in one campaign, nop in the other; each needs two
    machines). The second campaign's trial waits for the first one's lease, never shares a
    machine, and each scores as it should (oracle 1.0, nop < 0.5); nothing is left (leases,
    powered-off machines, gc)."""
    config = tmp_path / "config.yaml"
    config.write_text(f"substrates: {{baremetal: {{pool: {pool_name}}}}}\n")
    env = {**os.environ, "HARNESS_CONFIG": str(config)}
    runs = {}
    for agent in ("oracle", "nop"):
        camp = tmp_path / f"{agent}.yaml"
        camp.write_text(json.dumps({"name": f"bm-{agent}", "tasks": [str(POWER_TASK)],
                                    "agents": [{"name": agent}], "attempts": 1,
                                    "retries": 0}))
        run_dir = tmp_path / f"run-{agent}"
        runs[agent] = (run_dir, subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "campaign", "apply", str(camp), "--out",
             str(run_dir), "--json"], cwd=Path(__file__).resolve().parents[2], env=env,
            stdout=subprocess.DEVNULL, stderr=(tmp_path / f"{agent}.err").open("w")))
        if agent == "oracle":  # the nop campaign starts once the oracle's trial holds the pool
            deadline = time.monotonic() + 300
            while not lease.read(pool_name) and runs["oracle"][1].poll() is None:
                assert time.monotonic() < deadline, "the oracle's trial never leased"
                time.sleep(0.5)
    try:
        for agent, (_, proc) in runs.items():
            proc.wait(timeout=1500)
            assert proc.returncode == 0, (agent, (tmp_path / f"{agent}.err").read_text()[-2000:])
    finally:
        for _, proc in runs.values():
            if proc.poll() is None:
                proc.kill()
    recs = {}
    for agent, (run_dir, _) in runs.items():
        [path] = (run_dir / "trials").glob("*/result.json")
        recs[agent] = json.loads(path.read_text())
        rec = recs[agent]
        assert rec["leaks"] == [], rec["leaks"]
        assert {c.get("phase") for c in rec["checks"]} == {"functional", "cleanup"}, \
            f"{agent}: {rec['status']}: {rec['error']}"
    assert (recs["oracle"]["status"], recs["oracle"]["reward"]) == ("passed", 1.0), \
        (recs["oracle"]["error"], recs["oracle"]["checks"])
    assert recs["nop"]["status"] == "failed" and recs["nop"]["reward"] < 0.5, \
        (recs["nop"]["error"], recs["nop"]["checks"])
    events = [json.loads(line) for line in (
        runs["nop"][0] / "trials" / recs["nop"]["trial_id"] / "events.jsonl").open()]
    waited = [e for e in events if e["name"] == "provision.waiting"]
    assert waited and "trial " + recs["oracle"]["trial_id"] in waited[0]["data"]["reason"]
    assert lease.read(pool_name) == {}
    pool = load_pool(pool_name)
    for m in pool.machines:  # nop left node1 off: the reset at teardown powered it on
        assert ipmi.power(pool.bmc_credentials(m), "status") == "on"
        asyncio.run(ssh.wait_ready(m.ssh.host, m.ssh.key_path, 240))
        assert reset.dirty(m) == []
    for name in ("bm-oracle", "bm-nop"):
        gc = subprocess.run([sys.executable, "-m", "harness.cli", "gc", "--campaign", name,
                             "--dry-run", "--json"], capture_output=True, text=True, env=env)
        assert json.loads(gc.stdout)["total"] == 0, gc.stdout


L3_TASK = Path(__file__).resolve().parents[2] / "tasks" / "etcd-member-loss"


@pytest.mark.manual
@pytest.mark.timeout(2400)  # (two 3-node trials; the other lane's guests share the cores)
def test_l3_etcd_member_loss_oracle_passes_nop_fails(pool_name, tmp_path):
    """The L3 seed task in one campaign (oracle, then nop: each trial leases all three
    machines): a 3-member etcd cluster whose node2 is powered off through its BMC. The
    oracle removes the member, fixes the configs and retires node2 out of band (1.0); nop
    scores < 0.5; every check is phase-tagged; no lease, machine or gc leftover stays.

    A hand run (`manual`): CI runs the same task, oracle and nop, on the same kind of
    emulated machines through the cloudlab substrate, a subclass of this one
    (test_cloudlab_portal.py::test_l3_seed_task_through_the_provider_and_portal); the
    static pool's leases, waits and resets run in CI in the L1 tests of this module. Two
    3-node L3 trials at once on two cores took a quarter of CI's time."""
    config = tmp_path / "config.yaml"
    config.write_text(f"substrates: {{baremetal: {{pool: {pool_name}}}}}\n")
    env = {**os.environ, "HARNESS_CONFIG": str(config)}
    camp = tmp_path / "l3.yaml"
    camp.write_text(json.dumps({"name": "bm-l3", "tasks": [str(L3_TASK)],
                                "agents": [{"name": "oracle"}, {"name": "nop"}],
                                "attempts": 1, "retries": 0, "concurrency": {"total": 1}}))
    run_dir = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "harness.cli", "campaign", "apply", str(camp),
                          "--out", str(run_dir), "--json"], cwd=L3_TASK.parents[1],
                         env=env, capture_output=True, text=True, timeout=2400)
    assert res.returncode == 0, res.stderr[-2000:]
    recs = {}
    for path in (run_dir / "trials").glob("*/result.json"):
        rec = json.loads(path.read_text())
        recs[rec["agent"]["name"]] = rec
        assert rec["leaks"] == [], rec["leaks"]
        assert {c.get("phase") for c in rec["checks"]} == {"functional", "durability",
                                                           "cleanup"}
    assert (recs["oracle"]["status"], recs["oracle"]["reward"]) == ("passed", 1.0), \
        (recs["oracle"]["error"], recs["oracle"]["checks"])
    assert recs["nop"]["status"] == "failed" and recs["nop"]["reward"] < 0.5, \
        (recs["nop"]["error"], recs["nop"]["checks"])
    assert lease.read(pool_name) == {}
    pool = load_pool(pool_name)
    for m in pool.machines:
        assert ipmi.power(pool.bmc_credentials(m), "status") == "on"
    gc = subprocess.run([sys.executable, "-m", "harness.cli", "gc", "--campaign", "bm-l3",
                         "--dry-run", "--json"], capture_output=True, text=True, env=env)
    assert json.loads(gc.stdout)["total"] == 0, gc.stdout
