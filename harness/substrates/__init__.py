"""The substrate registry: name -> lazily imported class, and what the core asks of it.

A substrate is a folder `harness/substrates/<name>/` (see `base.Substrate`); this table is
the only place that lists them. Lookup errors list every valid name and, for optional
extras, the install command. The first entry is the default substrate (quickstart, scaffold,
`harness image build`).
"""

from __future__ import annotations

import importlib

from harness.errors import RegistryError
from harness.substrates.base import ExecResult, Node, Substrate, TrialSpec

_REGISTRY: dict[str, tuple[str, str, str]] = {
    "docker": ("harness.substrates.docker", "DockerSubstrate", ""),
    "vm": ("harness.substrates.libvirt", "LibvirtSubstrate", "pip install -e '.[vm]'"),
    "vm-cluster": ("harness.substrates.libvirt", "LibvirtClusterSubstrate",
                   "pip install -e '.[vm]'"),
}

__all__ = ["ExecResult", "Node", "Substrate", "TrialSpec", "classes", "default_name",
           "for_env_type", "get_substrate", "names", "provider_pins", "substrate_class"]


def names() -> list[str]:
    return sorted(_REGISTRY)


def default_name() -> str:
    return next(iter(_REGISTRY))


def substrate_class(name: str) -> type[Substrate]:
    """The class registered as `name`; an unknown name lists the valid ones."""
    if name not in _REGISTRY:
        raise RegistryError("substrate", name, names())
    module, cls, extra = _REGISTRY[name]
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        hint = f" (install with: {extra})" if extra else ""
        raise RegistryError("substrate", f"{name}: {exc}{hint}", names()) from exc
    return getattr(mod, cls)


def get_substrate(name: str, **kwargs) -> Substrate:
    """Instantiate a substrate by name; an unknown name lists the valid ones."""
    return substrate_class(name)(name=name, **kwargs)


def classes() -> dict[str, type[Substrate]]:
    """Every registered substrate that can be imported here, by name."""
    out = {}
    for name in _REGISTRY:
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


def env_types() -> list[str]:
    """Every `[environment] type` some substrate runs."""
    return sorted({t for cls in classes().values() for t in cls.env_types})


def provider_pins() -> dict[str, dict]:
    """Every substrate's Terraform provider declarations, by provider local name."""
    return {local: pin for cls in classes().values() for local, pin in cls.providers.items()}


def default_concurrency() -> dict[str, int]:
    return {name: cls.default_concurrency for name, cls in classes().items()}
