"""Placement across hosts: the hosts file, per-host pools, spread, fairness, drain, refusal."""

from __future__ import annotations

import asyncio
import os
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.campaign import PlannedTrial
from harness.errors import ConfigError, InputError
from harness.placement import (
    AsyncPlacer,
    Demand,
    NoHostError,
    Placer,
    default_hosts,
    load_hosts,
    resolve_hosts,
)
from harness.substrates.docker.engine import docker_host

SSH = "ssh://hx@build-1"
VIRT = "qemu+ssh://hx@build-1/system"


def host(name: str, cpus: int = 4, memory_mb: int = 9216, docker: str | None = SSH,
         libvirt: str | None = VIRT, **extra) -> dict:
    cap = {"cpus": cpus, "memory_mb": memory_mb, **extra.pop("capacity", {})}
    out = {"name": name, "capacity": cap, **extra}
    if docker:
        out["docker"] = docker
    if libvirt:
        out["libvirt"] = libvirt
    return out


def trial(tid: str, task: str = "t", agent: str = "a", sub: str = "vm", cpus: int = 1,
          memory_mb: int = 1024, model: str | None = None) -> dict:
    return {"trial_id": tid, "task": task, "agent": agent, "model": model, "substrate": sub,
            "cpus": cpus, "memory_mb": memory_mb}


def placer(*hosts: dict, **kw) -> Placer:
    return Placer(load_hosts(list(hosts)), cpu_overcommit=1.0, **kw)


# -- the hosts file ------------------------------------------------------------------------

def test_hosts_file_loads(tmp_path):
    path = tmp_path / "hosts.yaml"
    path.write_text("""
hosts:
  - name: local
    docker: unix:///run/harness/docker.sock
    libvirt: qemu:///system
    capacity: {cpus: 8, memory_mb: 32768, max_trials: {docker: 6, vm: 2}}
    labels: {rack: 1, gpu: false}
  - name: far-2
    docker: {url: "tcp://far-2.lab:2376", tls: {ca: ~/ca.pem, cert: c.pem, key: k.pem}}
    capacity: {cpus: 64, memory_mb: 262144, cpu_overcommit: 2}
    enabled: false
""")
    hf = load_hosts(path)
    local, far = hf.hosts
    assert local.labels == {"rack": "1", "gpu": "false"}
    assert local.capacity.max_trials == {"docker": 6, "vm": 2}
    assert far.docker.tls.ca == os.path.expanduser("~/ca.pem") and not far.enabled
    assert far.runs("docker") and not far.runs("vm") and local.runs("vm-cluster")


