"""The hosts file: named machines, their engine endpoints, capacity and labels.

`$HARNESS_HOME/hosts.yaml`, or `hosts:` in a campaign file, lists the machines trials may
run on::

    hosts:
      - name: rack1-a
        docker: ssh://hx@rack1-a            # or unix:///..., or {url: tcp://h:2376, tls: {...}}
        libvirt: qemu+ssh://hx@rack1-a/system
        capacity: {cpus: 32, memory_mb: 131072, max_trials: {docker: 24, vm: 6}}
        labels: {rack: "1"}

Without a file the local machine is the single host (`default_hosts`). Endpoints are
checked against a scheme allowlist and never carry credentials (SSH keys or the agent, TLS
client certificates); plain `tcp://` needs TLS, as an open Docker port is root on that host.
`memory_mb` is the machine's memory; the pool keeps `HOST_RESERVE_MB` for the host itself,
as `harness/capacity.py` does. Every error is one line: `file: key: message (valid: ...)`.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.errors import ConfigError, RegistryError
from harness.paths import harness_home
from harness.substrates import classes as substrate_classes
from harness.substrates import names as substrate_names
from harness.substrates import substrate_class
from harness.substrates.common import host_memory_mb
from harness.validation import describe, model_at

DOCKER_SCHEMES = ("unix", "ssh", "tcp")
LIBVIRT_SCHEMES = ("qemu", "qemu+ssh", "qemu+tls")
LIBVIRT_PARAMS = ("keyfile", "known_hosts", "no_tty", "pkipath", "socket")
DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
LABEL_KEY = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$")


@functools.cache
def engine_for(substrate: str) -> str:
    """The hosts-file endpoint a substrate runs on (its `engine`: docker, libvirt), asked of
    the registry; empty for one whose nodes live elsewhere or that is unknown here."""
    try:
        return substrate_class(substrate).engine
    except RegistryError:
        return ""


def _split(url: str, schemes: tuple[str, ...]):
    """urlsplit with the checks every endpoint shares: allowed scheme, no password."""
    parts = urlsplit(url)
    if parts.scheme not in schemes:
        raise ValueError(f"scheme {parts.scheme or '(none)'!r} not allowed in {url!r} "
                         f"(valid: {', '.join(s + '://' for s in schemes)})")
    if parts.password is not None:
        raise ValueError(f"credentials embedded in {parts.scheme}://{parts.username}:***@...; "
                         "use an SSH key or agent, or TLS client certificates "
                         f"(valid: {parts.scheme}://user@host)")
    if parts.fragment:
        raise ValueError(f"unexpected #fragment in {url!r}")
    try:
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise ValueError(f"bad port in {url!r} (valid: 1-65535)") from None
    return parts


def _remote(parts, url: str) -> None:
    if not parts.hostname:
        raise ValueError(f"no host in {url!r} (valid: {parts.scheme}://user@host)")


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
        parts = _split(v, DOCKER_SCHEMES)
        if parts.scheme == "unix":
            if parts.netloc or not parts.path.startswith("/") or parts.path == "/":
                raise ValueError(f"{v!r}: a socket is unix:///absolute/path")
        elif parts.path not in ("", "/") or parts.query:
            raise ValueError(f"{v!r}: no path or query after the host "
                             f"(valid: {parts.scheme}://host:port)")
        else:
            _remote(parts, v)
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


class HostCapacity(BaseModel):
    """What a host offers; over-commit factors default to the campaign's `capacity:`."""

    model_config = ConfigDict(extra="forbid")
    cpus: int = Field(ge=1, le=65536)
    memory_mb: int = Field(ge=2048)
    max_trials: dict[str, int] = Field(default_factory=dict)
    cpu_overcommit: float | None = Field(default=None, gt=0, le=64)
    memory_overcommit: float | None = Field(default=None, gt=0, le=8)

    @field_validator("max_trials")
    @classmethod
    def _substrates(cls, v: dict[str, int]) -> dict[str, int]:
        valid = substrate_names()
        for sub, n in v.items():
            if sub not in valid:
                raise ValueError(f"unknown substrate {sub!r} (valid: {', '.join(valid)})")
            if n < 0:
                raise ValueError(f"{sub}: must be >= 0 (0 keeps the substrate off this host)")
        return v


class HostSpec(BaseModel):
    """One machine trials may run on."""

    model_config = ConfigDict(extra="forbid")
    name: str
    docker: DockerEndpoint | None = None
    libvirt: str | None = None
    capacity: HostCapacity
    labels: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not DNS_LABEL.match(v):
            raise ValueError(f"got {v!r}; a DNS label: lowercase letters, digits and '-', "
                             "at most 63 characters, no leading or trailing '-'")
        return v

    @field_validator("libvirt")
    @classmethod
    def _libvirt(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = _split(v, LIBVIRT_SCHEMES)
        if parts.path not in ("/system", "/session"):
            raise ValueError(f"{v!r}: the path is /system or /session")
        if parts.scheme == "qemu" and parts.netloc:
            raise ValueError(f"{v!r}: qemu:/// is local; a remote host is qemu+ssh://user@host")
        if parts.scheme != "qemu":
            _remote(parts, v)
        bad = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True)
               if k not in LIBVIRT_PARAMS]
        if bad:
            raise ValueError(f"{v!r}: parameter {bad[0]!r} not allowed "
                             f"(valid: {', '.join(LIBVIRT_PARAMS)})")
        return v

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        for key in v:
            if not isinstance(key, str) or not LABEL_KEY.match(key):
                raise ValueError(f"label key {key!r}: letters, digits, '.', '_', '/', '-'")
        return {k: str(x).lower() if isinstance(x, bool) else
                str(x) if isinstance(x, int | float) else x for k, x in v.items()}

    @model_validator(mode="after")
    def _engines(self) -> HostSpec:
        if self.docker is None and self.libvirt is None:
            raise ValueError("needs an engine: docker and/or libvirt")
        for sub, n in self.capacity.max_trials.items():
            engine = engine_for(sub)
            if n and engine and getattr(self, engine) is None:
                raise ValueError(f"capacity.max_trials.{sub} needs a {engine} endpoint "
                                 f"(or set it to 0)")
        return self

    def runs(self, substrate: str) -> bool:
        """Whether this host can run the substrate at all (engine present, not capped at 0)."""
        engine = engine_for(substrate)
        if engine and getattr(self, engine) is None:
            return False
        return self.capacity.max_trials.get(substrate, 1) > 0


