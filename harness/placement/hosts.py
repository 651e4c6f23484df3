"""The hosts file: named machines, their engine endpoints, capacity and labels.

`$HARNESS_HOME/hosts.yaml`, or `hosts:` in a campaign file, lists the machines trials may
run on::

    hosts:
      - name: rack1-a
        docker: ssh://hx@rack1-a            # or unix:///..., or {url: tcp://h:2376, tls: {...}}
        libvirt: qemu+ssh://hx@rack1-a/system
        capacity: {cpus: 32, memory_mb: 131072, max_trials: {docker: 24, vm: 6}}
        labels: {rack: "1"}

Without a file the local machine is the single host (`default_hosts`). The endpoint keys
(`docker`, `libvirt` above) are the substrates' `engine`s and each one's model is its
substrate's `endpoint` in its folder's substrate.toml (`docker/endpoint.py`,
`hypervisor/endpoint.py`: modules a hosts file loads without loading a substrate): a new
engine is a new folder, not an edit here. Endpoints are checked against a scheme allowlist
and never carry credentials (SSH keys or the agent, TLS client certificates). `memory_mb` is
the machine's memory; the pool keeps `HOST_RESERVE_MB` for the host itself. Every error is
one line: `file: key: message (valid: ...)`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from harness import substrates
from harness.errors import ConfigError, RegistryError
from harness.paths import harness_home
from harness.substrates import names as substrate_names
from harness.substrates.common import host_memory_mb
from harness.validation import describe, model_at

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
LABEL_KEY = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$")


@functools.cache
def engine_for(substrate: str) -> str:
    """The hosts-file endpoint a substrate runs on (its `engine`), asked of the registry;
    empty for one whose nodes live elsewhere or that is unknown here."""
    try:
        return substrates.entry(substrate).engine
    except RegistryError:
        return ""


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


class _Host(BaseModel):
    """One machine trials may run on: `name`, one endpoint per engine (a key per substrate
    `engine`, its model the substrate folder's `endpoint_model`), `capacity`, `labels`,
    `enabled`. The class with the fields is `HostSpec`, built from the registry."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("name", check_fields=False)
    @classmethod
    def _name(cls, v: str) -> str:
        if not DNS_LABEL.match(v):
            raise ValueError(f"got {v!r}; a DNS label: lowercase letters, digits and '-', "
                             "at most 63 characters, no leading or trailing '-'")
        return v

    @field_validator("labels", mode="before", check_fields=False)
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
    def _engines(self) -> _Host:
        if all(self.endpoint(e) is None for e in ENGINES):
            raise ValueError(f"needs an engine: {' and/or '.join(ENGINES)}")
        for sub, n in self.capacity.max_trials.items():
            engine = engine_for(sub)
            if n and engine and self.endpoint(engine) is None:
                raise ValueError(f"capacity.max_trials.{sub} needs a {engine} endpoint "
                                 f"(or set it to 0)")
        return self

    def endpoint(self, engine: str) -> Any:
        """This host's endpoint for `engine`, or None."""
        return getattr(self, engine, None)

    def runs(self, substrate: str) -> bool:
        """Whether this host can run the substrate at all (engine present, not capped at 0)."""
        engine = engine_for(substrate)
        if engine and self.endpoint(engine) is None:
            return False
        return self.capacity.max_trials.get(substrate, 1) > 0


def _engines() -> dict[str, Any]:
    """Engine key -> endpoint model, from every substrate that declares an engine."""
    out: dict[str, Any] = {}
    for name in substrates.names():  # declared in substrate.toml: no substrate imported
        entry = substrates.entry(name)
        if entry.engine and entry.endpoint and entry.engine not in out:
            try:
                out[entry.engine] = entry.endpoint_model()
            except ImportError:  # its extra is not installed here
                continue
    return out


ENGINES = _engines()
HostSpec = create_model(
    "HostSpec", __base__=_Host, __module__=__name__, name=(str, ...),
    **{engine: (model | None, None) for engine, model in ENGINES.items()},
    capacity=(HostCapacity, ...), labels=(dict[str, str], Field(default_factory=dict)),
    enabled=(bool, True))


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


def local_endpoints(only: Iterable[str] | None = None) -> dict[str, str]:
    """This machine's engines, by hosts-file key, as its substrates reach them (`only`:
    those of these substrates, whose modules alone are imported)."""
    out: dict[str, str] = {}
    for name in substrates.names() if only is None else only:
        engine = substrates.entry(name).engine
        if engine and engine not in out:
            try:
                out[engine] = substrates.substrate_class(name).local_endpoint()
            except RegistryError:  # its extra is not installed here
                continue
    return out


def default_hosts(only: Iterable[str] | None = None) -> HostsFile:
    """The local machine as the single host: its cores and memory, the harness's engines
    (`only`: those of these substrates)."""
    return HostsFile(hosts=[HostSpec(
        name="local", **local_endpoints(only),
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
