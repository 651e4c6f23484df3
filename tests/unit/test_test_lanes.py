"""The parallel test run's VM lanes (tests/conftest.py) name every VM test module."""

from __future__ import annotations

from tests.conftest import REPO, VM_LANES


def test_every_vm_module_runs_in_a_lane():
    vm_modules = {p.name for p in (REPO / "tests" / "integration").glob("test_*.py")
                  if "pytest.mark.libvirt" in p.read_text()}
    assert vm_modules == set(VM_LANES)
