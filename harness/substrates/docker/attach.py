"""An exec's attached socket: stdin in, the multiplexed stdout/stderr frames out."""

from __future__ import annotations


def exec_with_stdin(api, exec_id: str, data: bytes,
                     half_close: bool = True) -> tuple[bytes, bytes]:
    """Start an exec created with stdin, send `data`, half-close (unless the command stops
    reading on its own: `half_close=False`), read (stdout, stderr) until the exec ends."""
    import socket
    import ssl

    from docker.utils.socket import consume_socket_output, demux_adaptor, frames_iter

    sock = api.exec_start(exec_id, socket=True)
    raw = getattr(sock, "_sock", sock)
    try:
        try:
            raw.sendall(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the command ended without reading it all: its output says why
        if half_close:
            raw.shutdown(socket.SHUT_WR)
        out, err = consume_socket_output(
            (demux_adaptor(*frame) for frame in frames_iter(sock, False)), demux=True)
    finally:
        sock.close()
    return out or b"", err or b""
