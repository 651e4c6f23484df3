"""geni-lib profile scripts: the one the harness renders for a task, and running any of
them (as the portal does) into a request RSpec and its nodes.

A task's `[[environment.nodes]]` become a script with three parameters (`n`, `hwtype`,
`image`), one `RawPC` per node named like the task's node, and one LAN between them; the
experiment's `bindings` set the parameters. Scripts run in a child process
(`geni_portal`, geni-lib's `geni.rspec.pg`) with a time limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

from harness.errors import InputError

RSPEC_NS = "{http://www.geni.net/resources/rspec/3}"
DEFAULT_IMAGE = "urn:publicid:IDN+emulab.net+image+emulab-ops:UBUNTU22-64-STD"
DEFAULT_HWTYPE = "xl170"
RUN_TIMEOUT_SEC = 30.0

TEMPLATE = '''"""{description}"""
import geni.portal as portal
import geni.rspec.pg as pg

pc = portal.Context()
pc.defineParameter("n", "Number of nodes", portal.ParameterType.INTEGER, {count})
pc.defineParameter("hwtype", "Hardware type", portal.ParameterType.NODETYPE, {hwtype!r})
pc.defineParameter("image", "Disk image", portal.ParameterType.IMAGE, {image!r})
params = pc.bindParameters()
if params.n < 1 or params.n > {limit}:
    pc.reportError(portal.ParameterError("n must be 1..{limit}", ["n"]))
pc.verifyParameters()

NAMES = {names!r}
HWTYPES = {hwtypes!r}  # per node; "" = the hwtype parameter
IMAGES = {images!r}  # per node; "" = the image parameter
request = pc.makeRequestRSpec()
lan = request.LAN("lan") if params.n > 1 else None
for i in range(params.n):
    node = request.RawPC(NAMES[i] if i < len(NAMES) else "node%d" % i)
    node.hardware_type = (HWTYPES[i] if i < len(HWTYPES) else "") or params.hwtype
    node.disk_image = (IMAGES[i] if i < len(IMAGES) else "") or params.image
    if lan is not None:
        lan.addInterface(node.addInterface("if0"))
pc.printRequestRSpec(request)
'''


def render(names: list[str], hardware_type: str = "", image: str = "",
           description: str = "harness trial profile",
           per_node: dict[str, tuple[str, str]] | None = None) -> str:
    """The profile script for nodes `names` (in order); `per_node`: name -> (hardware type,
    image) where a node has its own (task.toml), else the `hwtype` / `image` parameters
    (defaults `hardware_type` / `image`)."""
    if not names:
        raise InputError("a profile needs at least one node")
    per_node = per_node or {}
    return TEMPLATE.format(description=description.replace('"', "'"), count=len(names),
                           hwtype=hardware_type or DEFAULT_HWTYPE, image=image or DEFAULT_IMAGE,
                           limit=max(len(names), 64), names=list(names),
                           hwtypes=[per_node.get(n, ("", ""))[0] or "" for n in names],
                           images=[per_node.get(n, ("", ""))[1] or "" for n in names])


def run(script: str, bindings: dict | None = None) -> dict:
    """{"rspec", "parameters", "nodes": [{client_id, hardware_type, disk_image}]} of a
    script bound with `bindings`; InputError with the script's own error otherwise."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "harness.substrates.cloudlab.geni_portal",
             json.dumps(bindings or {})], input=script, capture_output=True, text=True,
            timeout=RUN_TIMEOUT_SEC)
    except subprocess.TimeoutExpired as exc:
        raise InputError(f"profile script ran longer than {RUN_TIMEOUT_SEC:.0f}s") from exc
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise InputError(f"profile script failed: {tail}") from exc
    if "error" in out:
        raise InputError(f"profile script: {out['error']}")
    out["nodes"] = request_nodes(out["rspec"])
    return out


def request_nodes(rspec: str) -> list[dict]:
    """The nodes a request RSpec asks for, in order."""
    try:
        root = ET.fromstring(rspec)
    except ET.ParseError as exc:
        raise InputError(f"request RSpec is not XML: {exc}") from exc
    out = []
    for node in root.iter(f"{RSPEC_NS}node"):
        hw = node.find(f"{RSPEC_NS}hardware_type")
        image = node.find(f"{RSPEC_NS}sliver_type/{RSPEC_NS}disk_image")
        out.append({"client_id": node.get("client_id", ""),
                    "hardware_type": hw.get("name", "") if hw is not None else "",
                    "disk_image": image.get("name", "") if image is not None else ""})
    if not out:
        raise InputError("the profile's request RSpec asks for no node")
    return out


__all__ = ["DEFAULT_HWTYPE", "DEFAULT_IMAGE", "render", "request_nodes", "run"]