@pytest.mark.parametrize("hosts, key, message", [
    ([host("a"), host("b"), host("a")], "hosts",
     "duplicate host name 'a' (hosts[0] and hosts[2])"),
    ([host("a", docker="http://build-1:2375")], "hosts[a].docker.url",
     "scheme 'http' not allowed in 'http://build-1:2375' (valid: unix://, ssh://, tcp://)"),
    ([host("a", libvirt="qemu+tcp://build-1/system")], "hosts[a].libvirt",
     "(valid: qemu://, qemu+ssh://, qemu+tls://)"),
    ([host("a", docker="ssh://hx:hunter2@build-1")], "hosts[a].docker.url",
     "credentials embedded in ssh://hx:***@...; use an SSH key or agent"),
    ([host("a", libvirt="qemu+ssh://hx:hunter2@build-1/system")], "hosts[a].libvirt",
     "credentials embedded in qemu+ssh://hx:***@..."),
    ([host("a", docker={"url": "tcp://u:hunter2@b:2376", "tls": {"ca": "a", "cert": "b",
                                                                 "key": "c"}})],
     "hosts[a].docker.url", "credentials embedded"),
    ([host("a", lables={"rack": "1"})], "hosts[a].lables",
     "unknown key (valid: name, docker, libvirt, capacity, labels, enabled)"),
    ([host("a", capacity={"max_trial": {"vm": 1}})], "hosts[a].capacity.max_trial",
     "unknown key (valid: cpus, memory_mb, max_trials, cpu_overcommit, memory_overcommit)"),
    ([host("a", capacity={"max_trials": {"dokcer": 1}})], "hosts[a].capacity.max_trials",
     "unknown substrate 'dokcer' (valid: baremetal, cloudlab, docker, vm, vm-cluster)"),
    ([host("a", docker="tcp://build-1:2375")], "hosts[a].docker",
     "tcp:// without tls gives anyone who reaches the port root on that host"),
    ([host("a", docker={"url": SSH, "tls": {"ca": "a", "cert": "b", "key": "c"}})],
     "hosts[a].docker", "tls applies to tcp:// endpoints only"),
    ([host("a", libvirt=None, capacity={"max_trials": {"vm": 2}})], "hosts[a]",
     "capacity.max_trials.vm needs a libvirt endpoint (or set it to 0)"),
    ([host("a", docker=None, libvirt=None)], "hosts[a]", "needs an engine"),
    ([host("Build_1")], "hosts[Build_1].name", "a DNS label"),
    ([host("a", libvirt="qemu+ssh://hx@b/system?command=sh")], "hosts[a].libvirt",
     "parameter 'command' not allowed (valid: keyfile, known_hosts"),
    ([host("a", libvirt="qemu:///var/x")], "hosts[a].libvirt", "/system or /session"),
    ([host("a", docker="unix://relative.sock")], "hosts[a].docker.url", "unix:///absolute"),
    ([host("a", docker="ssh://hx@b:99999")], "hosts[a].docker.url", "bad port"),
    ([host("a", cpus=0)], "hosts[a].capacity.cpus", "must be >= 1 (got 0)"),
    ([{"docker": SSH, "capacity": {"cpus": 1, "memory_mb": 4096}}], "hosts[0].name",
     "required key is missing"),
    ([], "hosts", "no hosts; list at least one"),
])
def test_hosts_file_errors_are_one_line(hosts, key, message):
    with pytest.raises(ConfigError) as err:
        load_hosts({"hosts": hosts}, file="hosts.yaml")
    text = str(err.value)
    assert text.startswith(f"hosts.yaml: {key}: "), text
    assert message in text and "\n" not in text and "hunter2" not in text


