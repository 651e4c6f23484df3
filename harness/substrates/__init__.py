"""The substrate registry: name -> lazily imported class, and what the core asks of it.

A substrate is a folder `harness/substrates/<folder>/` (see `base.Substrate`) with a
`substrate.toml` that names the substrates it provides:

    [substrates.vm]
    class = "LibvirtSubstrate"              # in the folder's __init__.py
    install = "pip install -e '.[vm]'"      # shown when the import fails (optional)
    default = true                          # the default substrate (exactly one folder)

    [commands]
    pool = "harness.substrates.baremetal.cli:app"   # a Typer app mounted as `harness pool`

The registry reads those files only; a substrate's module is imported when it is used.
Lookup errors list every valid name and, for optional extras, the install command.
"""

from __future__ import annotations

import functools
import importlib
import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness.errors import RegistryError
from harness.substrates.base import ExecResult, Node, Substrate, TrialSpec

FOLDERS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Entry:
    module: str
    cls: str
    install: str = ""
    default: bool = False


@functools.cache
def _registry() -> dict[str, Entry]:
    """Every `[substrates.<name>]` of every `harness/substrates/*/substrate.toml`."""
    out: dict[str, Entry] = {}
    for decl in sorted(FOLDERS.glob("*/substrate.toml")):
        table = tomllib.loads(decl.read_text()).get("substrates", {})
        for name, fields in table.items():
            out[name] = Entry(f"harness.substrates.{decl.parent.name}", fields["class"],
                              fields.get("install", ""), bool(fields.get("default")))
    return out


__all__ = ["ExecResult", "Node", "Substrate", "TrialSpec", "backends", "classes",
           "default_name", "for_env_type", "get_substrate", "names", "provider_pins",
           "stand_in", "substrate_class"]


def names() -> list[str]:
    return sorted(_registry())


def default_name() -> str:
    return next(name for name, entry in _registry().items() if entry.default)


@functools.cache
def commands() -> dict[str, str]:
    """CLI command groups the folders contribute (`[commands]`): name -> "module:attribute"
    of a Typer app."""
    out: dict[str, str] = {}
    for decl in sorted(FOLDERS.glob("*/substrate.toml")):
        out.update(tomllib.loads(decl.read_text()).get("commands", {}))
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
    return getattr(mod, entry.cls)


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
    for name, cls in classes().items():
        if env_type in cls.env_types:
            return name
    return env_type  # refused by get_substrate with the list of valid names


def stand_in(env_type: str) -> str | None:
    """The env type of a substrate that runs tasks of `env_type` (one no substrate runs
    yet) when their `type` is set to it; None when none does."""
    for cls in classes().values():
        if env_type in cls.stands_in_for and cls.env_types:
            return cls.env_types[0]
    return None


def backends() -> list[str]:
    """Every backend name a foreign task format may give (`vm_backend`)."""
    return sorted({b for cls in classes().values() for b in cls.backends})


def env_types() -> list[str]:
    """Every `[environment] type` some substrate runs."""
    return sorted({t for cls in classes().values() for t in cls.env_types})


def provider_pins() -> dict[str, dict]:
    """Every substrate's Terraform provider declarations, by provider local name."""
    return {local: pin for cls in classes().values() for local, pin in cls.providers.items()}


def default_concurrency() -> dict[str, int]:
    return {name: cls.default_concurrency for name, cls in classes().items()}
