"""Two hosts for real: a second harness Docker engine on this machine (its own socket, data
root, bridge and subnet pool) stands in for a remote host, reached as one would be: over
`tcp://` with TLS client certificates (the SDK, the Terraform provider and Ansible's
docker_api connection; a client without a certificate is refused). One campaign spreads
over both;
the second engine is killed mid-campaign: it is drained, its running trials are placed
again on the first, the campaign finishes with oracle 1.0 / nop 0, `host` recorded, and
nothing is left on either engine (the killed one swept with `gc --host` once it is back).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest
import yaml

from harness import substrates
from tests.conftest import docker_ready

pytestmark = [pytest.mark.docker, pytest.mark.slow,
              pytest.mark.skipif(docker_ready() is not None, reason=str(docker_ready())),
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("dockerd") is None,
                                 reason="a second Docker engine needs root and dockerd")]

REPO = Path(__file__).resolve().parents[2]
TCP = "127.0.0.1:23762"
ENGINE = ["--name", "hxci2", "--bridge", "hxe-ci2", "--bridge-addr", "10.218.253.1/24",
          "--tcp", TCP]
SOCKET = "unix:///run/harness/hxci2/docker.sock"
TLS_DIR = Path("/etc/harness/hxci2-tls")
POOL = "10.220.0.0/16"


def engine(verb: str) -> None:
    subprocess.run([sys.executable, "-m", "harness.substrates.docker.engine", verb, *ENGINE],
                   check=True, capture_output=True, timeout=180)


def cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=timeout)


@pytest.fixture
def second_engine():
    """The second engine, started for the test and stopped after it (one test run at a
    time uses it: a lock beside its socket)."""
    Path("/run/harness").mkdir(parents=True, exist_ok=True)
    with open("/run/harness/hxci2.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        engine("start")
        try:
            yield SOCKET
        finally:
            engine("stop")


def journal(run_dir: Path) -> list[dict]:
    path = run_dir / "journal.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def wait_second_busy_after_a_finish(run_dir: Path, url: str, proc: subprocess.Popen,
                                    timeout: float = 300) -> None:
    """Until a trial finished on `second` and another one runs there with a container on
    that engine already (a kill before that would leave nothing for gc to find); fails at
    once, with the campaign's records, when the campaign ends first."""
    client = docker.DockerClient(base_url=url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                recs = [json.loads(p.read_text()) for p in run_dir.glob("trials/*/result.json")]
                ends = [(r["host"], r["status"], r["error"]) for r in recs]
                raise AssertionError(f"the campaign ended before a second trial ran on host "
                                     f"second: {ends}")
            j = journal(run_dir)
            done = [i for i, e in enumerate(j) if e["event"] == "finished"
                    and e.get("host") == "second"]
            if done:
                started = {e["trial"] for e in j[done[0]:] if e["event"] == "started"
                           and e.get("host") == "second"}
                running = started - {e["trial"] for e in j if e["event"] == "finished"}
                # sparse: the list's own labels (a full list inspects each container, and
                # one removed in between answers 404)
                there = {(c.attrs.get("Labels") or {}).get("harness.trial")
                         for c in client.containers.list(
                             all=True, sparse=True,
                             filters={"label": "harness.campaign=pytest-twohosts"})}
                if running & there:
                    return
            time.sleep(0.2)
    finally:
        client.close()
    raise AssertionError("no second trial with a container on host second")


def test_campaign_over_two_engines_survives_killing_one(tmp_path, second_engine):
    with pytest.raises(docker.errors.DockerException, match="(?i)certificate|tls|ssl"):
        docker.DockerClient(base_url=f"tcp://{TCP}", tls=docker.tls.TLSConfig(
            ca_cert=str(TLS_DIR / "ca.pem"), verify=True), timeout=10).ping()
    tls = {n: str(TLS_DIR / f"{n}.pem") for n in ("ca", "cert", "key")}
    hosts = [{"name": "local", "docker": os.environ.get("HARNESS_DOCKER_HOST",
                                                        "unix:///run/harness/docker.sock"),
              "capacity": {"cpus": 2, "memory_mb": 4096, "max_trials": {"docker": 1}}},
             {"name": "second", "docker": {"url": f"tcp://{TCP}", "tls": tls, "pool": POOL},
              "capacity": {"cpus": 2, "memory_mb": 4096, "max_trials": {"docker": 1}}}]
    camp = tmp_path / "c.yaml"
    camp.write_text(yaml.safe_dump({
        "name": "pytest-twohosts", "tasks": [str(REPO / "tasks/hello-docker")],
        "agents": [{"name": "oracle"}, {"name": "nop"}], "attempts": 3, "hosts": hosts}))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "campaign", "apply",
                             str(camp), "--out", str(run_dir), "--json"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_second_busy_after_a_finish(run_dir, second_engine, proc)
        engine("kill")
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    recs = [json.loads(p.read_text()) for p in (run_dir / "trials").glob("*/result.json")]
    assert len(recs) == 6
    for r in recs:
        expect = ("passed", 1.0) if r["agent"]["name"] == "oracle" else ("failed", 0.0)
        assert (r["status"], r["reward"]) == expect, r["trial_id"]
    assert {r["host"] for r in recs} == {"local", "second"}
    j = journal(run_dir)
    assert [e["host"] for e in j if e["event"] == "host_drained"] == ["second"]
    drained = [e["trial"] for e in j if e["event"] == "drained"]
    assert drained, "the trial running on the killed engine was placed again"
    for tid in drained:
        rec = next(r for r in recs if r["trial_id"] == tid)
        assert rec["host"] == "local"
        assert list((run_dir / "aborted").glob(f"{tid}.drained-second.*"))
    assert {e.get("host") for e in j if e["event"] == "started"} == {"local", "second"}
    gc = ["gc", "--hosts", str(camp), "--campaign", "pytest-twohosts", "--json"]
    assert json.loads(cli(*gc, "--dry-run", "--host", "local").stdout)["total"] == 0
    engine("start")  # the "remote" host is back: sweep what its crash left
    swept = json.loads(cli(*gc).stdout)
    # each engine of the hosts file, plus once each substrate whose nodes live elsewhere
    # (bare-metal pool leases, CloudLab experiment records: none stale here)
    elsewhere = {name for name, cls in substrates.classes().items() if not cls.engine}
    assert elsewhere >= {"baremetal", "cloudlab"}
    assert set(swept["found"]) == {"docker@local", "docker@second"} | elsewhere
    assert swept["found"]["docker@second"] and not any(swept["found"][n] for n in elsewhere)
    assert json.loads(cli(*gc, "--dry-run").stdout)["total"] == 0
