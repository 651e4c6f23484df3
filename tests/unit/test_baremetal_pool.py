"""Pool files (schema, credential references, vault) and exclusive leases, on files only:
two processes racing for one pool, a stale lease after a kill -9."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from harness.errors import ConfigError, InputError, ResourceBusy
from harness.substrates.metal import lease
from harness.substrates.metal.pool import load_pool, pools_dir

POOL = """\
machines:
{machines}
"""
MACHINE = """\
  - name: {name}
    ssh: {{host: 10.0.0.{i}, key: ~/.ssh/k}}
    bmc: {{address: 10.0.1.{i}, user: "${{HX_TEST_BMC_USER}}", password: "{password}"}}
    tags: [{tags}]
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    monkeypatch.setenv("HX_TEST_BMC_USER", "admin")
    monkeypatch.setenv("HX_TEST_BMC_PASSWORD", "s3cret-pw")
    pools_dir().mkdir()
    return tmp_path


def write_pool(name="lab", n=3, password="${HX_TEST_BMC_PASSWORD}", extra="", tags="x86"):
    machines = "".join(MACHINE.format(name=f"node{i}", i=i + 10, password=password, tags=tags)
                       for i in range(n))
    (pools_dir() / f"{name}.yaml").write_text(extra + POOL.format(machines=machines.rstrip()))


def test_credentials_are_references_resolved_from_env_or_vault(home):
    write_pool()
    pool = load_pool("lab")
    creds = pool.bmc_credentials(pool.machine("node1"))
    assert (creds["user"], creds["password"], creds["port"]) == ("admin", "s3cret-pw", 623)
    assert sorted(set(pool.secrets())) == ["admin", "s3cret-pw"]

    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.parsing.vault import VaultLib, VaultSecret

    (home / "vault-pass").write_text("vault-pw\n")
    lib = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(b"vault-pw"))])
    (pools_dir() / "lab.vault.yml").write_bytes(lib.encrypt(b"bmc_pw: from-the-vault\n"))
    write_pool(password="vault:bmc_pw",
               extra=f"vault_file: lab.vault.yml\nvault_password_file: {home}/vault-pass\n")
    pool = load_pool("lab")
    assert pool.bmc_credentials(pool.machines[0])["password"] == "from-the-vault"
    assert "from-the-vault" not in (pools_dir() / "lab.vault.yml").read_text()


@pytest.mark.parametrize("password,extra,key,why", [
    ("literal-pw", "", "machines.0.bmc.password", "a literal credential"),
    ("vault:x", "", "vault", "vault: references need vault_file"),
    ("${HX_TEST_BMC_PASSWORD}", "reset: reimage\n", "reset", "needs reimage_command"),
    ("${HX_TEST_BMC_PASSWORD}", "cost: 3\n", "cost", "unknown key"),
])
def test_bad_pool_files_name_file_key_and_what_is_valid(home, password, extra, key, why):
    write_pool(password=password, extra=extra)
    with pytest.raises(ConfigError) as info:
        load_pool("lab")
    assert "lab.yaml" in str(info.value) and why in str(info.value)
    assert key in str(info.value) or key == "vault"


def test_an_unset_variable_is_named_when_the_credential_is_needed(home, monkeypatch):
    write_pool()
    monkeypatch.delenv("HX_TEST_BMC_PASSWORD")
    pool = load_pool("lab")
    with pytest.raises(ConfigError, match=r"machines.2.bmc.password: environment variable "
                                          r"HX_TEST_BMC_PASSWORD is not set"):
        pool.bmc_credentials(pool.machines[2])


def test_leases_are_exclusive_and_released(home):
    write_pool()
    pool = load_pool("lab")
    got = lease.acquire(pool, "trial-a", "c", 2)
    assert [m.name for m in got] == ["node0", "node1"]
    assert [m.name for m in lease.acquire(pool, "trial-a", "c", 2)] == ["node0", "node1"]
    with pytest.raises(ResourceBusy, match=r"2 machine\(s\) needed, 1 free; leased: node0 "
                                           r"\(trial trial-a") as busy:
        lease.acquire(pool, "trial-b", "c", 2, wait_sec=30)
    assert busy.value.wait_sec == 30  # trial-a runs: trial-b's trial waits for it
    record = lease.read("lab")["node0"]
    assert record["trial"] == "trial-a" and record["pid"] == os.getpid()
    assert lease.release("lab", "trial-a") == ["node0", "node1"]
    assert lease.read("lab") == {}
    with pytest.raises(InputError, match="has 0 machine"):
        lease.acquire(pool, "trial-b", "c", 1, tags=["gpu"])


def _race(home: str, trial: str, out) -> None:
    os.environ["HARNESS_HOME"] = home
    from harness import owner

    owner.hold_trial(trial)
    try:
        got = lease.acquire(load_pool("lab"), trial, "c", 2)
        out.put((trial, [m.name for m in got]))
    except InputError as exc:
        out.put((trial, str(exc)))


def test_two_processes_never_hold_one_machine(home):
    write_pool()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(home), f"race-{i}", out)) for i in range(2)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=30) for _ in procs)
    for p in procs:
        p.join(30)
    winners = [v for v in results.values() if isinstance(v, list)]
    losers = [v for v in results.values() if isinstance(v, str)]
    assert len(winners) == 1 and len(losers) == 1, results
    assert "2 machine(s) needed, 1 free" in losers[0]


