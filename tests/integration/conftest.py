"""Fixtures shared by integration tests."""

from __future__ import annotations

import pytest

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
