"""Ansible: render a trial's inventory and run the tagged plays of playbooks/trial.yml.

Plays run through ansible-runner with one private data dir per stage under the trial
directory (`ansible/<stage>/`), so events and stdout of every stage are kept as evidence.
Roles are found in the repository's roles/ and in the task's own environment/roles/.
The command is `ansible_plugins/bin/ansible-playbook` with the `harness_start` callback
(connection plugins preloaded before workers fork; an optional barrier that holds the plays
until the harness opens it). That command hands the run to this process's playbook server
(`PlaybookServer`, ansible_plugins/playbook_server.py: Ansible imported once, a forked child
per run), or runs the CLI itself when there is none (HARNESS_ANSIBLE_FORK_SERVER=0).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from harness import substrates
from harness.errors import AnsibleError, RegistryError
from harness.paths import ANSIBLE_PLUGINS, PLAYBOOKS, ROLES, TrialPaths
from harness.substrates.common import load_ansible_yaml

ANSIBLE_PLAYBOOK = ANSIBLE_PLUGINS / "bin" / "ansible-playbook"
PLAYBOOK_SERVER = ANSIBLE_PLUGINS / "playbook_server.py"


class PlaybookServer:
    """This process's ansible-playbook fork server, started on first use and stopped at
    exit (it also exits by itself, and removes its directory, when this process dies, even
    by kill -9)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._dir: str | None = None
        self.warming: threading.Thread | None = None  # warm_playbook_server's, until stop

    def socket(self) -> str | None:
        """The server's socket, starting the server if needed; None when it is turned off
        or does not come up (runs then start their own ansible-playbook)."""
        if os.environ.get("HARNESS_ANSIBLE_FORK_SERVER", "1") == "0":
            return None
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            return os.path.join(self._dir, "sock") if self._proc else None

    def _start(self) -> None:
        self._cleanup()
        self._dir = tempfile.mkdtemp(prefix="hx-ansible-")
        path = os.path.join(self._dir, "sock")
        with open(os.path.join(self._dir, "server.log"), "ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, str(PLAYBOOK_SERVER), self._dir], stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True, cwd="/")
        deadline = time.monotonic() + 10
        while not os.path.exists(path):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                return
            time.sleep(0.005)

    def stop(self) -> None:
        self.warming = None
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        self._cleanup()

    def _cleanup(self) -> None:
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


PLAYBOOK_SERVER_PROCESS = PlaybookServer()
atexit.register(PLAYBOOK_SERVER_PROCESS.stop)


_WARM_LOCK = threading.Lock()


def warm_playbook_server() -> threading.Thread:
    """Start the playbook server in the background now and prime it (Ansible imported, its
    plugins and every substrate's connection plugin loaded), so the first playbook run of
    a short-lived process (`harness run`) is forked at once instead of waiting for that.
    The priming request is an `ansible-playbook --version` with exactly the environment a
    real run gets (built by the same `_runner`): a run with other import-time settings
    would not be forked from it. Once per server: a later call returns the same thread
    (until the server is stopped)."""
    connections = substrates.ansible_connections()

    def warm() -> None:
        # best effort: a process that exits early (bad input) must not print this thread's
        # death; the first real playbook run starts the server again and reports errors
        with contextlib.suppress(BaseException):
            server = PLAYBOOK_SERVER_PROCESS.socket()
            if server:
                _prime(server, connections)

    with _WARM_LOCK:
        if PLAYBOOK_SERVER_PROCESS.warming is not None:
            return PLAYBOOK_SERVER_PROCESS.warming
        thread = PLAYBOOK_SERVER_PROCESS.warming = threading.Thread(
            target=warm, name="hx-ansible-warm", daemon=True)
    thread.start()
    return thread


def _prime(server: str, connections: list[str]) -> None:
    # the server's own module, by path (ansible_plugins/ is a plugin folder, not a package)
    spec = importlib.util.spec_from_file_location("hx_playbook_server", PLAYBOOK_SERVER)
    client = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(client)
    client.QUIET = True  # this copy of the module only
    # in the server's own directory, which it removes when it exits (also when this
    # process exits in the middle of priming)
    with tempfile.TemporaryDirectory(prefix="prime-", dir=os.path.dirname(server)) as tmp:
        inventory = Path(tmp) / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"children": {
            f"c{i}": {"vars": {"ansible_connection": c}} for i, c in enumerate(connections)}}}))
        runner = _runner(Path(tmp), PLAYBOOKS / "trial.yml", inventory, {}, [], [], None)
        with open(os.devnull, "r+b") as null:
            client.request(server, [str(ANSIBLE_PLAYBOOK), "--version"], runner.config.env,
                           runner.config.cwd or tmp, [null.fileno()] * 3)


