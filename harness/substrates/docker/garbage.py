"""What `harness gc`, teardown and resume find and remove on a Docker engine: every object
labelled with a trial id (containers, networks, volumes; images beyond one trial), the
subnet leases and firewall sets of trials, sparing what another live harness process runs
(`harness.owner`) unless forced."""

from __future__ import annotations

from typing import Any

from harness import owner
from harness.substrates import egress
from harness.substrates.base import Node
from harness.substrates.docker import network
from harness.substrates.docker.render import bridge_name

LABEL_TRIAL = "harness.trial"
LABEL_CAMPAIGN = "harness.campaign"


def container_name(c: dict) -> str:
    return ((c.get("Names") or [""])[0].lstrip("/")) or c["Id"][:12]


def _filters(campaign: str | None, trial: str | None) -> dict:
    if trial:
        return {"label": f"{LABEL_TRIAL}={trial}"}
    if campaign:
        return {"label": f"{LABEL_CAMPAIGN}={campaign}"}
    return {"label": LABEL_TRIAL}


def live_nodes(api: Any, campaign: str | None = None, trial: str | None = None,
               force: bool = False) -> dict[str, list[Node]]:
    """Running trial containers by trial id (the nodes `harness gc` heals faults on)."""
    out: dict[str, list[Node]] = {}
    for c in api.containers(filters=_filters(campaign, trial)):
        labels, name = c.get("Labels") or {}, container_name(c)
        if not force and owner.foreign_live(labels.get(owner.LABEL), labels.get(LABEL_TRIAL)):
            continue
        node = Node(name=labels.get("harness.node", name), host=name, cluster_ip="")
        out.setdefault(labels.get(LABEL_TRIAL, "?"), []).append(node)
    return out


def owned(api: Any, campaign: str | None, trial: str | None, force: bool = False
          ) -> list[tuple[str, str, str]]:
    """(kind, id, name) of every object with the labels, from Docker's list calls alone
    (the SDK's model lists inspect each container once more), but those of trials
    another live harness process owns (unless `force`). Images are looked for only
    beyond one trial: the harness labels none per trial."""
    f = _filters(campaign, trial)
    objs = [("container", c["Id"], container_name(c), c.get("Labels"))
            for c in api.containers(all=True, filters=f)]
    objs += [("network", n["Id"], n.get("Name") or n["Id"][:12], n.get("Labels"))
             for n in api.networks(filters=f)]
    objs += [("volume", v["Name"], v["Name"], v.get("Labels"))
             for v in (api.volumes(filters=f) or {}).get("Volumes") or []]
    if trial is None:
        objs += [("image", i["Id"], (i.get("RepoTags") or [i["Id"][7:19]])[0],
                  i.get("Labels")) for i in api.images(filters=f)]
    live = set() if force else {
        (labels or {}).get(LABEL_TRIAL) for *_, labels in objs
        if owner.foreign_live((labels or {}).get(owner.LABEL), (labels or {}).get(LABEL_TRIAL))}
    return [(kind, obj_id, name) for kind, obj_id, name, labels in objs
            if (labels or {}).get(LABEL_TRIAL) not in live or kind == "image"]


def sweep(api: Any, pool: str, campaign: str | None = None, trial: str | None = None,
          force: bool = False) -> list[str]:
    """Remove what `owned` finds; then the trial's subnet lease and firewall sets (kept
    while another live process runs it), or, beyond one trial, stale leases."""
    removed = []
    for kind, obj_id, name in owned(api, campaign, trial, force):
        try:
            if kind == "container":
                api.remove_container(obj_id, force=True, v=True)
            elif kind == "network":
                api.remove_network(obj_id)
            elif kind == "volume":
                api.remove_volume(obj_id)
            else:
                api.remove_image(obj_id, force=True)
            removed.append(f"docker {kind} {name}")
        except Exception as exc:  # already gone or in use: report, keep going
            removed.append(f"docker {kind} {name} (failed: {exc})")
    if trial:
        if force or not owner.run_elsewhere(trial):
            network.release_subnet(trial, pool)
            egress.clear(bridge_name(trial))
        return removed
    live = {(n.get("Labels") or {}).get(LABEL_TRIAL)
            for n in api.networks(filters={"label": LABEL_TRIAL})}
    for path in network.stale_reservations(live, pool):
        path.unlink(missing_ok=True)
    return removed
