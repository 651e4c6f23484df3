"""Agent registry: every concrete `Agent` subclass (with a `name`) defined in a module or
package under `harness/agents/`; adding an agent is adding one module. Errors list every
valid name. The modules are cheap to import (SDKs, if any, are imported where used)."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil

from harness.agents.base import Agent, AgentContext, AgentOutcome
from harness.agents.bundles.catalog import SPECS as BUNDLE_SPECS
from harness.errors import InputError, RegistryError


def _agents_in(module: str) -> dict[str, type[Agent]]:
    """The concrete agents `module` defines, by name."""
    return {cls.name: cls
            for _, cls in inspect.getmembers(importlib.import_module(module), inspect.isclass)
            if (issubclass(cls, Agent) and not inspect.isabstract(cls)
                and "name" in vars(cls) and cls.__module__ == module)}


@functools.cache
def _registry() -> dict[str, type[Agent]]:
    found: dict[str, type[Agent]] = {}
    for mod in pkgutil.iter_modules(__path__, f"{__name__}."):
        found.update(_agents_in(mod.name))
    return found


def _lookup(name: str) -> type[Agent] | None:
    """The agent `name`: from its own module when one is named after it (`oracle` in
    `oracle.py`: a trial imports no other agent's module), else from the registry."""
    own = name.replace("-", "_")
    if own.isidentifier() and any(m.name == own for m in pkgutil.iter_modules(__path__)):
        cls = _agents_in(f"{__name__}.{own}").get(name)
        if cls is not None:
            return cls
    return _registry().get(name)


__all__ = ["Agent", "AgentContext", "AgentOutcome", "get_agent", "names"]


def names() -> list[str]:
    return sorted(_registry())


def agent_class(name: str) -> type[Agent]:
    """The class of agent `name` (`NAME@VERSION` too); errors as get_agent's."""
    cls = _lookup(name.partition("@")[0])
    if cls is None:
        get_agent(name)  # raises: unsupported (with the reason) or unknown (valid names)
    return cls


def get_agent(name: str, model: str | None = None, **kwargs) -> Agent:
    """The agent `name` (`NAME@VERSION` pins a CLI agent's version: kwarg `version`)."""
    name, at, version = name.partition("@")
    if at:
        kwargs.setdefault("version", version)
    cls = _lookup(name)
    if cls is None and BUNDLE_SPECS.get(name) and BUNDLE_SPECS[name].reason:
        raise InputError(f"agent {name} is not supported: {BUNDLE_SPECS[name].reason}")
    if cls is None:
        raise RegistryError("agent", name, names())
    return cls(model=model, **kwargs)
