"""The model gateway for the nodes of another machine's libvirt host, relayed over SSH.

The nodes reach the gateway at their bridge's own address, which lives on the libvirt
host; the gateway listens on this machine. `GatewayRelay` runs one `ssh` to the host
(`RemoteHost`'s login) that does two things:

- `-R SOCKET:LOCAL:PORT`: a Unix socket on the host (mode 0600, the login user's), each
  connection to it forwarded through the SSH connection to the gateway's site for this
  trial on this machine (`LOCAL:PORT`, a loopback address of the trial's own);
- `python3` on the host as root: it listens on TCP at the bridge's address (the
  configured gateway port, else any free one; it says `PORT <n>`) and splices each
  connection to that socket, at most `MAX_CONNS` at once (more are closed at once).

The host needs only `python3` and sshd's defaults (`AllowStreamLocalForwarding`; no
`GatewayPorts`). Both ends go away when the SSH stream ends: `close()`, or this process
gone, even by kill -9 (the remote side reads its stdin to the end, then removes the
socket).
"""

from __future__ import annotations

import shlex
import subprocess
import threading

from harness.errors import SubstrateError
from harness.substrates.ssh import as_root

MAX_CONNS = 256
START_TIMEOUT = 60
REMOTE_SIDE = r"""
import os, socket, sys, threading
addr, port, path, cap = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    srv.bind((addr, port))
except OSError:
    srv.bind((addr, 0))
srv.listen(128)
sys.stdout.write("PORT %d\n" % srv.getsockname()[1])
sys.stdout.flush()
slots = threading.BoundedSemaphore(cap)
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(c):
    u = socket.socket(socket.AF_UNIX)
    try:
        u.connect(path)
        back = threading.Thread(target=pipe, args=(u, c), daemon=True)
        back.start()
        pipe(c, u)
        back.join()
    except OSError:
        pass
    finally:
        c.close()
        u.close()
        slots.release()
def accept():
    while True:
        c, _ = srv.accept()
        if not slots.acquire(blocking=False):
            c.close()
            continue
        threading.Thread(target=serve, args=(c,), daemon=True).start()
threading.Thread(target=accept, daemon=True).start()
while os.read(0, 4096):
    pass
try:
    os.unlink(path)
except OSError:
    pass
"""


def socket_path(trial_id: str) -> str:
    """The relay's Unix socket on the host (named by the trial: one per trial)."""
    return f"/tmp/hx-gw-{trial_id}.sock"


class GatewayRelay:
    """`address:port` on the libvirt host (`port` the configured one where free), relayed
    to `target` (address, port) on this machine."""

    def __init__(self, remote, trial_id: str, address: str, port: int,
                 target: tuple[str, int]):
        self.remote, self.address = remote, address
        path = socket_path(trial_id)
        line = as_root("exec python3 -c " + " ".join(shlex.quote(a) for a in (
            REMOTE_SIDE, address, str(int(port)), path, str(MAX_CONNS))), remote.user)
        self.proc = subprocess.Popen(
            [*remote.argv()[:-1], "-o", "ExitOnForwardFailure=yes",
             "-o", "StreamLocalBindUnlink=yes", "-R", f"{path}:{target[0]}:{int(target[1])}",
             remote.argv()[-1], line],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = self._first_line()
        if first[:1] != ["PORT"] or len(first) < 2 or not first[1].isdigit():
            self.close()
            err = self.proc.stderr.read().decode(errors="replace").strip()[-500:]
            raise SubstrateError("vm", f"the model gateway's relay on {remote.host} did not "
                                 f"start on {address} (exit {self.proc.returncode})", err)
        self.port = int(first[1])

    def _first_line(self) -> list[str]:
        """The remote side's first line, or [] when it says nothing in `START_TIMEOUT`."""
        out: list[bytes] = []
        reader = threading.Thread(target=lambda: out.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(START_TIMEOUT)
        return out[0].decode(errors="replace").split() if out else []

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """End the SSH stream (the host's side ends with it), then the process."""
        try:
            self.proc.stdin.close()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
