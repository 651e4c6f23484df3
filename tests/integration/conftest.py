"""Fixtures shared by integration tests."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from harness.substrates.hypervisor import host
from harness.substrates.metal import emulate
from harness.substrates.metal.pool import pool_names, pool_path
from tests.conftest import HostListener
from tests.integration.outside import Outside


@pytest.fixture
def outside(tmp_path, monkeypatch):
    """The stand-in outside, its uplink the only extra one in config.yaml, and a listener
    on the host (`world.host_port`)."""
    world = Outside(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(f"egress_uplinks: [{world.uplink}]\n")
    monkeypatch.setenv("HARNESS_CONFIG", str(config))
    host = HostListener()
    world.host_port = host.port
    try:
        yield world
    finally:
        host.close()
        world.close()


def _worker_alive(suffix: int) -> bool:
    """Whether a python process whose pid ends in `suffix` (mod 100000) still runs."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    for pid in range(suffix, pid_max, 100000):
        try:
            if b"python" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


@pytest.fixture(scope="session")
def pool_name():
    """A 3-machine emulated bare-metal pool per test worker (`emulate.emulate`, made by the
    first test that uses it) removed when the worker's session ends (tests/conftest.py runs
    the modules that use it last in their lanes)."""
    name = f"ci{os.getpid() % 100000}"
    for old in pool_names():  # a killed earlier run's pool: its stale leases would meet
        if re.fullmatch(r"ci\d+", old) and old != name and not _worker_alive(int(old[2:])):
            emulate.remove(old)  # trials of the same (deterministic) ids here
    try:
        yield name
    finally:
        removed = emulate.remove(name)
    assert any(r.startswith("domain hxpool-") for r in removed)
    assert not pool_path(name).exists() and not emulate.pool_dir(name).exists()
    conn = host.connect(emulate.URI)
    try:
        assert not [d.name() for d in conn.listAllDomains() if name in d.name()]
        assert not [n.name() for n in conn.listAllNetworks()
                    if n.name() in emulate.bridges(name)]
    finally:
        conn.close()
