"""The CLI as a user runs it: exit codes, one-line errors, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = [sys.executable, "-m", "harness.cli"]


def harness(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([*HARNESS, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_version():
    from harness import __version__

    res = harness("--version")
    assert res.returncode == 0
    assert res.stdout.strip() == f"harness {__version__}"


def test_task_validate_seed_suite_ok():
    res = harness("task", "validate", "tasks")
    assert res.returncode == 0, res.stdout + res.stderr


def test_task_validate_bad_exits_1_one_line_per_problem(tmp_path):
    (tmp_path / "task.toml").write_text("[environment]\ntype = 'kvm'\n")
    res = harness("task", "validate", str(tmp_path))
    assert res.returncode == 1
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 3
    assert all(line.startswith(str(tmp_path)) for line in lines)
    assert "Traceback" not in res.stderr


def test_run_on_broken_task_is_one_error_per_problem_no_traceback(tmp_path):
    (tmp_path / "task.toml").write_text("this is = = not toml")
    res = harness("run", str(tmp_path), "--agent", "nop")
    assert res.returncode == 2
    assert res.stderr.startswith("error: ")
    assert "invalid TOML" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_unknown_agent_lists_valid_ones():
    res = harness("run", "tasks/hello-docker", "--agent", "gpt-magic")
    assert res.returncode == 2
    assert "unknown agent 'gpt-magic'; valid: " in res.stderr
    valid = res.stderr.split("valid: ", 1)[1].strip().split(", ")
    assert {"nop", "oracle"} <= set(valid) and valid == sorted(valid)


def test_unknown_substrate_lists_valid_ones():
    res = harness("run", "tasks/hello-docker", "--substrate", "lxc")
    assert res.returncode == 2
    assert ("unknown substrate 'lxc'; valid: baremetal, cloudlab, docker, vm, vm-cluster"
            in res.stderr)


def test_task_list_json_and_new(tmp_path):
    res = harness("task", "list", "tasks", "--json")
    names = {r["name"] for r in json.loads(res.stdout)}
    assert {"hello-docker", "nginx-tls-mismatch", "log-volume-full"} <= names
    res = harness("task", "new", "my-task", "--dir", str(tmp_path))
    assert res.returncode == 0
    assert harness("task", "validate", str(tmp_path / "my-task")).returncode == 0
    again = harness("task", "new", "my-task", "--dir", str(tmp_path))
    assert again.returncode == 2 and "already exists" in again.stderr


def test_doctor_json_shape():
    res = harness("doctor", "--json")
    checks = json.loads(res.stdout)
    names = {c["name"] for c in checks}
    assert {"docker engine", "trial firewall", "terraform", "ansible", "libvirtd", "kvm",
            "disk space"} <= names
    assert all(c["status"] in ("PASS", "WARN", "FAIL") for c in checks)
    assert res.returncode == (1 if any(c["status"] == "FAIL" for c in checks) else 0)


def test_exit_runs_what_a_normal_exit_runs(tmp_path):
    """The CLI ends with os._exit (no interpreter teardown to wait for), after joining
    non-daemon threads (an executor's too), running atexit handlers and flushing all
    output: piped stdout arrives whole (what a handler wrote last too) and the exit code
    is kept."""
    marker = tmp_path / "atexit-ran"
    script = (
        "import atexit, concurrent.futures, sys, threading, time\n"
        "from harness.cli import main as m\n"
        "done = []\n"
        "threading.Thread(target=lambda: (time.sleep(2), done.append(1))).start()\n"
        "concurrent.futures.ThreadPoolExecutor(2).submit(time.sleep, 0.1)\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write(str(len(done))))\n"
        "atexit.register(lambda: sys.stdout.write('bye'))\n"
        "sys.stdout.write('x' * 1_000_000)\n"
        "m.main()\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.run([sys.executable, "-c", script, "task", "validate",
                           str(tmp_path / "missing")], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("x" * 1_000_000) and proc.stdout.endswith("bye")
    assert marker.read_text() == "1"  # the thread was joined before the handler ran
