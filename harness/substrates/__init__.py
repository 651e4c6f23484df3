"""Substrate registry: name -> lazily imported class; errors list every valid name."""

from __future__ import annotations

import importlib

from harness.errors import RegistryError
from harness.substrates.base import ExecResult, Node, Substrate, TrialSpec

_REGISTRY: dict[str, tuple[str, str, str]] = {
    "docker": ("harness.substrates.docker", "DockerSubstrate", ""),
    "vm": ("harness.substrates.libvirt", "LibvirtSubstrate", "pip install -e '.[vm]'"),
    "vm-cluster": ("harness.substrates.libvirt", "LibvirtSubstrate", "pip install -e '.[vm]'"),
}

__all__ = ["ExecResult", "Node", "Substrate", "TrialSpec", "get_substrate", "names"]


def names() -> list[str]:
    return sorted(_REGISTRY)


def get_substrate(name: str, **kwargs) -> Substrate:
    """Instantiate a substrate by name; an unknown name lists the valid ones."""
    if name not in _REGISTRY:
        raise RegistryError("substrate", name, names())
    module, cls, extra = _REGISTRY[name]
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        hint = f" (install with: {extra})" if extra else ""
        raise RegistryError("substrate", f"{name}: {exc}{hint}", names()) from exc
    return getattr(mod, cls)(name=name, **kwargs)