class HostsFile(BaseModel):
    """The hosts file: one or more hosts with unique names."""

    model_config = ConfigDict(extra="forbid")
    hosts: list[HostSpec]

    @field_validator("hosts")
    @classmethod
    def _unique(cls, v: list[HostSpec]) -> list[HostSpec]:
        if not v:
            raise ValueError("no hosts; list at least one (without a hosts file the local "
                             "machine is the host)")
        first: dict[str, int] = {}
        for i, host in enumerate(v):
            if host.name in first:
                raise ValueError(f"duplicate host name {host.name!r} "
                                 f"(hosts[{first[host.name]}] and hosts[{i}])")
            first[host.name] = i
        return v


def _key(loc: tuple, raw: Any) -> str:
    """`hosts[<name>].docker.url` for an error location (the index when unnamed)."""
    parts: list[str] = []
    for i, part in enumerate(loc):
        if isinstance(part, int) and loc[:i] == ("hosts",):
            hosts = raw.get("hosts") if isinstance(raw, dict) else None
            entry = hosts[part] if isinstance(hosts, list) and part < len(hosts) else None
            name = entry.get("name") if isinstance(entry, dict) else None
            parts[-1] += f"[{name}]" if isinstance(name, str) and name else f"[{part}]"
        elif not str(part).startswith(("function-", "literal", "union")):
            parts.append(str(part))
    return ".".join(parts)


def _error(exc: ValidationError, raw: Any) -> tuple[str, str]:
    errors = exc.errors()
    e = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
    loc = tuple(e["loc"])
    if e["type"] == "extra_forbidden":
        model = model_at(HostsFile, loc)
        valid = ", ".join(model.model_fields) if model else "?"
        return _key(loc, raw), f"unknown key (valid: {valid})"
    return _key(loc, raw), describe(exc, HostsFile)[1]


def load_hosts(source: str | Path | dict | list, file: str | None = None) -> HostsFile:
    """The validated hosts file from a path, or from parsed data (a campaign's `hosts:`:
    a list of hosts or a mapping with `hosts`); errors are one-line `ConfigError`s."""
    if isinstance(source, str | Path):
        path = Path(source)
        file = file or str(path)
        if not path.is_file():
            raise ConfigError("hosts file not found", file=file)
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ConfigError(f"invalid YAML: {' '.join(str(exc).split())}", file=file) from None
    else:
        raw, file = source, file or "hosts"
    if isinstance(raw, list):
        raw = {"hosts": raw}
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping with hosts: [...] (valid: hosts)", file=file)
    try:
        return HostsFile.model_validate(raw)
    except ValidationError as exc:
        key, msg = _error(exc, raw)
        raise ConfigError(msg, file=file, key=key or None) from None


def local_endpoints() -> dict[str, str]:
    """This machine's engines, by hosts-file key, as its substrates reach them."""
    out: dict[str, str] = {}
    for cls in substrate_classes().values():
        if cls.engine:
            out[cls.engine] = cls.local_endpoint()
    return out


def default_hosts() -> HostsFile:
    """The local machine as the single host: its cores and memory, the harness's engines."""
    return HostsFile(hosts=[HostSpec(
        name="local", **local_endpoints(),
        capacity=HostCapacity(cpus=os.cpu_count() or 1,
                              memory_mb=max(host_memory_mb(), 2048)))])


def hosts_path() -> Path:
    return harness_home() / "hosts.yaml"


def resolve_hosts(campaign_hosts: dict | list | None = None,
                  campaign_file: str | None = None) -> HostsFile:
    """The campaign's `hosts:` if it has one, else `$HARNESS_HOME/hosts.yaml` if present,
    else the local machine."""
    if campaign_hosts is not None:
        return load_hosts(campaign_hosts, file=campaign_file or "campaign")
    path = hosts_path()
    return load_hosts(path) if path.is_file() else default_hosts()


def hosts_from(path: str | Path) -> HostsFile:
    """The hosts of a hosts file, or of a campaign file's `hosts:` (`--hosts FILE`)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (yaml.YAMLError, UnicodeDecodeError):
        raw = None
    if isinstance(raw, dict) and "tasks" in raw:
        if raw.get("hosts") is None:
            raise ConfigError("this campaign has no hosts: (valid: a hosts file, or a "
                              "campaign file with hosts:)", file=str(path))
        return load_hosts(raw["hosts"], file=str(path))
    return load_hosts(path)
