"""Target selectors: which of a trial's nodes a fault hits, with seeded randomness.

A selector is a keyword (`one`, `minority`, `majority`, `all`, `bridge`), a list of node
names, a string of comma-separated names (`named:node1,node2` or `node1,node2`) or a
mapping (`{named: [node1]}`, `{one: {}}`). A selector that matches no node is refused:
the harness never picks another node than the one asked for.
"""

from __future__ import annotations

import random
from typing import Any

from harness.errors import InputError

KEYWORDS = ("one", "minority", "majority", "all", "bridge")
HELP = ("one, minority, majority, all, bridge (partition only), or node names "
        "(named:node1,node2)")


def parse(selector: Any) -> tuple[str, list[str]]:
    """(kind, names) of a selector in any accepted spelling."""
    if selector is None or selector == "" or selector == []:
        raise InputError(f"no targets given; use one of: {HELP}")
    if isinstance(selector, dict):
        if len(selector) != 1:
            raise InputError(f"a target selector mapping has one key; got {sorted(selector)}")
        kind, value = next(iter(selector.items()))
        if kind == "named":
            return "named", _names(value)
        if kind in KEYWORDS:
            return kind, []
        raise InputError(f"unknown target selector {kind!r}; use one of: {HELP}")
    if isinstance(selector, list | tuple):
        return "named", _names(list(selector))
    if isinstance(selector, str):
        text = selector.strip()
        if text in KEYWORDS:
            return text, []
        return "named", _names(text.removeprefix("named:"))
    raise InputError(f"cannot read target selector {selector!r}; use one of: {HELP}")


def _names(value: Any) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value or [])
    names = [str(n).strip() for n in items if str(n).strip()]
    if not names:
        raise InputError(f"the named selector lists no node; use one of: {HELP}")
    return names


def resolve(selector: Any, nodes: list[str], rng: random.Random,
            allow_bridge: bool = False) -> list[str]:
    """The node names a selector picks among `nodes` (in the trial's node order)."""
    kind, names = parse(selector)
    n = len(nodes)
    if kind == "named":
        unknown = [x for x in names if x not in nodes]
        if unknown:
            raise InputError(f"target selector names unknown node(s) {unknown}; this trial's "
                             f"nodes: {', '.join(nodes)}")
        return [x for x in nodes if x in names]
    if kind == "all":
        return list(nodes)
    if kind == "one":
        return [rng.choice(nodes)]
    if kind == "bridge":
        if not allow_bridge:
            raise InputError("the bridge selector only applies to the partition fault")
        if n < 3:
            raise InputError(f"a bridge partition needs at least 3 nodes; this trial has {n}")
        return [rng.choice(nodes)]
    size = (n - 1) // 2 if kind == "minority" else n // 2 + 1
    if size < 1:
        raise InputError(f"a {kind} of {n} node(s) is empty; selectors that fit: one, all, "
                         "named")
    chosen = set(rng.sample(nodes, size))
    return [x for x in nodes if x in chosen]


def partition_groups(kind: str, targets: list[str], nodes: list[str],
                     rng: random.Random) -> list[list[str]]:
    """The sides of a partition: nodes talk only to nodes sharing a group with them.

    `all` isolates every node; `bridge` splits the others in two halves that both still
    see the bridge node (`targets[0]`); any other selection is cut off from the rest.
    """
    if kind == "all":
        return [[x] for x in nodes]
    rest = [x for x in nodes if x not in targets]
    if kind == "bridge":
        shuffled = rng.sample(rest, len(rest))
        half = len(shuffled) // 2
        a, b = set(shuffled[:half]), set(shuffled[half:])
        bridge = targets[0]
        return [[bridge, *[x for x in nodes if x in a]], [bridge, *[x for x in nodes if x in b]]]
    if not rest:
        raise InputError("a partition needs nodes on both sides; to isolate every node use "
                         "the all selector")
    return [list(targets), rest]


def blocks(groups: list[list[str]], nodes: list[str]) -> dict[str, list[str]]:
    """Per node, the nodes it must stop talking to (those sharing no group with it)."""
    out = {}
    for x in nodes:
        mates = {y for g in groups if x in g for y in g}
        cut = [y for y in nodes if y not in mates]
        if cut:
            out[x] = cut
    return out
