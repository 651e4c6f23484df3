"""The substrate registry: name -> lazily imported class, and what the core asks of it.

A substrate is a folder `harness/substrates/<folder>/` (see `base.Substrate`) with a
`substrate.toml` that names the substrates it provides:

    [substrates.vm]
    class = "LibvirtSubstrate"              # in the folder's __init__.py
    install = "pip install -e '.[vm]'"      # shown when the import fails (optional)
    default = true                          # the default substrate (exactly one folder)
    engine = "libvirt"                      # the hosts-file endpoint key it runs on, and
    endpoint = "harness.substrates.hypervisor.endpoint:LibvirtURI"   # that key's model
    env_types = ["vm"]                      # the task types it runs
    backends = ["libvirt", "qemu"]          # names a foreign format gives it (optional)
    stands_in_for = []                      # task types it runs unchanged (optional)
    ansible_connection = "ssh"              # the connection plugin of its inventories

    [node_fields.bmc]       # a task.toml node key the folder's substrates honour (`fields`)
    type = "bool"
    default = false

    [providers.libvirt]     # the folder's Terraform providers (`Substrate.providers`)
    source = "dmacvicar/libvirt"
    version = "0.7.6"
    shared = false                          # one provider server per harness process?
    build = "provider.sh"                   # builds it into the local mirror (this folder)

    [commands.pool]                         # a Typer app mounted as `harness pool`
    app = "harness.substrates.baremetal.cli:app"
    help = "Pools of bare-metal machines"   # what `harness --help` lists (optional)

The registry reads those files only; a substrate's module (and `base`) is imported when it
is used (what a task needs to be loaded and checked is in the file: loading a task imports
no substrate).
The class gets those attributes from its entry.
Lookup errors list every valid name and, for optional extras, the install command.
"""

from __future__ import annotations

import functools
import importlib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import RegistryError

if TYPE_CHECKING:
    from harness.substrates.base import Substrate

FOLDERS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Entry:
    module: str
    cls: str
    install: str = ""
    default: bool = False
    env_types: tuple[str, ...] = ()
    stands_in_for: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    node_fields: tuple[tuple[str, tuple[Any, Any]], ...] = ()
    engine: str = ""
    endpoint: str = ""  # "module:attribute" of the engine's endpoint model
    providers: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()  # the folder's
    ansible_connection: str = "ssh"

    def endpoint_model(self) -> Any:
        """The pydantic model (or annotated type) of this substrate's hosts-file endpoint."""
        if not self.endpoint:
            return None
        module, _, attr = self.endpoint.partition(":")
        return getattr(importlib.import_module(module), attr)

    def fields(self) -> dict[str, tuple[Any, Any]]:
        """The `[[environment.nodes]]` keys this substrate honours beyond the common ones:
        pydantic field definitions."""
        return dict(self.node_fields)


DECLARED = ("env_types", "stands_in_for", "backends")  # substrate.toml -> class attributes


@functools.cache
def _registry() -> dict[str, Entry]:
    """Every `[substrates.<name>]` of every `harness/substrates/*/substrate.toml`. (Its
    node fields are pydantic's: imported here, not with the package, so that `commands()`
    for `harness --help` imports neither pydantic nor any substrate.)"""
    from harness.substrates.fields import node_field

    out: dict[str, Entry] = {}
    for decl in sorted(FOLDERS.glob("*/substrate.toml")):
        doc = tomllib.loads(decl.read_text())
        shared = doc.get("node_fields", {})
        for name, fields in doc.get("substrates", {}).items():
            out[name] = Entry(f"harness.substrates.{decl.parent.name}", fields["class"],
                              fields.get("install", ""), bool(fields.get("default")),
                              *(tuple(fields.get(k, ())) for k in DECLARED),
                              tuple((key, node_field(f"{decl}: node_fields.{key}", spec))
                                    for key, spec in shared.items()),
                              fields.get("engine", ""), fields.get("endpoint", ""),
                              _providers(decl, doc),
                              fields.get("ansible_connection", "ssh"))
    return out


def _providers(decl: Path, doc: dict) -> tuple:
    """A folder's `[providers.<local name>]` (source, version, shared, build: a script of
    the folder), as the entry holds them."""
    out = []
    for local, pin in doc.get("providers", {}).items():
        pin = {**pin, **({"build": str(decl.parent / pin["build"])} if "build" in pin else {})}
        out.append((local, tuple(sorted(pin.items()))))
    return tuple(out)


