"""Runtime access to VM nodes over SSH with the per-trial key (asyncio subprocesses).

The key pair lives in the trial directory (`<trial>/ssh/id_ed25519`); its public half is
baked into each node's seed disk. Host keys are fresh per boot, so host key checking is
off and nothing is written to known_hosts. A command runs under `timeout` on the node as
well, so killing the local ssh at the deadline also ends the remote process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from harness.errors import SubstrateError
from harness.substrates.base import ExecResult
from harness.substrates.common import toolbox_argv

SSH_OPTIONS = (
    "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
    "-o", "LogLevel=ERROR", "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4",
)
ANSIBLE_SSH_ARGS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
SSH_FAILED = 255


def key_path(trial_root: Path) -> Path:
    return trial_root / "ssh" / "id_ed25519"


def ensure_key(trial_root: Path, comment: str) -> str:
    """Create the per-trial ed25519 key pair if missing; return the public key line."""
    key = key_path(trial_root)
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        key.parent.chmod(0o700)
        proc = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                               "-f", str(key)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SubstrateError("vm", "ssh-keygen failed", proc.stderr)
    return key.with_suffix(".pub").read_text().strip()


def ssh_argv(host: str, key: Path, user: str = "root", connect_timeout: int = 10) -> list[str]:
    return ["ssh", "-i", str(key), "-o", f"ConnectTimeout={connect_timeout}", *SSH_OPTIONS,
            f"{user}@{host}"]


def remote_command(cmd: str, timeout: float, env: dict[str, str] | None = None,
                   toolbox: str | None = None) -> str:
    """The shell line the node runs: env exports, then `cmd` in bash under `timeout` (or
    under the toolbox's timeout and sh, see `Substrate.exec`)."""
    exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in (env or {}).items())
    limit = max(1, int(timeout + 0.999))
    if toolbox:
        return exports + "exec " + " ".join(shlex.quote(a) for a in toolbox_argv(toolbox, cmd))
    return f"{exports}exec timeout -k 5 {limit} bash -c {shlex.quote(cmd)}"


async def _drain(stream: asyncio.StreamReader, buf: bytearray) -> None:
    while chunk := await stream.read(65536):
        buf.extend(chunk)


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        proc.stdin.close()


async def run(argv: list[str], timeout: float, stdin: bytes | None = None) -> ExecResult:
    """Run a local process (ssh, tar...) in its own process group; kill the group at timeout.

    Output read before the deadline is kept in the result.
    """
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    out, err = bytearray(), bytearray()
    tasks = [asyncio.create_task(_drain(proc.stdout, out)),
             asyncio.create_task(_drain(proc.stderr, err))]
    if stdin is not None:
        tasks.append(asyncio.create_task(_feed(proc, stdin)))
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except (TimeoutError, asyncio.CancelledError) as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        if isinstance(exc, asyncio.CancelledError):
            for task in tasks:
                task.cancel()
            raise
        timed_out = True
    await asyncio.gather(*tasks, return_exceptions=True)
    return ExecResult(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
                      time.monotonic() - started, timed_out=timed_out)


async def exec_on(host: str, key: Path, cmd: str, timeout: float,
                  env: dict[str, str] | None = None, stdin: bytes | None = None,
                  toolbox: str | None = None) -> ExecResult:
    argv = [*ssh_argv(host, key), remote_command(cmd, timeout, env, toolbox)]
    result = await run(argv, timeout + 15, stdin=stdin)
    if result.exit_code == 124 and result.seconds >= timeout:
        return ExecResult(124, result.stdout, result.stderr, result.seconds, timed_out=True)
    return result


async def put(host: str, key: Path, src: Path, dest: str, timeout: float = 600) -> None:
    """Copy `src` into the directory `dest` on the node (tar over ssh), as the docker
    substrate does: a directory's contents land in `dest`, a file as `dest/<name>`."""
    src = src.resolve()
    where, what = (src, ".") if src.is_dir() else (src.parent, src.name)
    tar = await asyncio.create_subprocess_exec(
        "tar", "-C", str(where), "-cf", "-", what,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    data, err = await tar.communicate()
    if tar.returncode != 0:
        raise SubstrateError("vm", f"tar {src} failed", err.decode(errors="replace"))
    remote = f"mkdir -p {shlex.quote(dest)} && tar -C {shlex.quote(dest)} -xf -"
    result = await run([*ssh_argv(host, key), remote], timeout, stdin=data)
    if not result.ok:
        raise SubstrateError("vm", f"copy {src} to {host}:{dest} failed (exit "
                             f"{result.exit_code}{', timed out' if result.timed_out else ''})",
                             result.stderr)


async def probe(host: str, key: Path, cmd: str = "true", limit: float = 8.0) -> ExecResult:
    """One quick attempt, bounded as a whole: a node going down or booting must not stall
    the caller on TCP or keepalive timeouts."""
    return await run([*ssh_argv(host, key, connect_timeout=3), cmd], limit)


async def port_open(host: str, port: int = 22, timeout: float = 1.0) -> bool:
    """Whether a TCP connection to host:port completes within `timeout` seconds."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (TimeoutError, OSError):
        return False
    writer.close()
    return True


async def wait_ready(host: str, key: Path, timeout: float, cmd: str = "true") -> float:
    """Poll until `cmd` succeeds over SSH; return the seconds it took. A booting guest is
    polled with cheap TCP connects (every 0.2 s) until sshd listens, then with SSH."""
    started = time.monotonic()
    last = ""
    while time.monotonic() - started < timeout:
        if not await port_open(host):
            last = f"port 22 of {host} not open yet"
            await asyncio.sleep(0.2)
            continue
        result = await probe(host, key, cmd)
        if result.ok:
            return time.monotonic() - started
        last = result.stderr
        await asyncio.sleep(0.5)
    raise SubstrateError("vm", f"{host} not reachable over SSH after {timeout:.0f}s", last)
