"""An exec's output read through the response's buffered reader: a fake engine on a Unix
socket answers `exec start` with its headers and every frame in one write (what a quick
command on a loaded machine looks like), and none of the output may be lost."""

from __future__ import annotations

import io
import socket
import struct
import threading

import docker
import pytest

from harness.substrates.common import BoundedOutput
from harness.substrates.docker.attach import exec_output, read_frames


def frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


HEAD = (b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\n"
        b"Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
BODY = frame(1, b"HTTP 401\n") + frame(2, b"warn\n") + frame(1, b"x" * 70000)


@pytest.fixture
def engine(tmp_path):
    """One connection: read the request (and what a client sends after it), then the
    headers and all the frames in a single write, then close."""
    path = str(tmp_path / "docker.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    got = []

    def serve():
        conn, _ = srv.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(next((ln.split(b":")[1] for ln in head.split(b"\r\n")
                               if ln.lower().startswith(b"content-length")), b"0"))
            while len(rest) < length:
                rest += conn.recv(65536)
            got.append(head.split(b"\r\n")[0])
            conn.sendall(HEAD + BODY)

    threading.Thread(target=serve, daemon=True).start()
    api = docker.APIClient(base_url=f"unix://{path}", version="1.41", timeout=10)
    yield api, got
    api.close()
    srv.close()


def test_frames_that_came_with_the_headers_are_kept(engine):
    api, got = engine
    out, err = exec_output(api, "abc")
    assert got == [b"POST /v1.41/exec/abc/start HTTP/1.1"]
    assert out == "HTTP 401\n" + "x" * 70000
    assert err == "warn\n"


def test_frames_split_anywhere_are_read_whole():
    out, err = BoundedOutput(), BoundedOutput()
    read_frames(io.BufferedReader(io.BytesIO(BODY), buffer_size=7), out, err)
    assert out.text().startswith("HTTP 401\nxxx") and err.text() == "warn\n"


def test_a_stream_cut_short_ends_quietly():
    out, err = BoundedOutput(), BoundedOutput()
    read_frames(io.BufferedReader(io.BytesIO(BODY[:20])), out, err)
    assert out.text() == "HTTP 401\n" and err.text() == ""
