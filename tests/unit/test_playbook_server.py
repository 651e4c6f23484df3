"""The playbook fork server (ansible_plugins/playbook_server.py) behind run_playbook: runs are
forked from a primed Ansible, each with its own events, failures and exit code; a run whose
settings were fixed at import runs plain; a timed-out run leaves no process behind; a dead
server is replaced."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid

import pytest
import yaml

from harness.errors import AnsibleError
from harness.paths import TrialPaths
from harness.tools.ansible import PLAYBOOK_SERVER_PROCESS, run_playbook, warm_playbook_server


def _trial(tmp_path, name: str) -> TrialPaths:
    paths = TrialPaths(tmp_path / name).make()
    paths.inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"}}}}))
    return paths


def _book(tmp_path, tasks: str) -> os.PathLike:
    book = tmp_path / f"pb-{uuid.uuid4().hex[:6]}.yml"
    book.write_text("- name: Probe\n  hosts: all\n  gather_facts: false\n  tasks:\n" + tasks)
    return book


FORKED = ("    - name: Say whether this run was forked\n      ansible.builtin.debug:\n"
          "        msg: \"forked={{ lookup('env', 'HARNESS_ANSIBLE_FORKED') }}\"\n")


def _said(paths: TrialPaths, stage: str) -> str:
    return "".join(p.read_text() for p in (paths.ansible(stage) / "artifacts").glob("*/stdout"))


@pytest.fixture(autouse=True)
def _server_on(monkeypatch):
    monkeypatch.setenv("HARNESS_ANSIBLE_FORK_SERVER", "1")


def test_runs_are_forked_with_their_own_events(tmp_path):
    """Three runs from one server: each forked, each with its own plays in its own
    artifacts (the second and third are not written into the first run's directory)."""
    book = _book(tmp_path, FORKED)
    for i in range(3):
        paths = _trial(tmp_path, f"t{i}")
        plays = run_playbook(paths, "probe", [], {}, playbook=book, timeout=120)
        assert [name for name, _ in plays] == ["Probe"]
        assert "forked=1" in _said(paths, "probe")
    assert PLAYBOOK_SERVER_PROCESS.socket() is not None


def test_a_primed_server_forks_the_first_run(tmp_path):
    """`warm_playbook_server` primes a new server with an `--version` request whose
    environment is a real run's (import-time settings included): the first real run is
    then forked from that image, not run plain."""
    PLAYBOOK_SERVER_PROCESS.stop()
    warm_playbook_server().join(120)
    assert warm_playbook_server() is warm_playbook_server(), "once per server"
    paths = _trial(tmp_path, "primed")
    run_playbook(paths, "probe", [], {}, playbook=_book(tmp_path, FORKED), timeout=120)
    assert "forked=1" in _said(paths, "probe")


def test_failure_names_the_task_and_exit_code(tmp_path):
    book = _book(tmp_path, FORKED + "    - name: Fail on purpose\n"
                 "      ansible.builtin.shell: echo node1 still answers >&2; exit 3\n"
                 "      changed_when: false\n")
    for i in range(2):  # the first run also primes a fresh server
        paths = _trial(tmp_path, f"f{i}")
        with pytest.raises(AnsibleError) as err:
            run_playbook(paths, "probe", [], {}, playbook=book, timeout=120)
        assert "Fail on purpose" in str(err.value) and err.value.returncode == 2
        # the command's own stderr says why, not only "non-zero return code"
        assert "node1 still answers" in str(err.value), err.value


def test_settings_fixed_at_import_run_plain(tmp_path, monkeypatch):
    """A run with its own lookup plugin path cannot use the primed image: it runs as a
    plain ansible-playbook and still finds its plugin."""
    run_playbook(_trial(tmp_path, "prime"), "probe", [], {}, playbook=_book(tmp_path, FORKED),
                 timeout=120)
    (tmp_path / "lookup").mkdir()
    (tmp_path / "lookup" / "hx_probe.py").write_text(
        "from ansible.plugins.lookup import LookupBase\n"
        "class LookupModule(LookupBase):\n"
        "    def run(self, terms, variables=None, **kw):\n        return ['probed']\n")
    monkeypatch.setenv("ANSIBLE_LOOKUP_PLUGINS", str(tmp_path / "lookup"))
    paths = _trial(tmp_path, "own-plugins")
    book = _book(tmp_path, FORKED + "    - name: Use the plugin\n      ansible.builtin.debug:\n"
                 "        msg: \"{{ lookup('hx_probe') }}\"\n")
    run_playbook(paths, "probe", [], {}, playbook=book, timeout=120)
    out = _said(paths, "probe")
    assert "probed" in out and "forked=1" not in out


def _run_processes(server: str) -> list[str]:
    """The server's own process and every process forked from it (runs, task workers): all
    have the server's command line, which names its directory."""
    res = subprocess.run(["pgrep", "-f", os.path.dirname(server)], capture_output=True,
                         text=True)
    return res.stdout.split()


def test_timeout_ends_the_run_and_its_workers(tmp_path):
    """ansible-runner's timeout ends the client; the forked run and its task worker (here
    holding a `pause`) are gone with it, only the server stays."""
    book = _book(tmp_path, "    - name: Hang in the worker\n      ansible.builtin.pause:\n"
                 "        seconds: 600\n")
    server = PLAYBOOK_SERVER_PROCESS.socket()
    with pytest.raises(AnsibleError):
        run_playbook(_trial(tmp_path, "hang"), "probe", [], {}, playbook=book, timeout=4)
    deadline = time.monotonic() + 20
    while len(_run_processes(server)) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _run_processes(server) == [str(PLAYBOOK_SERVER_PROCESS._proc.pid)]


def test_a_dead_server_is_replaced_and_a_stopped_one_leaves_nothing(tmp_path):
    book = _book(tmp_path, FORKED)
    run_playbook(_trial(tmp_path, "a"), "probe", [], {}, playbook=book, timeout=120)
    os.kill(PLAYBOOK_SERVER_PROCESS._proc.pid, signal.SIGKILL)
    PLAYBOOK_SERVER_PROCESS._proc.wait()
    paths = _trial(tmp_path, "b")
    run_playbook(paths, "probe", [], {}, playbook=book, timeout=120)
    assert "forked=1" in _said(paths, "probe")
    where = os.path.dirname(PLAYBOOK_SERVER_PROCESS.socket())
    PLAYBOOK_SERVER_PROCESS.stop()
    assert not os.path.exists(where) and _run_processes(os.path.join(where, "sock")) == []


def test_the_server_follows_its_harness_process_even_after_kill_9():
    import sys

    owner = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom harness.tools.ansible import "
         "PLAYBOOK_SERVER_PROCESS as P\nprint(P.socket(), flush=True)\ntime.sleep(600)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "HARNESS_ANSIBLE_FORK_SERVER": "1"})
    sock = owner.stdout.readline().strip()
    assert sock and _run_processes(sock), "the server runs"
    owner.kill()
    owner.wait()
    deadline = time.monotonic() + 15
    while (_run_processes(sock) or os.path.exists(os.path.dirname(sock))) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _run_processes(sock) == [] and not os.path.exists(os.path.dirname(sock))
