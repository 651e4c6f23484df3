"""The hosts-file endpoint of the VM substrates (`libvirt:` of a host): a libvirt daemon's
URI, `qemu:///system` here or `qemu+ssh://user@host/system` (`qemu+tls://` too). Here, not
in `libvirt/`, so that reading a hosts file loads no substrate."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qsl

from pydantic import AfterValidator

from harness.substrates.endpoints import require_host, split_endpoint

LIBVIRT_SCHEMES = ("qemu", "qemu+ssh", "qemu+tls")
LIBVIRT_PARAMS = ("keyfile", "known_hosts", "no_tty", "pkipath", "socket")


def check_uri(v: str) -> str:
    """The URI when it is one the harness can drive; else a one-line ValueError."""
    parts = split_endpoint(v, LIBVIRT_SCHEMES)
    if parts.path not in ("/system", "/session"):
        raise ValueError(f"{v!r}: the path is /system or /session")
    if parts.scheme == "qemu" and parts.netloc:
        raise ValueError(f"{v!r}: qemu:/// is local; a remote host is qemu+ssh://user@host")
    if parts.scheme != "qemu":
        require_host(parts, v)
    bad = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True)
           if k not in LIBVIRT_PARAMS]
    if bad:
        raise ValueError(f"{v!r}: parameter {bad[0]!r} not allowed "
                         f"(valid: {', '.join(LIBVIRT_PARAMS)})")
    return v


LibvirtURI = Annotated[str, AfterValidator(check_uri)]
