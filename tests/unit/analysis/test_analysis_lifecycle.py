"""Lifecycle buckets: the paper's own assignment of every check name (appendix E)."""

from __future__ import annotations

import polars as pl
import pytest
from analysis_fixtures import check, make_record

from analysis.lifecycle import bucket, bucket_rates, rule_bucket
from analysis.load import from_dicts

NODES = ("node0", "node1", "node2")
FUNCTIONAL = [
    "6-way concurrent srun workload failed baseline",
    "6-way concurrent srun workload passes baseline",
    "Origin is still using the rebuilt host key, not the pre-incident stale key",
    "Registry approval JWKS does not match the active Origin issuer JWKS",
    "Registry namespace approval matches the active Origin issuer JWKS",
    "a dm-delay target is still in place under an array member",
    "all_nodes_un",
    "all_three_nodes_un",
    "client could not retrieve the object through the Pelican federation path",
    "client retrieved the object through the Pelican federation path",
    "could not read namespace approval state",
    "data_consistent",
    "ipmi_power_on",
    "namespace approval exists for /syscraft/public",
    "nic_restored",
    "no dm-delay target remains under any disk[0-3]",
    "no obvious plain HTTP/file-server bypass is listening on node2",
    "node1_removed_from_ring",
    "quorum_read_node0",
    "quorum_read_node2",
    "recent Cache logs do not show namespace key-mismatch failures",
    "recent Origin logs do not show namespace key-mismatch failures",
    "recently_rebooted",
    "repair_completed",
    "retrieved checksum does not match expected value",
    "retrieved object checksum matches expected hidden value",
    "retrieved object content differs from expected dataset",
    "retrieved object content matches expected dataset",
    "ssh_reachable",
]
DURABILITY = [
    "concurrent workload broke after compute reboot (drop-in came back)",
    "concurrent workload broke after puppet apply (manifest still enforces bad config)",
    "concurrent workload still passes after a forced puppet apply",
    "concurrent workload still passes after compute reboots",
    "dm-delay target reappeared after reboot - assemble script was not fixed",
    "no dm-delay target reappeared after reboot",
]
CLEANUP = [
    *[f"/etc/slurm still has *.dpkg-dist files on {n}" for n in NODES],
    *[f"MaxJobCount is sane on {n} ({v})" for n in NODES for v in ("10000", "unset")],
    *[f"MaxJobCount is still 2 on {n}" for n in NODES],
    "federation incident log has no remaining key-mismatch marker",
    *[f"slurmd maintenance cgroup drop-in is gone or harmless on {n}" for n in NODES[1:]],
    *[f"slurmd maintenance cgroup drop-in still starves the daemon on {n}" for n in NODES[1:]],
    "stale namespace key-mismatch incident marker is still present",
]
PAPER = ([(n, "functional") for n in FUNCTIONAL] + [(n, "durability") for n in DURABILITY]
         + [(n, "cleanup") for n in CLEANUP])


@pytest.mark.parametrize(("name", "expected"), PAPER)
def test_paper_assignment(name, expected):
    assert rule_bucket(name) == expected


def test_paper_list_is_complete():
    assert (len(FUNCTIONAL), len(DURABILITY), len(CLEANUP)) == (29, 6, 18)


@pytest.mark.parametrize(("name", "expected"), [
    ("fix survives restart", "durability"),
    ("etcd quorum holds across node reboot", "durability"),
    ("config is idempotent on re-apply", "durability"),
    ("no leftover lock files in /var/run", "cleanup"),
    ("sysctl drift reverted", "cleanup"),
    ("no residue of the fault injector", "cleanup"),
    ("/etc/nginx has no .rpmnew files", "cleanup"),
    ("service restarted", "functional"),
    ("web answers 200", "functional"),
])
def test_rule_generalises(name, expected):
    assert rule_bucket(name) == expected


def test_declared_phase_wins_over_the_rule():
    assert bucket("web answers 200", "Cleanup") == "cleanup"
    assert bucket("stale marker gone", "functional") == "functional"
    assert bucket("stale marker gone", "bogus") == "cleanup"
    assert bucket("stale marker gone", None) == "cleanup"


def test_bucket_rates_count_passed_over_total():
    checks = [check("web answers 200", True), check("web answers 404", False),
              check("fix survives restart", True), check("stale marker gone", False),
              check("diag", True, scored=False, phase="cleanup")]
    records = [(make_record("t", reward=0.5, checks=checks), "f"),
               (make_record("t", agent="b", reward=0.5, checks=checks[:2]), "g")]
    data = from_dicts(records)
    overall = {r["bucket"]: (r["passed"], r["total"], r["rate"])
               for r in bucket_rates(data.checks).iter_rows(named=True)}
    assert overall == {"functional": (2, 4, 50.0), "durability": (1, 1, 100.0),
                       "cleanup": (1, 2, 50.0)}
    per = bucket_rates(data.checks, ("config",))
    assert per.filter(pl.col("config") == "b")["bucket"].to_list() == ["functional"]
    assert bucket_rates(data.checks)["bucket"].to_list() == ["functional", "durability",
                                                             "cleanup"]
