"""Node-side heal and ownership sweep without Ansible, for heal_all, decommission and gc.

`roles/fi_common/files/sweep.sh` runs every heal script recorded on the node
(`/var/lib/harness/faults/<id>/heal.sh`, newest first), then removes whatever the harness
owns by name; in `list` mode it only reports. `gc_faults` finds the live nodes of crashed
or killed trials (`Substrate.live_nodes`) and runs it there before their resources are
removed.
"""

from __future__ import annotations

import asyncio

from harness.paths import ROLES
from harness.substrates.base import Node

SWEEP_SH = ROLES / "fi_common" / "files" / "sweep.sh"


async def sweep_node(env, node: Node, mode: str = "heal") -> list[str]:
    """Run sweep.sh on one node; its report lines (a node that cannot be reached says so)."""
    try:
        res = await env.substrate.exec(node, f"set -- {mode}\n{SWEEP_SH.read_text()}", 300)
    except Exception as exc:  # node gone or powered off
        return [f"unreachable {type(exc).__name__}: {str(exc)[:200]}"]
    lines = [x.strip() for x in res.stdout.splitlines() if x.strip()]
    if not res.ok:
        lines.append(f"failed sweep exit {res.exit_code}: {res.stderr.strip()[-200:]}")
    return lines


async def sweep_nodes(env, mode: str = "heal") -> dict[str, list[str]]:
    """sweep.sh on every node of the environment, in parallel."""
    results = await asyncio.gather(*(sweep_node(env, n, mode) for n in env.nodes))
    return {n.name: lines for n, lines in zip(env.nodes, results, strict=True)}


class _Bare:
    """Just enough of a TrialEnvironment for sweep_node: a substrate and nodes."""

    def __init__(self, substrate, nodes):
        self.substrate, self.nodes = substrate, nodes


def gc_faults(substrate, campaign: str | None = None, trial: str | None = None,
              dry_run: bool = False, force: bool = False
              ) -> tuple[list[str], list[str], list[str]]:
    """(found, healed, unreachable) report lines for faults and owned artifacts on live nodes
    (of trials no other live harness process owns, unless `force`). A node that does not
    answer (powered off, its address gone) is listed as unreachable, not as a fault: its
    resources are removed or reset all the same."""
    found: list[str] = []
    healed: list[str] = []
    unreachable: list[str] = []
    for trial_id, nodes in substrate.live_nodes(campaign, trial, force).items():
        env = _Bare(substrate, nodes)
        listed = asyncio.run(sweep_nodes(env, "list"))
        for node, lines in listed.items():
            if lines and _unreachable(lines[-1]):
                unreachable.append(f"{trial_id}/{node}: {lines[-1]}")
                lines.clear()
            found += [f"{trial_id}/{node}: {x}" for x in lines]
        if dry_run or not any(listed.values()):
            continue
        env.nodes = [n for n in nodes if listed.get(n.name)]
        done = asyncio.run(sweep_nodes(env, "heal"))
        for node, lines in done.items():
            healed += [f"{trial_id}/{node}: {x}" for x in lines]
    return found, healed, unreachable


def _unreachable(line: str) -> bool:
    """A sweep line of a node that never ran the script (ssh's own failure is exit 255)."""
    return line.startswith(("unreachable ", "failed sweep exit 255:"))
