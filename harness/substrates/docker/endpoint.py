"""The docker substrate's hosts-file endpoint (`docker:` of a host): an engine's URL,
its TLS client files, its subnet pool."""

from __future__ import annotations

import ipaddress
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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
        return os.path.expanduser(v)


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
