"""Putting a bundle into a trial's node and checking that its entry runs there.

Three steps through the trial environment, none recorded in the trajectory: one exec that
removes an earlier bundle and reports the node's architecture, one `put_archive` of
`bundle.tar` at `/` (the substrate unpacks it; on a node where the substrate mounted the
agent's bundle store read-only, a symlink to the bundle's unpacked tree instead), one exec
of `<entry> <check>`. When the
entry does not run, one more exec reads what explains it (architecture, C library, Python)
and `BundleInstallError` says it in one line.
"""

from __future__ import annotations

import asyncio
import shlex

from harness.agents.bundles import NODE_ROOT, Bundle
from harness.agents.bundles.store import unpacked
from harness.agents.cli import AgentSetupError
from harness.errors import HarnessError

CHECK_TIMEOUT = 120
PROBE = (
    "uname -m; (ldd --version 2>&1 || true) | head -n 1; "
    "{ command -v python3 >/dev/null && python3 --version 2>&1; } || echo 'no python3'"
)


class BundleInstallError(AgentSetupError):
    """A bundle could not be put into a node, or its entry does not run there."""


def _line(text: str) -> str:
    lines = [x.strip() for x in (text or "").splitlines() if x.strip()]
    return lines[-1][:300] if lines else ""


async def _link_mounted(bundle: Bundle, env, target) -> bool:
    """When the substrate mounted the agent's bundle store into `target` (its extra
    `agent_store`), link NODE_ROOT to this bundle's unpacked tree there; False (nothing
    done) when there is no such mount or the tree is not seen in it."""
    store = target.extra.get("agent_store")
    if not store:
        return False
    tree = await asyncio.to_thread(unpacked, bundle)
    src = f"{store}/{bundle.root.name}/{tree.name}{NODE_ROOT}"
    res = await env.exec(f"test -d {shlex.quote(src)} && ln -sfn {shlex.quote(src)} "
                         f"{NODE_ROOT}", timeout=60, node=target, record=False)
    return res.ok


async def install(bundle: Bundle, env, node=None) -> None:
    """Put `bundle` into `node` (the primary by default) at /opt/hx-agent/bundle and run
    its entry's check; raise `BundleInstallError` saying why when it does not run."""
    target = node or env.primary
    what = f"{bundle.agent} {bundle.version} ({bundle.arch})"
    prep = await env.exec(
        f"rm -rf {NODE_ROOT} && mkdir -p /opt && uname -m", timeout=60, node=target, record=False
    )
    if not prep.ok:
        raise BundleInstallError(
            f"{what}: cannot prepare {NODE_ROOT} on node {target.name}: "
            f"{_line(prep.stderr) or f'exit {prep.exit_code}'}"
        )
    node_arch = _line(prep.stdout)
    if node_arch and node_arch != bundle.arch:
        raise BundleInstallError(
            f"{what}: node {target.name} is {node_arch}; prepare the "
            f"bundle for it (harness agent prepare {bundle.agent}@"
            f"{bundle.version} --arch {node_arch})"
        )
    if not await _link_mounted(bundle, env, target):
        try:  # the tar file itself: a substrate that can streams it from disk
            await env.substrate.put_archive(target, bundle.archive, "/")
        except HarnessError as exc:
            raise BundleInstallError(
                f"{what}: copying the bundle into node {target.name} failed: {exc.message}"
            ) from exc
    check = f"{shlex.quote(bundle.entry)} {bundle.manifest.get('check', '--version')}"
    res = await env.exec(f"{check} </dev/null", timeout=CHECK_TIMEOUT, node=target, record=False)
    if res.ok:
        return
    why = _line(res.stderr) or _line(res.stdout) or f"exit {res.exit_code}"
    if res.timed_out:
        why = f"no answer within {CHECK_TIMEOUT}s"
    probe = await env.exec(PROBE, timeout=30, node=target, record=False)
    facts = "; ".join(x.strip() for x in probe.stdout.splitlines() if x.strip())
    raise BundleInstallError(
        f"{what} does not run on node {target.name}: `{check}` "
        f"exited {res.exit_code}: {why} (node: {facts or 'unknown'}; "
        f"{_needs(bundle)})"
    )


def _needs(bundle: Bundle) -> str:
    """What the bundle needs of a node, for the error message."""
    m = bundle.manifest
    if m.get("python"):
        return f"the bundle needs python{m['python']}"
    if any(p["name"].startswith("node-linux-") for p in m.get("packages", [])):
        return "the bundled Node needs glibc >= 2.28"
    return "the bundle needs a Linux node of its architecture"
