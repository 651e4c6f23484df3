"""A campaign on a local Ray cluster (a head and two worker nodes, each worker its own
`$HARNESS_HOME`, hosts file and share of the Docker engine), one worker's raylet killed
mid-trial: every trial lands once, the lost trial is run again on the other node, nothing
of it is left after `harness gc` on the lost one; status per node, leaderboard, report and
resume work on the run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.conftest import docker_ready

pytest.importorskip("ray")
pytestmark = [pytest.mark.docker, pytest.mark.slow,
              pytest.mark.skipif(docker_ready() is not None, reason=str(docker_ready()))]

from harness.campaign.executors.ray.localcluster import LocalCluster  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NAME = "pytest-ray"
SLOW_SOLVE = "sleep 12\n"  # the oracle's window: long enough to lose a node inside it


def worker_host(i: int, slots: int) -> dict:
    """Worker i's share of this machine's Docker engine: its slots, its own subnet pool."""
    sock = os.environ.get("DOCKER_HOST") or "unix:///run/harness/docker.sock"
    return {"name": f"w{i}", "docker": {"url": sock, "pool": f"10.{230 + i}.0.0/16"},
            "capacity": {"cpus": os.cpu_count() or 1, "memory_mb": 4096,
                         "max_trials": {"docker": slots}}}


def cli(*args: str, home: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"HARNESS_HOME": str(home)} if home else {})}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=timeout, env=env)


def until(check, what: str, deadline: float):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out after {deadline:.0f} s waiting for {what}")


def docker_ids(kind: str, label: str) -> list[str]:
    cmd = ["docker", "ps", "-aq"] if kind == "container" else ["docker", "network", "ls", "-q"]
    out = subprocess.run([*cmd, "--filter", f"label={label}"], capture_output=True, text=True)
    return out.stdout.split()


def running_on(run_dir: Path, node: str, phase: str) -> list[str]:
    try:
        nodes = json.loads((run_dir / "results" / "nodes.json").read_text())["nodes"]
    except (OSError, ValueError, KeyError):
        return []
    return sorted(t for t, p in nodes.get(node, {}).get("running", {}).items() if p == phase)


def test_campaign_on_two_ray_nodes_survives_a_lost_node(tmp_path):
    task = tmp_path / "hello-slow"
    shutil.copytree(REPO / "tasks/hello-docker", task)
    solve = task / "solution" / "solve.sh"
    lines = solve.read_text().splitlines(keepends=True)
    solve.write_text("".join(lines[:2]) + SLOW_SOLVE + "".join(lines[2:]))
    camp = tmp_path / "c.yaml"
    camp.write_text(yaml.safe_dump({"name": NAME, "tasks": [str(task)], "attempts": 4,
                                    "concurrency": 3,  # below the cluster's 4 slots
                                    "agents": [{"name": "oracle"}, {"name": "nop"}]}))
    run_dir = tmp_path / "run"
    with LocalCluster(tmp_path / "cluster", worker_host, workers=2, slots=2) as cluster:
        try:
            apply = subprocess.Popen(
                [sys.executable, "-m", "harness.cli", "campaign", "apply", str(camp), "--out",
                 str(run_dir), "--executor", "ray", "--address", cluster.address, "--json"],
                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # lose w1 while one of its trials is in its agent window, its nodes up
            victims = until(lambda: [t for t in running_on(run_dir, "w1", "agent")
                                     if docker_ids("container", f"harness.trial={t}")],
                            "a trial of w1 in its agent window", 150)
            os.kill(cluster.raylet_pid(1), signal.SIGKILL)
            out, err = apply.communicate(timeout=240)
            assert apply.returncode == 0, err[-3000:]
            summary = json.loads(out)

            trials = {p.name for p in (run_dir / "trials").iterdir()}
            assert len(trials) == 8 and not [t for t in trials if t.startswith(".")]
            journal = [json.loads(line) for line in
                       (run_dir / "journal.jsonl").read_text().splitlines()]
            finished = Counter(e["trial"] for e in journal if e["event"] == "finished")
            assert set(finished) == trials and set(finished.values()) == {1}, finished
            in_flight, most = set(), 0  # the campaign's concurrency caps the cluster
            for e in journal:
                if e["event"] in ("started", "finished"):
                    (in_flight.add if e["event"] == "started" else in_flight.discard)(e["trial"])
                    most = max(most, len(in_flight))
            assert 2 <= most <= 3, most
            last = {e["trial"]: e for e in journal if e["event"] == "finished"}
            for tid in trials:
                rec = json.loads((run_dir / "trials" / tid / "result.json").read_text())
                want = "passed" if rec["agent"]["name"] == "oracle" else "failed"
                assert rec["status"] == want, (tid, rec.get("error"))
            for victim in victims:
                assert last[victim]["node"] == "w2"
                starts = [e["node"] for e in journal
                          if e["event"] == "started" and e["trial"] == victim]
                assert starts == ["w1", "w2"], starts
            assert summary["ran"] == 8 and summary["hosts"] == {"w1": "ok", "w2": "ok"}

            # the lost node: once its orphaned trial has torn down, gc there leaves nothing
            w1 = cluster.homes[1]

            def swept() -> bool:
                rep = json.loads(cli("gc", "--campaign", NAME, "--json", home=w1).stdout)
                return not rep["spared"]

            until(swept, "the lost node's trial process to end", 90)
            for victim in victims:
                assert docker_ids("container", f"harness.trial={victim}") == []
                assert docker_ids("network", f"harness.trial={victim}") == []
            assert docker_ids("container", f"harness.campaign={NAME}") == []
            assert docker_ids("network", f"harness.campaign={NAME}") == []

            status = json.loads(cli("campaign", "status", str(run_dir), "--json").stdout)
            assert status["states"] == {"passed": 4, "failed": 4}
            assert set(status["nodes"]) == {"w1", "w2"}
            assert sum(sum(n["done"].values()) for n in status["nodes"].values()) == 8
            board = cli("leaderboard", str(run_dir), "--json")
            assert board.returncode == 0 and "oracle" in board.stdout, board.stderr
            report = cli("report", str(run_dir), "-o", str(tmp_path / "r.html"))
            assert report.returncode == 0 and (tmp_path / "r.html").stat().st_size > 0

            again = cli("campaign", "apply", str(run_dir), "--executor", "ray", "--address",
                        cluster.address, "--json")
            assert again.returncode == 0, again.stderr[-2000:]
            assert json.loads(again.stdout)["kept"] == 8
            assert json.loads(again.stdout)["ran"] == 0
        finally:
            if "apply" in locals() and apply.poll() is None:
                apply.kill()
                apply.wait()
            for home in cluster.homes.values():
                cli("gc", "--campaign", NAME, "--force", home=home)


def test_unreachable_address_is_one_red_line(tmp_path):
    camp = tmp_path / "c.yaml"
    camp.write_text(yaml.safe_dump({"name": "pytest-ray-none", "attempts": 1,
                                    "tasks": [str(REPO / "tasks/hello-docker")],
                                    "agents": [{"name": "nop"}]}))
    res = cli("campaign", "apply", str(camp), "--out", str(tmp_path / "run"), "--executor",
              "ray", "--address", "127.0.0.1:1", timeout=120)
    assert res.returncode == 2
    assert "cannot reach the Ray cluster at '127.0.0.1:1'" in res.stderr
    assert "Traceback" not in res.stderr
