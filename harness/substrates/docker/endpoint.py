"""The docker substrate's hosts-file endpoint (`docker:` of a host): an engine's URL,
its TLS client files, its subnet pool."""

from __future__ import annotations

import hashlib
import ipaddress
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.paths import harness_home
from harness.substrates.endpoints import require_host, split_endpoint

DOCKER_SCHEMES = ("unix", "ssh", "tcp")


class TLSFiles(BaseModel):
    """Client certificate for a `tcp://` Docker endpoint (paths, `~` expanded)."""

    model_config = ConfigDict(extra="forbid")
    ca: str = Field(min_length=1)
    cert: str = Field(min_length=1)
    key: str = Field(min_length=1)

    @field_validator("ca", "cert", "key")
    @classmethod
    def _expand(cls, v: str) -> str:
        return os.path.abspath(os.path.expanduser(v))

    def ansible_vars(self) -> dict[str, Any]:
        """The docker_api connection's TLS variables (paths only)."""
        return {"ansible_docker_tls": True, "ansible_docker_validate_certs": True,
                "ansible_docker_ca_path": self.ca, "ansible_docker_client_cert": self.cert,
                "ansible_docker_client_key": self.key}

    def cli_flags(self) -> str:
        """The same for the Docker CLI."""
        return (f"--tlsverify --tlscacert {self.ca} --tlscert {self.cert} "
                f"--tlskey {self.key}")

    def cert_dir(self) -> Path:
        """A directory holding the three as ca.pem, cert.pem and key.pem (the Terraform
        provider's `cert_path`): theirs when they are named so, else symlinks to them in a
        private directory under $HARNESS_HOME/tls (paths only: no key is copied)."""
        own = {Path(self.ca).parent / "ca.pem", Path(self.cert).parent / "cert.pem",
               Path(self.key).parent / "key.pem"}
        if own == {Path(self.ca), Path(self.cert), Path(self.key)} and len(
                {p.parent for p in own}) == 1:
            return Path(self.ca).parent
        tag = hashlib.sha256(f"{self.ca}\0{self.cert}\0{self.key}".encode()).hexdigest()[:12]
        d = harness_home() / "tls" / tag
        d.mkdir(parents=True, exist_ok=True)
        d.parent.chmod(0o700)
        for name, target in (("ca.pem", self.ca), ("cert.pem", self.cert),
                             ("key.pem", self.key)):
            link = d / name
            if not link.is_symlink() or os.readlink(link) != target:
                tmp = d / f".{name}.tmp"
                tmp.unlink(missing_ok=True)
                tmp.symlink_to(target)
                tmp.replace(link)
        return d


class DockerEndpoint(BaseModel):
    """A Docker engine: `unix:///path`, `ssh://[user@]host[:port]` or `tcp://host:port`+tls;
    `pool`: where its trial subnets come from (default: `substrates.docker.pool`), distinct
    per engine when several share one kernel."""

    model_config = ConfigDict(extra="forbid")
    url: str
    tls: TLSFiles | None = None
    pool: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _url_only(cls, v: Any) -> Any:
        return {"url": v} if isinstance(v, str) else v

    @field_validator("pool")
    @classmethod
    def _pool(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            net = ipaddress.ip_network(v)
        except ValueError:
            raise ValueError(f"{v!r} is not a network (valid: e.g. 10.219.0.0/16)") from None
        if net.version != 4 or net.prefixlen > 24:
            raise ValueError(f"{v!r}: an IPv4 network of /24 or larger")
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        parts = split_endpoint(v, DOCKER_SCHEMES)
        if parts.scheme == "unix":
            if parts.netloc or not parts.path.startswith("/") or parts.path == "/":
                raise ValueError(f"{v!r}: a socket is unix:///absolute/path")
        elif parts.path not in ("", "/") or parts.query:
            raise ValueError(f"{v!r}: no path or query after the host "
                             f"(valid: {parts.scheme}://host:port)")
        else:
            require_host(parts, v)
        if parts.scheme == "tcp" and parts.port is None:
            raise ValueError(f"{v!r}: tcp:// needs a port (valid: tcp://host:2376)")
        return v

    @model_validator(mode="after")
    def _tls(self) -> DockerEndpoint:
        tcp = self.url.startswith("tcp://")
        if tcp and self.tls is None:
            raise ValueError("tcp:// without tls gives anyone who reaches the port root on that "
                             "host; add tls: {ca, cert, key} or use ssh://")
        if self.tls is not None and not tcp:
            raise ValueError("tls applies to tcp:// endpoints only")
        return self