class Template(str):
    """A task author's value that Ansible may render as a template (task.toml's
    `[environment.ansible] vars`, trusted like the task's own playbooks). Every other
    string the harness hands Ansible is data (`ansible_yaml`)."""


class _Unsafe(str):
    pass


class _DataDumper(yaml.SafeDumper):
    """YAML whose strings carry Ansible's `!unsafe` tag, except a `Template`'s."""


_DataDumper.add_representer(_Unsafe, lambda d, s: d.represent_scalar("!unsafe", str(s)))
_DataDumper.add_representer(Template, lambda d, s: d.represent_str(str(s)))


def _as_data(value: Any) -> Any:
    if isinstance(value, Template):
        return value
    if isinstance(value, str):
        return _Unsafe(value)
    if isinstance(value, dict):  # keys are names, never rendered
        return {str(k): _as_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_as_data(v) for v in value]
    return value


def ansible_yaml(doc: Any) -> str:
    """`doc` as YAML for Ansible (an inventory, extra vars) in which no string is ever
    rendered as a template: each is tagged `!unsafe`, so a value that came from a node
    (a fault's report, an address, a name) stays data on the controller, whatever
    `{{ ... }}` or `{% ... %}` it holds. Only `Template` values render."""
    return yaml.dump(_as_data(doc), Dumper=_DataDumper, sort_keys=True)