def test_a_killed_trials_lease_is_stale_and_kept_until_gc(home):
    write_pool(n=1)
    code = ("import os, sys, time; from harness import owner; "
            "from harness.substrates.metal import lease; "
            "from harness.substrates.metal.pool import load_pool; "
            "owner.hold_trial('dead-trial'); "
            "lease.acquire(load_pool('lab'), 'dead-trial', 'c', 1); print('held', flush=True); "
            "time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "HARNESS_HOME": str(home)})
    assert proc.stdout.readline().strip() == "held"
    assert lease.stale("lab") == {}  # live: its trial lock is held
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 5
    while lease.stale("lab") == {} and time.time() < deadline:
        time.sleep(0.05)
    assert list(lease.stale("lab")) == ["node0"]
    with pytest.raises(InputError, match=r"stale \(run `harness gc` to clean and reclaim\): "
                                         r"node0") as refused:
        lease.acquire(load_pool("lab"), "next", "c", 1, wait_sec=30)
    assert not isinstance(refused.value, ResourceBusy)  # no use waiting: only gc frees it
    assert lease.main(["check", "--pool", "lab", "--trial", "next", "--machine", "node0"]) == 1
    assert lease.main(["check", "--pool", "lab", "--trial", "dead-trial",
                       "--machine", "node0"]) == 0
    assert json.loads((lease.lease_dir("lab") / "node0.json").read_text())["trial"] == \
        "dead-trial"


def test_another_hosts_lease_is_live_while_its_heartbeat_is_fresh(home):
    write_pool(n=2)
    lease.acquire(load_pool("lab"), "remote-trial", "c", 2)
    for machine, age in (("node0", 10), ("node1", lease.HEARTBEAT_TTL_SEC + 60)):
        path = lease.lease_dir("lab") / f"{machine}.json"
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "host": "other-harness-host", "pid": 1,
                                    "heartbeat": time.time() - age}))
    records = lease.read("lab")
    assert lease.is_live(records["node0"]) and not lease.is_live(records["node1"])
    assert list(lease.stale("lab")) == ["node1"]
    assert list(lease.stale("lab", trial="remote-trial")) == ["node1"]
    with pytest.raises(InputError, match=r"stale .*: node1"):
        lease.acquire(load_pool("lab"), "local-trial", "c", 1)


def test_a_trials_heartbeat_runs_until_its_leases_are_released(home):
    write_pool(n=1)
    lease.acquire(load_pool("lab"), "beating", "c", 1)
    path = lease.lease_dir("lab") / "node0.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "heartbeat": 1.0}))
    thread = lease.keep_alive("lab", "beating", interval=0.05)
    assert lease.keep_alive("lab", "beating", interval=0.05) is thread
    deadline = time.time() + 10
    while lease.read("lab")["node0"]["heartbeat"] == 1.0:
        assert time.time() < deadline, "the heartbeat was never refreshed"
        time.sleep(0.05)
    assert thread.is_alive()
    lease.release("lab", "beating")
    thread.join(10)
    assert not thread.is_alive() and lease.read("lab") == {}
    shutil.rmtree(lease.lease_dir("lab"))  # a removed pool: a late beat makes no lock file
    assert lease.heartbeat("lab", "beating") == 0 and not lease.lease_dir("lab").exists()


def test_a_trial_leases_its_nodes_and_the_inventory_names_their_bmcs(home, tmp_path):
    """terraform_vars leases one machine per node (host hints first) and records the
    mapping; plan_vars leases nothing; the inventory gives each node its BMC address (no
    port when it is IPMI's 623) and never a credential."""
    from types import SimpleNamespace

    from harness.config import Settings
    from harness.substrates import get_substrate
    from harness.substrates.base import TrialSpec

    write_pool()
    sub = get_substrate("baremetal", settings=Settings(substrates={"baremetal": {
        "pool": "lab"}}))
    nodes = [SimpleNamespace(name="head", host="node2.cluster.example"),
             SimpleNamespace(name="worker", host="")]
    task = SimpleNamespace(name="t", nodes=nodes, primary=nodes[0])
    spec = TrialSpec("bm-1", "c", task, tmp_path / "trial")
    planned = sub.plan_vars(spec)
    assert lease.read("lab") == {} and planned["pool"] == "lab"
    tf = sub.terraform_vars(spec)
    assert tf["machines"] == [{"node": "head", "machine": "node2", "address": "10.0.0.12"},
                              {"node": "worker", "machine": "node0", "address": "10.0.0.10"}]
    assert sorted(lease.read("lab")) == ["node0", "node2"]
    got = sub.nodes(spec, {})
    assert [(n.name, n.primary, n.host) for n in got] == [("head", True, "10.0.0.12"),
                                                         ("worker", False, "10.0.0.10")]
    inv = sub.inventory(spec, got)
    assert inv["all"]["hosts"]["head"]["harness_bmc"] == "10.0.1.12"
    assert "s3cret-pw" not in json.dumps(inv) and sub.secrets(spec) == ["admin", "s3cret-pw"]
    assert sub.leftovers() == []  # live: this process holds the leases
    lease.release("lab", "bm-1")


def test_the_folder_adds_its_cli_group_through_the_registry():
    from harness import substrates

    target, summary = substrates.commands()["pool"]
    assert target == "harness.substrates.baremetal.cli:app"
    from harness.substrates.baremetal.cli import app
    assert summary == app.info.help  # what `harness --help` lists without importing it
    assert substrates.for_env_type("cloudlab") == "baremetal"
