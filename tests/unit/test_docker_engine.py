"""The docker substrate refuses an engine without the threat model's hardening; what it
lacks is named (the same words as `harness doctor`)."""

from __future__ import annotations

from harness.substrates.docker.engine import hardening_gaps


def test_an_unhardened_engine_is_named_with_what_it_lacks():
    full = {"userns": True, "cgroupns": True, "runtime": "hx-runc"}
    assert hardening_gaps(full) == []
    assert hardening_gaps({**full, "userns": False, "runtime": "runc"}) == [
        "userns-remap", "the hx-runc runtime"]
    assert hardening_gaps({**full, "cgroupns": False}) == ["private cgroup namespaces"]
