"""The Ray executor's pure parts: node resources from a hosts file, shipping a trial dir
into the run dir exactly once, the executor registry's errors, `--shard auto` from a job
array's index, per-node status."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.campaign.executors import get_executor
from harness.campaign.executors.ray.node import DEFAULT_SLOTS, demand, node_resources
from harness.campaign.executors.ray.ship import install, pack, unpack
from harness.campaign.hosts import parse_shard
from harness.campaign.status import nodes
from harness.errors import InputError, RegistryError
from harness.placement import load_hosts

SOCK = "unix:///run/harness/docker.sock"
T = {"trial_id": "t-1", "fingerprint": "fp"}


def trial_dir(root: Path, status: str = "passed", fp: str = "fp") -> Path:
    (root / "terraform" / ".terraform").mkdir(parents=True)
    (root / "terraform" / "main.tf.json").write_text("{}")
    (root / "terraform" / ".terraform" / "provider").symlink_to("/usr/bin/env")
    (root / "agent").mkdir()
    (root / "agent" / "trajectory.jsonl").write_text('{"cmd": "true"}\n')
    (root / "latest").symlink_to("agent")
    (root / "outside").symlink_to("/etc/passwd")
    (root / "trial.json").write_text("{}")
    (root / "result.json").write_text(json.dumps({"status": status, "fingerprint": fp}))
    return root


def test_node_resources_from_the_hosts_file():
    hosts = load_hosts({"hosts": [
        {"name": "a", "docker": SOCK, "capacity": {"cpus": 4, "memory_mb": 8192,
                                                   "max_trials": {"docker": 3}}},
        {"name": "b", "docker": {"url": SOCK, "pool": "10.220.0.0/16"},
         "capacity": {"cpus": 2, "memory_mb": 4096}},
        {"name": "off", "docker": SOCK, "enabled": False,
         "capacity": {"cpus": 2, "memory_mb": 4096, "max_trials": {"docker": 9}}}]})
    offer = node_resources(hosts)
    assert offer["harness_trials"] == 3 + DEFAULT_SLOTS
    assert offer["harness_docker"] == 3 + DEFAULT_SLOTS
    assert demand({"substrate": "docker"}) == {"harness_trials": 1, "harness_docker": 1}


def test_node_resources_a_substrate_capped_at_zero_is_not_offered():
    hosts = load_hosts({"hosts": [{"name": "a", "docker": SOCK, "capacity": {
        "cpus": 4, "memory_mb": 8192, "max_trials": {"docker": 0}}}]})
    assert node_resources(hosts) == {"harness_trials": 0}


def test_pack_keeps_the_evidence_and_drops_the_node_local_links(tmp_path):
    data = pack(trial_dir(tmp_path / "src"))
    unpack(data, tmp_path / "dst")
    dst = tmp_path / "dst"
    assert (dst / "agent" / "trajectory.jsonl").read_text() == '{"cmd": "true"}\n'
    assert (dst / "terraform" / "main.tf.json").exists()
    assert not (dst / "terraform" / ".terraform").exists()
    assert (dst / "latest").is_symlink() and os.readlink(dst / "latest") == "agent"
    assert not (dst / "outside").exists() and not (dst / "outside").is_symlink()


def test_install_lands_a_trial_exactly_once(tmp_path):
    run = tmp_path / "run"
    first = pack(trial_dir(tmp_path / "a"))
    second = pack(trial_dir(tmp_path / "b", status="failed"))
    assert install(run, T, first)
    assert not install(run, T, second)  # a retried task's copy: dropped
    rec = json.loads((run / "trials" / "t-1" / "result.json").read_text())
    assert rec["status"] == "passed"
    assert sorted(p.name for p in (run / "trials").iterdir()) == ["t-1"]
    assert not (run / "aborted").exists()


def test_install_moves_an_unfinished_run_aside_and_replaces_rendered_files(tmp_path):
    run = tmp_path / "run"
    trial_dir(run / "trials" / "t-1", status="cancelled")
    assert install(run, T, pack(trial_dir(tmp_path / "a")))
    assert [p.name for p in (run / "aborted").iterdir()] == ["t-1.superseded.1"]
    (run / "trials" / "t-2" / "terraform").mkdir(parents=True)  # what `plan` rendered
    assert install(run, {"trial_id": "t-2", "fingerprint": "fp"},
                   pack(trial_dir(tmp_path / "b")))
    assert len(list((run / "aborted").iterdir())) == 1
    assert not [p for p in (run / "trials").iterdir() if p.name.startswith(".")]


def test_install_refuses_a_dir_without_a_result(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "trial.json").write_text("{}")
    with pytest.raises(ValueError, match="no result.json"):
        install(tmp_path / "run", T, pack(src))
    assert not list((tmp_path / "run" / "trials").iterdir())


def test_executor_registry_errors(monkeypatch):
    with pytest.raises(RegistryError, match="valid: local, ray"):
        get_executor("dask")
    with pytest.raises(InputError, match="only with --executor ray"):
        get_executor("local", address="127.0.0.1:1")
    import importlib

    real = importlib.import_module

    def no_ray(name, *a, **kw):
        if name.endswith(".ray.driver"):
            raise ImportError("No module named 'ray'", name="ray")
        return real(name, *a, **kw)

    monkeypatch.setattr(importlib, "import_module", no_ray)
    with pytest.raises(InputError, match=r"pip install 'harness\[ray\]'"):
        get_executor("ray")


def test_unreachable_address_is_one_line():
    pytest.importorskip("ray")
    from harness.campaign.executors.ray.driver import check_reachable

    with pytest.raises(InputError, match="cannot reach the Ray cluster at '127.0.0.1:1'"):
        check_reachable("127.0.0.1:1", timeout=1)


@pytest.mark.parametrize("env,text,want", [
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4",
      "SLURM_ARRAY_TASK_MIN": "0"}, "auto", (4, 4)),
    ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4",
      "SLURM_ARRAY_TASK_MIN": "1"}, "auto", (1, 4)),
    ({"JOB_COMPLETION_INDEX": "0"}, "auto/3", (1, 3)),
    ({"JOB_COMPLETION_INDEX": "2"}, "auto/3", (3, 3)),
])
def test_shard_auto_from_job_array_index(env, text, want):
    assert parse_shard(text, env) == want


@pytest.mark.parametrize("env,text,match", [
    ({}, "auto", "neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX"),
    ({"JOB_COMPLETION_INDEX": "1"}, "auto", "auto/N"),
    ({"JOB_COMPLETION_INDEX": "3"}, "auto/3", "between 1 and N"),
    ({"JOB_COMPLETION_INDEX": "x"}, "auto/3", "not a number"),
])
def test_shard_auto_errors(env, text, match):
    with pytest.raises(InputError, match=match):
        parse_shard(text, env)


def test_status_per_node(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "nodes.json").write_text(json.dumps({"nodes": {
        "w1": {"done": {"passed": 2}, "running": {"t-3": "agent"}},
        "w2": {"done": {"failed": 1}, "running": {}}}}))
    assert nodes(tmp_path, applying=True)["w1"] == {"done": {"passed": 2},
                                                    "running": {"t-3": "agent"}}
    assert nodes(tmp_path, applying=False)["w1"]["running"] == {}
    assert nodes(tmp_path / "nothing", applying=False) == {}
