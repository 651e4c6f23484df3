"""The local CloudLab portal's API surface, over HTTP: auth, errors, profiles (real geni-lib
scripts), the experiment lifecycle up to `failed` (its pool does not exist: the portal's
own failure path, no machine needed), 429, and every response against the documented
fields. The path to `ready` on real machines is tests/integration/test_cloudlab_portal.py."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from harness.substrates.cloudlab import profile
from harness.substrates.cloudlab.machines import PoolMachines
from harness.substrates.cloudlab.portal import Portal
from harness.substrates.cloudlab.portal_http import serve
from harness.substrates.cloudlab.portal_model import DOCUMENTED
from harness.task import load_task

TOKEN = "s3cret-portal-token-for-tests"
SHAPES = {"Experiment": ("id",), "Profile": ("id", "name", "project"), "Error": ("error",),
          "Version": ("major", "minor", "patch", "version"), "AggregateNode": ("client_id",)}


def check_shape(kind: str, body: dict) -> None:
    """Only documented fields, the required ones present; nested shapes too."""
    assert set(body) <= DOCUMENTED[kind], (kind, set(body) - DOCUMENTED[kind])
    assert all(k in body for k in SHAPES.get(kind, ())), (kind, body)
    if kind == "Experiment":
        for agg in body["aggregates"].values():
            assert set(agg) <= DOCUMENTED["AggregateStatus"]
            for node in agg["nodes"]:
                check_shape("AggregateNode", node)
                assert all(isinstance(v, str) for v in node.values())
    if kind == "Profile":
        for version in body["profile_versions"].values():
            assert set(version) <= DOCUMENTED["ProfileVersion"]


@pytest.fixture
def portal():
    lines: list[str] = []
    p = Portal(PoolMachines("hx-no-such-pool"), settle_sec=0.2, max_pending=2,
               log=lines.append)
    server, _ = serve(p, TOKEN)
    p.base_url = f"http://127.0.0.1:{server.server_port}"
    yield p, lines
    server.shutdown()
    p.close()
    assert not any(TOKEN in line for line in lines)


def call(p: Portal, method: str, path: str, body: dict | None = None,
         token: str | None = TOKEN) -> tuple[int, dict | None, dict]:
    req = urllib.request.Request(p.base_url + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    if token:
        req.add_header("X-Api-Token", token)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw, status, headers = resp.read(), resp.status, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        raw, status, headers = exc.read(), exc.code, dict(exc.headers)
    data = json.loads(raw) if raw else None
    if status >= 400:
        check_shape("Error", data)
        assert data["code"] == status
    return status, data, headers


def make_profile(p: Portal, name: str = "hx-prof") -> dict:
    status, body, _ = call(p, "POST", "/profiles", {
        "name": name, "project": "hx", "script": profile.render(["node0", "node1"])})
    assert status == 201, body
    check_shape("Profile", body)
    return body


def test_every_call_needs_the_token(portal):
    p, _ = portal
    for token in (None, "wrong"):
        status, body, _ = call(p, "GET", "/experiments", token=token)
        assert status == 401 and "X-Api-Token" in body["error"]
    status, body, _ = call(p, "GET", "/version")
    assert status == 200
    check_shape("Version", body)
    status, body, _ = call(p, "GET", "/tokens/this")
    assert status == 200 and set(body) <= DOCUMENTED["Token"] and TOKEN not in json.dumps(body)


def test_profiles_run_their_geni_lib_script(portal):
    p, _ = portal
    prof = make_profile(p)
    rspec = prof["profile_versions"]["1"]["rspec"]
    assert [n["client_id"] for n in profile.request_nodes(rspec)] == ["node0", "node1"]
    status, again, _ = call(p, "GET", "/profiles/hx,hx-prof")
    assert status == 200 and again["id"] == prof["id"]
    assert call(p, "GET", "/profiles?project=hx")[1]["profiles"][0]["id"] == prof["id"]
    status, body, _ = call(p, "POST", "/profiles", {"name": "hx-prof", "project": "hx",
                                                    "script": "x"})
    assert status == 400 and "already exists" in body["error"]
    status, body, _ = call(p, "POST", "/profiles", {"name": "bad", "project": "hx",
                                                    "script": "import nothing_here\n"})
    assert status == 400 and "No module named 'nothing_here'" in body["error"]
    status, body, _ = call(p, "PATCH", f"/profiles/{prof['id']}",
                           {"script": profile.render(["a", "b", "c"])})
    assert status == 200 and body["version"] == 2
    assert call(p, "DELETE", "/profiles/hx,hx-prof")[0] == 204
    assert call(p, "GET", "/profiles/hx,hx-prof")[0] == 404
    assert call(p, "GET", "/profiles/bad%21id")[0] == 400


def test_experiment_errors_name_what_is_wrong(portal):
    p, _ = portal
    make_profile(p)
    status, body, _ = call(p, "POST", "/experiments", {"name": "e1", "project": "hx"})
    assert status == 400 and "profile_name, profile_project" in body["error"]
    status, body, _ = call(p, "POST", "/experiments", {
        "name": "e1", "project": "hx", "profile_name": "nope", "profile_project": "hx"})
    assert status == 404 and "no such profile hx,nope" in body["error"]
    status, body, _ = call(p, "POST", "/experiments", {
        "name": "e1", "project": "hx", "profile_name": "hx-prof", "profile_project": "hx",
        "bindings": {"n": "0"}})
    assert status == 400 and "n must be 1..64" in body["error"]
    assert call(p, "GET", "/experiments/hx,e1")[0] == 404
    assert call(p, "POST", "/experiments/hx,e1/node/node0/explode")[0] == 404
    assert call(p, "PATCH", "/version")[0] == 405


def test_an_experiment_goes_created_then_failed_without_machines_and_delete_is_async(portal):
    p, lines = portal
    make_profile(p)
    body = {"name": "e2", "project": "hx", "profile_name": "hx-prof", "profile_project": "hx",
            "bindings": {"n": 1}, "duration": 2, "sshpubkey": "ssh-ed25519 AAAA test"}
    status, exp, _ = call(p, "POST", "/experiments", body)
    assert status == 201 and exp["status"] == "created"
    check_shape("Experiment", exp)
    seen = set()
    for _ in range(100):
        status, exp, _ = call(p, "GET", f"/experiments/{exp['id']}")
        seen.add(exp["status"])
        if exp["status"] == "failed":
            break
        time.sleep(0.05)
    assert exp["status"] == "failed" and "created" in seen
    assert any("hx-no-such-pool" in line for line in lines)  # why, in the portal's log
    assert call(p, "POST", "/experiments", body)[1]["error"].endswith("already exists")
    status, ext, _ = call(p, "PUT", "/experiments/hx,e2", {"extend_by": 3})
    assert status == 200 and ext["expires_at"] > exp["expires_at"]
    assert call(p, "POST", "/experiments/hx,e2/node/node0/reboot")[0] == 404
    status, body, _ = call(p, "DELETE", "/experiments/hx,e2")
    assert status == 204 and body is None
    for _ in range(100):
        if call(p, "GET", "/experiments/hx,e2")[0] == 404:
            break
        time.sleep(0.05)
    assert call(p, "GET", "/experiments/hx,e2")[0] == 404
    assert call(p, "GET", "/experiments")[1] == {"experiments": []}


def test_a_busy_portal_answers_429_with_retry_after(portal):
    p, _ = portal
    make_profile(p)
    p.max_pending = 0
    status, body, headers = call(p, "POST", "/experiments", {
        "name": "e3", "project": "hx", "profile_name": "hx-prof", "profile_project": "hx"})
    assert status == 429 and "try again later" in body["error"]
    assert int(headers["Retry-After"]) >= 1


def test_a_profile_gives_each_node_its_own_hardware_type_and_image(tmp_path):
    """task.toml's `[[environment.nodes]]` `hardware_type` / `image` (a CloudLab or
    bare-metal task may set them) reach the rendered profile's request RSpec; nodes
    without them get the profile's parameters."""
    root = tmp_path / "task"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test.sh").write_text("#!/bin/bash\n")
    (root / "instruction.md").write_text("Do it.\n")
    (root / "task.toml").write_text(
        'version = "1.0"\n[task]\nname = "hw"\n[environment]\ntype = "cloudlab"\n'
        '[[environment.nodes]]\nname = "node0"\nhardware_type = "d430"\n'
        'image = "urn:publicid:IDN+emulab.net+image+emulab-ops:UBUNTU20-64-STD"\n'
        '[[environment.nodes]]\nname = "node1"\n')
    task = load_task(root)
    script = profile.render([n.name for n in task.nodes], "c6525-25g", "", "t", {
        n.name: (n.hardware_type or "", n.image or "") for n in task.nodes})
    nodes = profile.run(script, {"n": "2"})["nodes"]
    assert [(n["client_id"], n["hardware_type"], n["disk_image"]) for n in nodes] == [
        ("node0", "d430", "urn:publicid:IDN+emulab.net+image+emulab-ops:UBUNTU20-64-STD"),
        ("node1", "c6525-25g", profile.DEFAULT_IMAGE)]