def trusted_templates(value: Any) -> Any:
    """`value` with its strings marked `Template` (a task author's vars)."""
    if isinstance(value, str):
        return Template(value)
    if isinstance(value, dict):
        return {k: trusted_templates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [trusted_templates(v) for v in value]
    return value


def write_inventory(paths: TrialPaths, inventory: dict[str, Any]) -> Path:
    tmp = paths.inventory.with_suffix(".tmp")
    tmp.write_text(ansible_yaml(inventory))
    tmp.replace(paths.inventory)
    return paths.inventory


def inventory_connections(inventory: Path) -> list[str]:
    """The connection plugins an inventory file uses (`ssh` where none is set)."""
    try:
        doc = load_ansible_yaml(inventory.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    found: set[str] = set()

    def walk(group: dict) -> None:
        for scope in [group.get("vars") or {}, *(group.get("hosts") or {}).values()]:
            if isinstance(scope, dict) and scope.get("ansible_connection"):
                found.add(str(scope["ansible_connection"]))
        for child in (group.get("children") or {}).values():
            if isinstance(child, dict):
                walk(child)

    for group in doc.values() if isinstance(doc, dict) else []:
        if isinstance(group, dict):
            walk(group)
    return sorted(found) or ["ssh"]


def task_extravars(task, paths: TrialPaths) -> dict[str, Any]:
    """Extra vars the trial playbook needs for this task."""
    env_dir = task.path / "environment"
    ans = task.env.ansible
    bootstrap = env_dir / "bootstrap.sh"
    extra: dict[str, Any] = {
        "harness_task_dir": str(task.path),
        "harness_setup_roles": list(ans.setup),
        "harness_bootstrap_roles": list(ans.bootstrap),
        "harness_bootstrap_script": str(bootstrap) if bootstrap.is_file() else "",
        "harness_collect_dest": str(paths.root / "collect"),
        # InfraBench: bootstrap.sh runs on the primary and reaches the others itself
        "harness_bootstrap_primary_only": task.format == "infrabench",
        **trusted_templates(dict(ans.vars)),
    }
    for stage in ("setup", "bootstrap"):
        book = env_dir / f"{stage}.yml"
        if book.is_file():
            extra[f"harness_task_{stage}_playbook"] = str(book)
    return extra


def _root_ssh(task) -> bool:
    """Root SSH between the nodes: InfraBench tasks expect it; a substrate may give it to
    every task (capability `root_ssh`)."""
    if task.format == "infrabench":
        return True
    try:
        return "root_ssh" in substrates.substrate_class(
            substrates.for_env_type(task.env.type)).capabilities
    except RegistryError:
        return False


def prepare_skip_tags(task) -> list[str]:
    """Tags of playbooks/trial.yml's setup and bootstrap parts this task has nothing for
    (skipped: no task run to find out that a list is empty)."""
    ans = task.env.ansible
    bootstrap = task.path / "environment" / "bootstrap.sh"
    return [tag for tag, empty in (("setup_roles", not ans.setup),
                                   ("cluster_ssh", not _root_ssh(task)),
                                   ("bootstrap_script", not bootstrap.is_file()),
                                   ("bootstrap_roles", not ans.bootstrap)) if empty]


ENV_KEEP = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ",
            "SHELL", "VIRTUAL_ENV", "PWD", "SSH_AUTH_SOCK"}
ENV_KEEP_PREFIXES = ("ANSIBLE_", "RUNNER_", "AWX_", "PYTHON", "LC_", "DOCKER_", "HARNESS_",
                     "JOB_", "PROFILE_TASKS_")


def minimal_env(env: dict[str, str]) -> dict[str, str]:
    """The allowlisted part of an environment for ansible-playbook (no API keys; the
    harness's own secrets never come through variables with these names)."""
    return {k: v for k, v in env.items()
            if k in ENV_KEEP or k.startswith(ENV_KEEP_PREFIXES)}


class StartBarrier:
    """A playbook run started before its nodes exist waits here before its first play
    (ansible_plugins/callback/harness_start.py): `open()` lets it run, `abort()` ends it
    (status failed, rc 75) without anything having run on a node."""

    def __init__(self, path: Path):
        self.path = path

    def _touch(self, suffix: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.with_name(self.path.name + suffix).touch()

    def open(self) -> None:
        self._touch(".go")

    def abort(self) -> None:
        self._touch(".abort")


def run_playbook(paths: TrialPaths, stage: str, tags: list[str], extravars: dict[str, Any],
                 task_dir: Path | None = None, playbook: Path | None = None,
                 timeout: int = 1800, barrier: StartBarrier | None = None,
                 skip_tags: list[str] = ()) -> list[tuple[str, str]]:
    """Run the trial playbook with `tags` (minus `skip_tags`); return (play name, start
    time) per play.

    With a `barrier`, ansible-playbook starts up now and runs its plays once it opens.
    A failure raises AnsibleError naming the host, task and play that failed (`.play`).
    """
    data_dir = paths.ansible(stage)
    data_dir.mkdir(parents=True, exist_ok=True)
    # a file, not the command line: every string in it is `!unsafe` (see ansible_yaml)
    extra_file = data_dir / "extravars.yml"
    extra_file.write_text(ansible_yaml(extravars))
    roles = task_dir / "environment" / "roles" if task_dir else None
    result = _runner(data_dir, playbook or PLAYBOOKS / "trial.yml", paths.inventory,
                     extra_file, tags, skip_tags, roles if roles and roles.is_dir() else None,
                     timeout, barrier)
    result.run()
    events = list(result.events)
    plays = [(ev["event_data"].get("play", ""), ev.get("created", ""))
             for ev in events if ev.get("event") == "playbook_on_play_start"]
    if result.status != "successful" or result.rc != 0:
        play, where = _failure(events, result)
        exc = AnsibleError(f"{stage} failed ({result.status}, rc={result.rc}): {where}; "
                           f"see {data_dir}/artifacts", returncode=result.rc,
                           command=f"ansible-playbook --tags {','.join(tags)}")
        exc.play = play
        raise exc
    return plays


def _runner(data_dir: Path, book: Path, inventory: Path, extravars: dict[str, Any] | Path,
            tags: list[str], skip_tags: list[str], task_roles: Path | None,
            timeout: int = 1800, barrier: StartBarrier | None = None):
    """An ansible-runner Runner (not started) for `book`, with the environment every run
    gets: this process's allowlisted variables and the harness's Ansible settings."""
    import ansible_runner.interface

    _no_close_delay()
    roles_path = [str(ROLES)]
    if task_roles is not None:
        roles_path.insert(0, str(task_roles))
    envvars = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "ANSIBLE_ROLES_PATH": os.pathsep.join(roles_path),
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
        # write_inventory writes YAML: load only that inventory plugin, not the default six
        "ANSIBLE_INVENTORY_ENABLED": "ansible.builtin.yaml",
        # Load the inventory's connection plugins before workers fork; the barrier (see the
        # plugin).
        "ANSIBLE_CALLBACK_PLUGINS": str(ANSIBLE_PLUGINS / "callback"),
        "ANSIBLE_CALLBACKS_ENABLED": "harness_start",
        "HARNESS_ANSIBLE_PRELOAD": ",".join(inventory_connections(inventory)),
    }
    if barrier is not None:
        envvars["HARNESS_ANSIBLE_GATE"] = str(barrier.path)
    server = PLAYBOOK_SERVER_PROCESS.socket()
    if server:
        envvars["HARNESS_ANSIBLE_SERVER"] = server
    book = str(book)
    runner = ansible_runner.interface.init_runner(
        private_data_dir=str(data_dir),
        playbook=book,
        # ansible-playbook without Python's interpreter teardown (0.15-0.3 s): see the script
        binary=str(ANSIBLE_PLAYBOOK),
        cmdline=shlex.quote(book),
        inventory=str(inventory),
        extravars=str(extravars) if isinstance(extravars, Path) else extravars,
        tags=",".join(tags),
        skip_tags=",".join(skip_tags),
        envvars=envvars,
        quiet=True,
        timeout=timeout,
        settings={"suppress_ansible_output": True},
        suppress_env_files=True,
    )
    # ansible-playbook gets only what it needs of this process's environment (which may
    # hold API keys); runner records that environment in artifacts/<ident>/command
    runner.config.env = minimal_env(runner.config.env)
    return runner


_NO_CLOSE_DELAY = threading.Lock()


def _no_close_delay() -> None:
    """ansible-runner closes its pexpect child only once the loop has seen it exit, and
    ptyprocess's close() then sleeps `delayafterclose` (0.1 s) before it looks whether the
    child is still alive: a tenth of a second after every playbook run, for nothing. Here a
    child that has exited already is closed without that sleep; a live one is closed as
    before."""
    from ptyprocess import PtyProcess

    with _NO_CLOSE_DELAY:
        if getattr(PtyProcess.close, "_harness", False):
            return
        close = PtyProcess.close

        def close_exited(self, force=True):
            if not self.closed and self.terminated:  # reaped by the runner's isalive()
                self.delayafterclose = 0
            return close(self, force)

        close_exited._harness = True
        PtyProcess.close = close_exited


def _failure(events: list[dict], result) -> tuple[str, str]:
    """(play, 'host: task: message') of the first failed task of a run."""
    for ev in events:
        if ev.get("event") in ("runner_on_failed", "runner_on_unreachable"):
            data = ev.get("event_data", {})
            res = data.get("res", {})
            msg = " ".join(str(res.get("msg") or "").split())
            out = " ".join(str(res.get("stderr") or res.get("stdout") or "").split())
            if out and out not in msg:  # a command's own words say why, not "non-zero rc"
                msg = f"{msg}: {out[-400:]}" if msg else out[-400:]
            msg = msg[:600]
            return data.get("play", ""), f"{data.get('host')}: {data.get('task')}: {msg}"
    tail = (result.stdout.read() if hasattr(result.stdout, "read") else "")[-400:]
    return "", " ".join(tail.split()) or "no failed task reported"
