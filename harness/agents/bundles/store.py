"""The bundle store under `$HARNESS_HOME/agents/`: find, prepare, list and remove bundles.

`ensure` is idempotent: a bundle whose `manifest.json` exists is returned as it is,
without the network. Without a version it takes the agent's recorded default
(`<agent>/default.json`, written when `latest` was first prepared; `refresh=True` asks
the registry again). Builds of one bundle are serialized by an fcntl lock; a build runs in
a temp dir beside its final place, renamed into place when complete, removed on any error
or interrupt.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from harness.agents.bundles import NODE_ROOT, Bundle, BundleError, catalog, registry
from harness.agents.bundles.build import build
from harness.agents.bundles.registry import Log
from harness.paths import harness_home
from harness.results import now_iso, write_json_atomic


def agents_home() -> Path:
    return harness_home() / "agents"


def agent_dir(agent: str) -> Path:
    """Where `agent`'s bundles are (every version, architecture and Python)."""
    return agents_home() / agent


def unpacked(bundle: Bundle) -> Path:
    """`bundle`'s files unpacked beside its archive (`tree/`, holding opt/hx-agent/bundle/),
    made once under the bundle's lock: unpacked in a temp dir, made unwritable by group and
    others, renamed into place."""
    tree = bundle.root / "tree"
    if (tree / NODE_ROOT.lstrip("/")).is_dir():
        return tree
    with locked(f"{bundle.agent}-{bundle.root.name}"):
        if (tree / NODE_ROOT.lstrip("/")).is_dir():
            return tree
        for stale in bundle.root.glob(".tree-*"):  # a killed unpack's
            shutil.rmtree(stale, ignore_errors=True)
        stage = bundle.root / f".tree-{os.getpid()}"
        stage.mkdir()
        try:
            for cmd in (["tar", "-xf", str(bundle.archive), "-C", str(stage),
                         "--no-same-owner", "--no-same-permissions"],
                        ["chmod", "-R", "go-w", str(stage)]):
                res = subprocess.run(cmd, capture_output=True, text=True)
                if res.returncode != 0:
                    raise BundleError(f"unpacking {bundle.archive} failed: "
                                      f"{(res.stderr.strip().splitlines() or ['?'])[-1]}")
            shutil.rmtree(tree, ignore_errors=True)  # a tree without its files
            stage.rename(tree)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return tree


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """Hold the exclusive fcntl lock `$HARNESS_HOME/agents/.<name>.lock`."""
    home = agents_home()
    home.mkdir(parents=True, exist_ok=True)
    with (home / f".{name}.lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def load(path: Path) -> Bundle | None:
    """The bundle in `path`, or None when there is none (no manifest: not complete)."""
    try:
        m = json.loads((path / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return Bundle(
        agent=m["agent"],
        version=m["version"],
        arch=m["arch"],
        root=path,
        archive=path / "bundle.tar",
        entry=m["entry"],
        manifest=m,
    )


def current(path: Path, spec: catalog.Spec) -> Bundle | None:
    """The bundle in `path` if it was made by today's recipe of `spec`, else None."""
    found = load(path)
    return found if found and found.manifest.get("recipe") == catalog.recipe(spec) else None


def default_version(agent: str) -> str | None:
    try:
        return json.loads((agents_home() / agent / "default.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def ensure(
    agent: str,
    version: str | None = None,
    arch: str = "x86_64",
    python: str | None = None,
    refresh: bool = False,
    log: Log | None = registry.stderr_log,
) -> Bundle:
    """The bundle of `agent` at `version` (None: the recorded default, else `latest`) for
    the node architecture `arch` and, for PyPI agents, the node's `python` ("3.11");
    prepared first when missing. Progress lines go to `log`."""
    spec = catalog.spec(agent)
    node_arch = catalog.arch(arch)
    pytag = catalog.python_tag(spec, python)
    if version is None and not refresh:
        version = default_version(agent)
    if version is not None:
        found = current(agents_home() / agent / catalog.bundle_key(version, node_arch.name,
                                                                    pytag), spec)
        if found is not None:
            return found
    doc = (
        registry.pypi_document(spec.package)
        if spec.source == "pypi"
        else registry.npm_document(spec.package)
    )
    record_default = version is None
    version = registry.resolve(agent, spec.package, doc, version)
    key = catalog.bundle_key(version, node_arch.name, pytag)
    final = agents_home() / agent / key
    with locked(f"{agent}-{key}"):
        bundle = current(final, spec) or _build(spec, version, doc, node_arch, pytag, final,
                                                log)
        if record_default:
            write_json_atomic(
                final.parent / "default.json", {"version": version, "recorded": now_iso()}
            )
    return bundle


def _build(
    spec: catalog.Spec,
    version: str,
    doc: dict,
    arch: catalog.Arch,
    pytag: str | None,
    final: Path,
    log: Log | None,
) -> Bundle:
    """Build into a temp dir beside `final` and rename it into place (called locked)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(f".tmp-{final.name}-*"):  # a killed build's
        shutil.rmtree(stale, ignore_errors=True)
    stage = final.parent / f".tmp-{final.name}-{os.getpid()}"
    stage.mkdir()
    started = time.monotonic()
    try:
        if log:
            log(
                f"preparing {spec.name} {version} for {arch.name}"
                + (f" ({pytag})" if pytag else "")
            )
        fields = build(spec, version, doc, arch, pytag, stage, log)
        manifest = {
            "recipe": catalog.recipe(spec),
            "agent": spec.name,
            "version": version,
            "arch": arch.name,
            "python": f"3.{pytag[3:]}" if pytag else None,
            "source": spec.source,
            **fields,
            "size": (stage / "bundle.tar").stat().st_size,
            "created": now_iso(),
        }
        write_json_atomic(stage / "manifest.json", manifest)
        if final.exists():  # a manifest-less leftover, or a bundle of an older recipe
            shutil.rmtree(final)
        stage.rename(final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if log:
        log(
            f"prepared {final} ({manifest['size'] / 1e6:.0f} MB, {time.monotonic() - started:.0f}s)"
        )
    return load(final)


def listing() -> list[dict]:
    """Every prepared bundle: agent, version, arch, python, size, created, path, entry,
    default (whether it is its agent's recorded default)."""
    home, out = agents_home(), []
    for manifest in sorted(home.glob("*/*/manifest.json")) if home.is_dir() else []:
        bundle = load(manifest.parent)
        if bundle is None or manifest.parent.name.startswith("."):
            continue
        m = bundle.manifest
        out.append(
            {
                "agent": bundle.agent,
                "version": bundle.version,
                "arch": bundle.arch,
                "python": m.get("python"),
                "size": m.get("size"),
                "created": m.get("created"),
                "path": str(bundle.root),
                "entry": bundle.entry,
                "default": default_version(bundle.agent) == bundle.version,
            }
        )
    return out


def remove(agent: str, version: str | None = None) -> list[Path]:
    """Remove the agent's bundles (of `version` only, when given); return what went. The
    recorded default goes with its version's last bundle."""
    if agent not in catalog.SPECS:
        catalog.spec(agent)
    removed = []
    for item in listing():
        if item["agent"] != agent or version not in (None, item["version"]):
            continue
        path = Path(item["path"])
        with locked(f"{agent}-{path.name}"):
            shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    default = default_version(agent)
    if default and not any(i["agent"] == agent and i["version"] == default for i in listing()):
        (agents_home() / agent / "default.json").unlink(missing_ok=True)
    return removed
