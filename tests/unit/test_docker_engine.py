"""The docker substrate refuses an engine without the threat model's hardening; what it
lacks is named (the same words as `harness doctor`). A task's storage is checked against
the engine's data root."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

from harness.config import Settings
from harness.errors import InputError
from harness.substrates.docker import DockerSubstrate
from harness.substrates.docker.engine import hardening_gaps


def test_an_unhardened_engine_is_named_with_what_it_lacks():
    full = {"userns": True, "cgroupns": True, "runtime": "hx-runc"}
    assert hardening_gaps(full) == []
    assert hardening_gaps({**full, "userns": False, "runtime": "runc"}) == [
        "userns-remap", "the hx-runc runtime"]
    assert hardening_gaps({**full, "cgroupns": False}) == ["private cgroup namespaces"]


def test_a_task_storage_is_a_reservation_on_the_engines_data_root(tmp_path):
    """storage / storage_mb set by a docker task: refused when the engine's data root has
    less free space, with the key and both numbers; unset: only the floor
    (`min_free_mb`, tests/unit/test_docker_storage.py)."""
    sub = DockerSubstrate(settings=Settings(), host="unix:///nowhere.sock")
    sub._client = SimpleNamespace(info=lambda: {"DockerRootDir": str(tmp_path)})
    free = shutil.disk_usage(tmp_path).free // (1024 * 1024)
    env = SimpleNamespace(storage_mb=free + 10_000_000, model_fields_set={"storage_mb"})
    task = SimpleNamespace(name="big", env=env, nodes=[SimpleNamespace(storage_mb=None)])
    with pytest.raises(InputError, match=rf"asks for {free + 10_000_000} MB of storage.*"
                                         rf"{tmp_path}"):
        sub._check_storage(task)
    env.storage_mb = 1
    sub._check_storage(task)
    env.storage_mb, env.model_fields_set = free + 10_000_000, set()
    sub._check_storage(task)


def test_agent_files_are_mounted_only_from_a_local_engine_that_remaps_root(tmp_path):
    """The agent's bundle store goes read-only into the primary node only where the host
    root's files stay unwritable to the node's root (userns-remap) and the engine sees this
    machine's paths (a local socket); otherwise nothing is mounted and setup copies."""
    from harness.substrates.base import TrialSpec

    task = SimpleNamespace(primary=SimpleNamespace(name="node0"))
    spec = TrialSpec("t1", "c", task, tmp_path, agent_files=tmp_path)

    def sub_with(host: str, opts: list[str]) -> DockerSubstrate:
        sub = DockerSubstrate(settings=Settings(), host=host)
        sub._client = SimpleNamespace(info=lambda: {"SecurityOptions": opts})
        return sub

    remapped = ["name=seccomp", "name=userns", "name=cgroupns"]
    assert sub_with("unix:///run/x.sock", remapped)._agent_store(spec) == {
        "agent_store_node": "node0", "agent_store_source": str(tmp_path)}
    assert sub_with("unix:///run/x.sock", ["name=seccomp"])._agent_store(spec) == {}
    assert sub_with("ssh://root@elsewhere", remapped)._agent_store(spec) == {}
    none = TrialSpec("t1", "c", task, tmp_path)
    assert sub_with("unix:///run/x.sock", remapped)._agent_store(none) == {}
    gone = TrialSpec("t1", "c", task, tmp_path, agent_files=tmp_path / "missing")
    assert sub_with("unix:///run/x.sock", remapped)._agent_store(gone) == {}