def test_hosts_file_unreadable(tmp_path):
    with pytest.raises(ConfigError, match="hosts file not found"):
        load_hosts(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("hosts: [\n")
    with pytest.raises(ConfigError, match="bad.yaml: invalid YAML"):
        load_hosts(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match=r"unknown key \(valid: hosts\)"):
        load_hosts({"host": []}, file="h.yaml")
    (tmp_path / "text.yaml").write_text("just text\n")
    with pytest.raises(ConfigError, match="text.yaml: expected a mapping"):
        load_hosts(tmp_path / "text.yaml")


def test_default_and_resolved_hosts(tmp_path, monkeypatch):
    (local,) = default_hosts().hosts
    assert (local.name, local.docker.url, local.libvirt) == ("local", docker_host(),
                                                              "qemu:///system")
    assert local.capacity.cpus == os.cpu_count()
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    assert resolve_hosts().hosts[0].name == "local"
    (tmp_path / "hosts.yaml").write_text("hosts:\n  - name: home-1\n    docker: ssh://h\n"
                                         "    capacity: {cpus: 2, memory_mb: 4096}\n")
    assert resolve_hosts().hosts[0].name == "home-1"
    assert resolve_hosts([host("camp-1")]).hosts[0].name == "camp-1"
    with pytest.raises(ConfigError, match=r"^c.yaml: hosts\[x\]\.docker\.url"):
        resolve_hosts([host("x", docker="ftp://x")], campaign_file="c.yaml")


# -- the placer ----------------------------------------------------------------------------

def test_pools_use_overcommit_and_reserve():
    p = Placer(load_hosts([host("a", cpus=4, memory_mb=9216),
                           host("b", capacity={"cpu_overcommit": 1.0,
                                               "memory_overcommit": 1.5})]))
    assert p.usage()["a"]["cpus"] == [0, 16] and p.usage()["a"]["memory_mb"] == [0, 8192]
    assert p.usage()["b"]["cpus"] == [0, 4] and p.usage()["b"]["memory_mb"] == [0, 12288]


def test_demand_from_planned_trial_and_plan_dict():
    pt = PlannedTrial(trial_id="x-1", task="t", task_path="/t", task_sha256="s", agent="a",
                      model="m", attempt=1, substrate="vm", fingerprint="f", cpus=2,
                      memory_mb=2048)
    d = Demand.of(pt)
    assert d == Demand.of(vars(pt)) and d.config == "a:m" and d.shape == ("vm", 2, 2048)


@settings(max_examples=200, deadline=None)
@given(caps=st.lists(st.tuples(st.integers(1, 8), st.integers(3, 12), st.integers(0, 3)),
                     min_size=1, max_size=4),
       ops=st.lists(st.tuples(st.sampled_from(["place", "submit", "release", "drain",
                                               "restore"]),
                              st.integers(0, 50), st.sampled_from(["docker", "vm"]),
                              st.integers(1, 6), st.integers(1, 6)), max_size=60))
def test_capacity_never_exceeded(caps, ops):
    """Random place/submit/release/drain/restore sequences: every host's own accounting,
    recomputed here from what was placed on it, stays within its capacity; no trial is
    left waiting while some host could hold it."""
    hosts = [host(f"h{i}", cpus=c, memory_mb=g * 1024,
                  capacity={"max_trials": {"vm": n}} if n else {})
             for i, (c, g, n) in enumerate(caps)]
    p = placer(*hosts, seed=3)
    trials: dict[str, dict] = {}
    held: dict[str, str] = {}
    drained: set[str] = set()
    for n, (op, k, sub, cpus, gib) in enumerate(ops):
        name = f"h{k % len(caps)}"
        t = trial(f"t{n}", task=f"x{k % 3}", agent=f"a{k % 3}", sub=sub, cpus=cpus,
                  memory_mb=gib * 1024)
        if op == "place":
            trials[t["trial_id"]] = t
            if (h := p.place(t)) is not None:
                held[t["trial_id"]] = h
        elif op == "submit":
            trials[t["trial_id"]] = t
            p.submit(t)
        elif op == "release" and held:
            tid = sorted(held)[k % len(held)]
            assert p.release(tid, held.pop(tid))
        elif op == "drain":
            gone = p.drain(name)
            assert sorted(gone) == sorted(tid for tid, h in held.items() if h == name)
            held = {tid: h for tid, h in held.items() if h != name}
            drained.add(name)
        elif op == "restore":
            p.restore(name)
            drained.discard(name)
        held.update(p.dispatch())
        for spec in hosts:
            mine = [trials[tid] for tid, h in held.items() if h == spec["name"]]
            cap = spec["capacity"]
            assert sum(x["cpus"] for x in mine) <= cap["cpus"]
            assert sum(x["memory_mb"] for x in mine) <= cap["memory_mb"] - 1024
            vm_cap = cap.get("max_trials", {}).get("vm")
            assert vm_cap is None or sum(x["substrate"] == "vm" for x in mine) <= vm_cap
            assert spec["name"] not in drained or not mine
        assert {tid: p.host_of(tid) for tid in held} == held
        for tid in p._waiting:  # work-conserving: nothing waits that some host could hold
            assert not any(pool.admits(Demand.of(trials[tid])) for pool in p._pools)


def test_attempts_spread_over_distinct_hosts():
    p = placer(host("big", cpus=32, memory_mb=65536), *(host(f"s{i}") for i in range(3)))
    got = [p.place(trial(f"x{k}", task="t1")) for k in range(4)]
    assert len(set(got)) == 4  # the big host would win on load alone
    more = [p.place(trial(f"y{k}", task="t1")) for k in range(4)]
    assert Counter(got + more) == Counter({"big": 2, "s0": 2, "s1": 2, "s2": 2})
    assert p.place(trial("z", task="t2")) == "big"  # another task: the least loaded host


def test_fair_across_configurations():
    p = placer(host("a", capacity={"max_trials": {"vm": 2}}))
    for k in range(40):
        p.submit(trial(f"a{k}", agent="early"))
    log = [t for t, _ in p.dispatch()]
    for k in range(6):
        p.submit(trial(f"b{k}", agent="late", model="m"))
    for n in range(12):
        p.release(log[n])
        log += [t for t, _ in p.dispatch()]
    order = "".join(t[0] for t in log)
    assert order == "aa" + "ab" * 6  # the late one alternates at once, and gets no burst


def test_large_first_not_blocking_and_not_starved():
    p = placer(host("a", cpus=8, memory_mb=9216))  # 8 vCPUs, 8192 MiB
    p.submit(trial("small", memory_mb=2048))
    p.submit(trial("large", memory_mb=4096))
    assert [t for t, _ in p.dispatch()] == ["large", "small"]  # first-fit decreasing
    p.submit(trial("big", memory_mb=8192))
    p.submit(trial("s1", memory_mb=2048))
    assert p.dispatch() == [("s1", "a")]  # big fits nowhere now: it does not block s1
    assert p.usage()["a"]["reserved_for"] == "big"  # ... and the host is kept for it
    p.release("small")
    p.submit(trial("s2", memory_mb=2048))
    assert p.dispatch() == []  # s2 would fit, but not beside big: it waits
    p.release("large")
    p.release("s1")
    assert p.dispatch() == [("big", "a")] and p.usage()["a"]["reserved_for"] == "s2"
    p.release("big")
    assert p.dispatch() == [("s2", "a")]


def test_narrow_substrate_first_and_reservations_bounded():
    p = placer(host("dock", cpus=8, memory_mb=9216, libvirt=None),
               *(host(f"v{i}", cpus=8, memory_mb=9216) for i in range(10)))
    p.submit(trial("ctr", sub="docker", memory_mb=1024))
    p.submit(trial("vm1", memory_mb=1024))
    assert [t for t, _ in p.dispatch()] == ["vm1", "ctr"]  # fewer hosts run VMs: first
    idle = sum(u["memory_mb"][0] == 0 for h, u in p.usage().items() if h != "dock")
    for k in range(12):  # one per configuration: more than the VM hosts can hold
        p.submit(trial(f"f{k}", agent=f"a{k}", memory_mb=8192))
    assert len(p.dispatch()) == idle and p.waiting == 12 - idle

    def reserved() -> dict[str, str]:
        return {h: u["reserved_for"] for h, u in p.usage().items() if u["reserved_for"]}

    assert len(reserved()) == p.max_reserved == 1  # a tenth of the hosts, at least one
    (held,) = reserved()
    p.drain(held)
    assert reserved() == {}
    p.dispatch()
    assert len(reserved()) == 1 and held not in reserved()


def test_drain_returns_running_and_blocks_new():
    p = placer(host("a"), host("b", libvirt=None))
    assert p.place(trial("v1")) == "a" and p.place(trial("d1", sub="docker")) in ("a", "b")
    ran = sorted(t for t in ("v1", "d1") if p.host_of(t) == "a")
    assert sorted(p.drain("a")) == ran and p.usage()["a"]["cpus"][0] == 0
    assert not p.release("v1", "a")
    assert p.place(trial("d2", sub="docker")) == "b"
    assert p.place(trial("v2")) is None
    p.submit(trial("v3"))
    assert p.dispatch() == [] and p.stranded() == ["v3"]
    assert p.refuse_reasons(trial("v3")) == [
        "a: drained (its engine became unreachable)", "b: no libvirt endpoint for substrate vm"]
    p.restore("a")
    assert p.dispatch() == [("v3", "a")] and p.stranded() == []


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("resubmit_first", [True, False])
def test_drained_trials_resubmitted_never_deadlock(seed, resubmit_first):
    """One slot per host; the host running a trial fails; the trial is submitted again while
    a later trial of its configuration holds a reservation: every trial still runs, on the
    healthy host, whether the resubmission or the next release comes first."""
    p = placer(host("a", capacity={"max_trials": {"docker": 1}}),
               host("b", capacity={"max_trials": {"docker": 1}}), seed=seed)
    todo = [trial(f"{c}-{i}", agent=c, sub="docker") for c in ("oracle", "nop")
            for i in range(3)]
    for t in todo:
        p.submit(t)
    running = dict(p.dispatch())
    victim = next(t for t, h in running.items() if h == "b")
    assert p.drain("b") == [victim]
    del running[victim]
    done: list[str] = []
    if resubmit_first:
        p.submit(next(t for t in todo if t["trial_id"] == victim))
    else:
        for t, _ in list(running.items()):
            p.release(t)
            done.append(running.pop(t))
        running.update(p.dispatch())
        p.submit(next(t for t in todo if t["trial_id"] == victim))
    for _ in range(10):
        running.update(p.dispatch())
        for t in list(running):
            assert running[t] == "a"
            p.release(t)
            done.append(t)
            del running[t]
    assert p.waiting == 0 and len(done) == 6


def test_stale_release_after_replacement_is_a_noop():
    p = placer(host("a"), host("b"))
    first = p.place(trial("x"))
    p.drain(first)
    again = p.place(trial("x"))
    assert again != first and not p.release("x", first) and p.host_of("x") == again


def test_refuse_a_trial_that_fits_no_host():
    p = placer(host("small", cpus=2, memory_mb=4096), host("docker-only", libvirt=None),
               host("off", enabled=False), host("no-vm", capacity={"max_trials": {"vm": 0}}))
    t = trial("huge", cpus=1, memory_mb=16384)
    assert p.refuse_reasons(t) == [
        "small: offers 3072 MiB and 2 vCPUs (after over-commit)",
        "docker-only: no libvirt endpoint for substrate vm", "off: disabled in the hosts file",
        "no-vm: capacity.max_trials.vm is 0"]
    with pytest.raises(InputError, match=r"^environment.memory_mb: trial huge needs 16384 MiB "
                       r"and 1 vCPUs on vm; no host can hold it: small: offers 3072 MiB.*"
                       r"\(\+1 more hosts\); lower memory_mb/cpus"):
        p.check([trial("ok"), t])
    assert p.refuse_reasons(trial("ok")) == [] and p.check([trial("ok")]) is None


def test_deterministic_for_a_seed():
    def run(seed: int) -> list:
        p = placer(*(host(f"h{i}") for i in range(8)), seed=seed)
        for k in range(30):
            p.submit(trial(f"t{k}", task=f"x{k % 4}", agent=f"a{k % 3}"))
        return p.dispatch()

    assert run(1) == run(1)
    assert any(run(1) != run(s) for s in range(2, 6))


def test_async_hold_waits_releases_and_fails_stranded():
    async def main():
        p = AsyncPlacer(load_hosts([host("a", capacity={"max_trials": {"vm": 1}}),
                                    host("b", libvirt=None)]))
        log = []

        async def run(tid: str):
            async with p.hold(trial(tid)) as h:
                log.append((tid, h))
                await asyncio.sleep(0.01)

        first = asyncio.create_task(run("one"))
        await asyncio.sleep(0)
        waiter = asyncio.create_task(run("cancelled"))
        second = asyncio.create_task(run("two"))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
        assert log == [("one", "a"), ("two", "a")] and p.waiting == 0
        holder = asyncio.create_task(run("three"))
        await asyncio.sleep(0)
        stuck = asyncio.create_task(run("four"))
        await asyncio.sleep(0)
        assert p.drain("a") == ["three"]
        with pytest.raises(NoHostError, match="no usable host left"):
            await stuck
        await holder
        assert p.usage()["a"]["trials"] == {}
        with pytest.raises(NoHostError, match="no host can hold it: a: drained"):
            await run("five")

    asyncio.run(main())