__all__ = ["ansible_connections", "backends", "classes", "default_name", "entry",
           "for_env_type", "get_substrate", "names", "provider_pins", "stand_in",
           "substrate_class"]


def ansible_connections() -> list[str]:
    """The connection plugins of every substrate's inventories (read from the files: no
    substrate is imported), which the playbook server loads before its first run."""
    return sorted({e.ansible_connection for e in _registry().values()})


def names() -> list[str]:
    return sorted(_registry())


def default_name() -> str:
    return next(name for name, entry in _registry().items() if entry.default)


@functools.cache
def commands() -> dict[str, tuple[str, str]]:
    """CLI command groups the folders contribute (`[commands.<name>]`): name -> ("module:
    attribute" of a Typer app, the one-line summary `harness --help` lists without importing
    it)."""
    out: dict[str, tuple[str, str]] = {}
    for decl in sorted(FOLDERS.glob("*/substrate.toml")):
        for name, cmd in tomllib.loads(decl.read_text()).get("commands", {}).items():
            if isinstance(cmd, str):
                cmd = {"app": cmd}
            out[name] = (cmd["app"], cmd.get("help", ""))
    return out


def substrate_class(name: str) -> type[Substrate]:
    """The class registered as `name`; an unknown name lists the valid ones."""
    entry = _registry().get(name)
    if entry is None:
        raise RegistryError("substrate", name, names())
    try:
        mod = importlib.import_module(entry.module)
    except ImportError as exc:
        hint = f" (install with: {entry.install})" if entry.install else ""
        raise RegistryError("substrate", f"{name}: {exc}{hint}", names()) from exc
    cls = getattr(mod, entry.cls)
    for key in DECLARED:  # (set on each lookup: the same values, from the cached entry)
        setattr(cls, key, getattr(entry, key))
    cls.node_fields = entry.fields()
    cls.engine, cls.endpoint_model = entry.engine, entry.endpoint_model()
    cls.ansible_connection = entry.ansible_connection
    return cls


def entry(name: str) -> Entry:
    """What `substrate.toml` declares of `name`; an unknown name lists the valid ones."""
    found = _registry().get(name)
    if found is None:
        raise RegistryError("substrate", name, names())
    return found


def get_substrate(name: str, **kwargs) -> Substrate:
    """Instantiate a substrate by name; an unknown name lists the valid ones."""
    return substrate_class(name)(name=name, **kwargs)


def classes() -> dict[str, type[Substrate]]:
    """Every registered substrate that can be imported here, by name."""
    out = {}
    for name in _registry():
        try:
            out[name] = substrate_class(name)
        except RegistryError:
            continue
    return out


def for_env_type(env_type: str) -> str:
    """The substrate that runs a task.toml `[environment] type` by default."""
    for name, e in _registry().items():
        if env_type in e.env_types:
            return name
    return env_type  # refused by get_substrate with the list of valid names


def stand_in(env_type: str) -> str | None:
    """The env type of a substrate that runs tasks of `env_type` (one no substrate runs
    yet) when their `type` is set to it; None when none does."""
    for e in _registry().values():
        if env_type in e.stands_in_for and e.env_types:
            return e.env_types[0]
    return None


def backends() -> list[str]:
    """Every backend name a foreign task format may give (`vm_backend`)."""
    return sorted({b for e in _registry().values() for b in e.backends})


def env_types() -> list[str]:
    """Every `[environment] type` some substrate runs."""
    return sorted({t for e in _registry().values() for t in e.env_types})


def folder_providers(module: str) -> dict[str, dict] | None:
    """The providers declared by the folder of `module` (a class's `__module__`: its
    `providers`, set as the class is made), None outside the substrate folders."""
    parts = module.split(".")
    if parts[:2] != ["harness", "substrates"] or len(parts) < 3:
        return None
    decl = FOLDERS / parts[2] / "substrate.toml"
    if not decl.exists():
        return None
    return {local: dict(pin) for local, pin in _declared_providers(decl)}


@functools.cache
def _declared_providers(decl: Path) -> tuple:
    return _providers(decl, tomllib.loads(decl.read_text()))


def provider_pins() -> dict[str, dict]:
    """Every substrate's Terraform provider declarations, by provider local name."""
    return {local: dict(pin) for e in _registry().values() for local, pin in e.providers}


def default_concurrency() -> dict[str, int]:
    return {name: cls.default_concurrency for name, cls in classes().items()}
