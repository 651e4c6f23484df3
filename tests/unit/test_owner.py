"""Owner tags: a process that ended is nobody, even while it waits to be reaped (zombie)."""

from __future__ import annotations

import subprocess
import time

from harness import owner


def test_a_zombie_owner_is_not_alive():
    proc = subprocess.Popen(["sleep", "0.5"])
    tag = owner.tag(proc.pid)
    assert owner.alive(tag) and owner.alive(str(proc.pid))
    deadline = time.monotonic() + 10
    while open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    try:
        assert not owner.alive(tag) and not owner.alive(str(proc.pid))
    finally:
        proc.wait()
    assert not owner.alive(tag)
    assert owner.alive(owner.tag())
