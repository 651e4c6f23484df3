"""An exec's attached socket: stdin in, the multiplexed stdout/stderr frames out.

The frames are read through the HTTP response's own buffered reader, never the socket
under it (as the Docker SDK's `exec_start` streams do): the reader that parsed the
response's headers may already hold the first frames when a command is quick and this
process slow (a loaded machine), and reading the socket past it loses them (an exec that
printed, exit code 0, and no output).
"""

from __future__ import annotations

import socket
import ssl
import struct

from harness.substrates.common import BoundedOutput

HEADER = 8  # a frame: stream (1 byte), 3 zero bytes, length (4 bytes, big-endian)
CHUNK = 1 << 16


def exec_output(api, exec_id: str, data: bytes | None = None,
                half_close: bool = True) -> tuple[str, str]:
    """Start an exec; with `data` (an exec created with stdin), send it and half-close
    (unless the command stops reading on its own: `half_close=False`); read (stdout,
    stderr) until the exec ends, each bounded as it arrives (`BoundedOutput`)."""
    out, err = BoundedOutput(), BoundedOutput()
    res = api._post_json(api._url("/exec/{0}/start", exec_id),
                         headers={"Connection": "Upgrade", "Upgrade": "tcp"},
                         data={"Tty": False, "Detach": False}, stream=True)
    try:
        sock = api._get_raw_response_socket(res)  # raises for an error status
        api._disable_socket_timeout(sock)  # a command may print nothing for a long time
        if data is not None:
            raw = getattr(sock, "_sock", sock)
            try:
                raw.sendall(data)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass  # the command ended without reading it all: its output says why
            if half_close:
                raw.shutdown(socket.SHUT_WR)
        read_frames(res.raw._fp.fp, out, err)
    finally:
        res.close()
    return out.text(), err.text()


def read_frames(reader, out: BoundedOutput, err: BoundedOutput) -> None:
    """Each frame of the multiplexed stream `reader` (a buffered reader: `read(n)` returns
    n bytes, fewer only at the end) into `out` (stdout) or `err` (stderr), until its end."""
    while True:
        header = reader.read(HEADER)
        if len(header) < HEADER:
            return
        stream, length = struct.unpack(">BxxxL", header)
        to = err if stream == 2 else out
        while length:
            chunk = reader.read(min(length, CHUNK))
            if not chunk:
                return
            to.write(chunk)
            length -= len(chunk)
