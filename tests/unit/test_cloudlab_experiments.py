"""The harness's record of its CloudLab experiments: names, the quota ledger across
processes, gc's view of dead trials, and the extension of a running trial's experiment
(against the local portal over HTTP)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from harness.config import Settings
from harness.errors import ResourceBusy
from harness.substrates.cloudlab import CloudlabSubstrate, api, experiments, profile
from harness.substrates.cloudlab.machines import PoolMachines
from harness.substrates.cloudlab.portal import Portal
from harness.substrates.cloudlab.portal_http import serve

TOKEN = "quota-test-token"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "home"))


def reserve(name: str, trial: str, nodes: int = 2, max_experiments: int = 1,
            max_nodes: int = 0):
    return experiments.reserve(name, trial, "camp", "http://portal", "proj", nodes,
                               max_experiments, max_nodes, 60, f"/runs/{trial}", 2)


def test_names_are_derived_from_the_trial_and_short():
    a, b = experiments.experiment_name("t-1"), experiments.experiment_name("t-2")
    assert a != b and a == experiments.experiment_name("t-1")
    assert a.startswith("hx-") and len(a) == 15


def test_the_quota_holds_across_live_trials_and_names_the_holder():
    reserve("hx-a", "trial-a")
    assert reserve("hx-a", "trial-a")["trial"] == "trial-a"  # its own again: idempotent
    with pytest.raises(ResourceBusy, match=r"1 of 1 experiment\(s\).*hx-a \(trial trial-a\)"):
        reserve("hx-b", "trial-b")
    experiments.forget("hx-a")
    reserve("hx-b", "trial-b", nodes=3, max_experiments=5, max_nodes=4)
    with pytest.raises(ResourceBusy, match="3 of 4 node"):
        reserve("hx-c", "trial-c", nodes=2, max_experiments=5, max_nodes=4)


def test_a_dead_owners_record_is_stale_and_does_not_hold_the_quota():
    code = ("from harness.substrates.cloudlab import experiments as e; "
            "e.reserve('hx-dead', 'trial-dead', 'c', 'http://portal', 'proj', 1, 1, 0, 0, '/x', 1)")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert set(experiments.stale()) == {"hx-dead"}
    assert experiments.stale(campaign="other") == {}
    reserve("hx-live", "trial-live")  # the dead one's slot is free
    assert set(experiments.stale()) == {"hx-dead"}  # the live one is not stale


def test_a_running_trials_experiment_is_extended_before_it_expires(monkeypatch):
    portal = Portal(PoolMachines("hx-no-such-pool"), settle_sec=0.1, log=lambda line: None)
    server, _ = serve(portal, TOKEN)
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        client = api.Portal(url, TOKEN)
        client.call("POST", "/profiles", {"name": "p", "project": "proj",
                                          "script": profile.render(["node0"])})
        exp = client.call("POST", "/experiments", {
            "name": "hx-ext", "project": "proj", "profile_name": "p",
            "profile_project": "proj", "duration": 1})
        reserve("hx-ext", "trial-ext")
        monkeypatch.setattr(experiments, "EXTEND_MARGIN_SEC", 7200)  # always "too short"
        experiments.keep_alive("hx-ext", client, log=lambda line: None, every=0.2)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and \
                client.experiment(exp["id"])["expires_at"] == exp["expires_at"]:
            time.sleep(0.2)
        now = client.experiment(exp["id"])
        assert now["expires_at"] > exp["expires_at"]
        # the record follows the portal's expiry (which moves on: with this margin every
        # round extends again, so the record reaches or passes what was read here)
        deadline = time.monotonic() + 10
        while experiments.read()["hx-ext"]["expires"] < experiments.expires_at(
                now["expires_at"]):
            assert time.monotonic() < deadline, experiments.read()["hx-ext"]
            time.sleep(0.2)
        experiments.forget("hx-ext")  # the thread ends with the record
        client.terminate(exp["id"], wait_sec=20)
        with pytest.raises(api.NotFound):
            client.experiment(exp["id"])
        with pytest.raises(Exception, match="HTTP 401") as bad:
            api.Portal(url, "wrong-token").experiments("proj")
        assert "wrong-token" not in str(bad.value)
    finally:
        server.shutdown()
        portal.close()


def test_gc_terminates_the_experiment_of_a_killed_trial_and_spares_a_live_one(tmp_path,
                                                                              monkeypatch):
    """After kill -9 the record outlives its owner: `harness gc` (the substrate's sweep)
    terminates that experiment on the portal and drops the record; a live trial's
    experiment is left alone, and `--force` also finds prefixed ones no record knows."""
    monkeypatch.delenv("CLOUDLAB_TOKEN", raising=False)  # (the substrate exports it)
    portal = Portal(PoolMachines("hx-no-such-pool"), settle_sec=0.1, log=lambda line: None)
    server, _ = serve(portal, TOKEN)
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        client = api.Portal(url, TOKEN)
        client.call("POST", "/profiles", {"name": "p", "project": "proj",
                                          "script": profile.render(["node0"])})
        for name in ("hx-dead", "hx-live", "hx-orphan"):
            client.call("POST", "/experiments", {"name": name, "project": "proj",
                                                 "profile_name": "p", "profile_project": "proj"})
        code = ("from harness.substrates.cloudlab import experiments as e; "
                f"e.reserve('hx-dead', 'trial-dead', 'c', {url!r}, 'proj', 1, 5, 0, 0, '/x', 1)")
        subprocess.run([sys.executable, "-c", code], check=True)
        experiments.reserve("hx-live", "trial-live", "c", url, "proj", 1, 5, 0, 0, "/y", 1)
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN)
        sub = CloudlabSubstrate(settings=Settings(substrates={"cloudlab": {
            "portal_url": url, "project": "proj", "token_file": str(token_file)}}))
        assert sub.leftovers() == [f"experiment proj,hx-dead at {url} (trial trial-dead)"]
        assert sub.sweep() == ["experiment proj,hx-dead (trial trial-dead; terminated)"]
        assert set(experiments.read()) == {"hx-live"}
        names = {e["name"] for e in client.experiments("proj")}
        assert names == {"hx-live", "hx-orphan"}
        assert sub.leftovers(force=True) == [
            f"experiment proj,hx-live at {url} (trial trial-live)",
            f"experiment proj,hx-orphan at {url} (trial ?)"]
    finally:
        server.shutdown()
        portal.close()


def test_gc_drops_the_record_of_an_expired_experiment_whose_portal_is_gone(tmp_path,
                                                                          monkeypatch):
    """A dead trial's record whose portal no longer answers: kept (and said) while the
    experiment could still run there, dropped once its expiry has passed (the portal ended
    it on its own)."""
    monkeypatch.delenv("CLOUDLAB_TOKEN", raising=False)
    import socket
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    for name in ("hx-gone", "hx-soon"):
        code = ("from harness.substrates.cloudlab import experiments as e; "
                f"e.reserve({name!r}, 'trial-{name}', 'c', {url!r}, 'proj', 1, 5, 0, 0, '/x', 1)")
        subprocess.run([sys.executable, "-c", code], check=True)
    experiments.note_expiry("hx-gone", time.time() - 7300)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    sub = CloudlabSubstrate(settings=Settings(substrates={"cloudlab": {
        "portal_url": url, "project": "proj", "token_file": str(token_file)}}))
    swept = sub.sweep()
    assert len(swept) == 2 and "record dropped: expired" in swept[0], swept
    assert "hx-soon" in swept[1] and "terminate failed" in swept[1], swept
    assert set(experiments.read()) == {"hx-soon"}
