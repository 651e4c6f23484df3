"""One owner per run directory, with real processes holding the locks: an unsharded apply
excludes everything else, shards of one cut run beside each other, shards cut another way
are refused, and a killed holder frees the run at once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.campaign import runlock
from harness.errors import InputError

HOLD = """
import sys, time
from harness.campaign import runlock
runlock.acquire(sys.argv[1], sys.argv[2], sys.argv[3])
print("held", flush=True)
time.sleep(60)
"""


def hold(run_dir: Path, command: str, shard: str = "") -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir), command, shard],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "held", proc.stderr.read()
    return proc


def try_in_child(run_dir: Path, shard: str = "") -> str:
    """Acquire in a fresh process (this one's locks are re-entrant); its error or 'ok'."""
    code = ("import sys\nfrom harness.campaign import runlock\nfrom harness.errors import "
            "InputError\ntry:\n    runlock.acquire(sys.argv[1], 'campaign apply', sys.argv[2])"
            "\n    print('ok')\nexcept InputError as e:\n    print(e.message)\n")
    out = subprocess.run([sys.executable, "-c", code, str(run_dir), shard],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def test_an_apply_excludes_shards_and_another_apply(tmp_path, procs):
    procs.append(hold(tmp_path, "campaign apply"))
    assert "in use by `campaign apply`" in try_in_child(tmp_path)
    assert "in use by `campaign apply`" in try_in_child(tmp_path, "1/2")
    held = runlock.holder(tmp_path)
    assert held and held["command"] == "campaign apply"


def test_shards_of_one_cut_run_together_and_exclude_the_rest(tmp_path, procs):
    procs.append(hold(tmp_path, "campaign apply --shard 1/2", "1/2"))
    assert try_in_child(tmp_path, "2/2") == "ok"
    assert "in use by `campaign apply --shard 1/2`" in try_in_child(tmp_path, "1/2")
    refused = try_in_child(tmp_path, "1/3")
    assert "cut the same way" in refused, refused
    unsharded = try_in_child(tmp_path)
    assert "in use by `campaign apply --shard 1/2`" in unsharded, unsharded
    assert runlock.holder(tmp_path)["command"] == "campaign apply --shard 1/2"


def test_a_killed_holder_frees_the_run_at_once(tmp_path, procs):
    proc = hold(tmp_path, "campaign apply", "")
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while runlock.holder(tmp_path) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert runlock.holder(tmp_path) is None
    assert try_in_child(tmp_path, "1/2") == "ok"
    assert try_in_child(tmp_path) == "ok"


def test_reentrant_in_one_process(tmp_path):
    runlock.acquire(tmp_path / "r", "campaign plan")
    runlock.acquire(tmp_path / "r", "campaign apply")
    with pytest.raises(InputError):
        raise runlock._refuse(tmp_path, "x", {})
    runlock.release(tmp_path / "r")
    assert runlock.holder(tmp_path / "r") is None
