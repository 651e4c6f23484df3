"""The egress helper's pure parts: resolution and the /etc/hosts pin script."""

from __future__ import annotations

import subprocess

from harness.substrates import egress, firewall


def test_resolve_literals_names_and_failures():
    got = egress.resolve(["10.1.2.3", "localhost", "no-such-host.invalid"])
    assert got["10.1.2.3"] == ["10.1.2.3"]
    assert "127.0.0.1" in got["localhost"]
    assert got["no-such-host.invalid"] == []


def test_hosts_script_replaces_only_its_own_lines(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n10.0.0.9 old.example # harness egress allowlist\n")
    script = egress.hosts_script({"pypi.org": ["10.2.3.4"], "10.9.9.9": ["10.9.9.9"],
                                  "gone.invalid": []}).replace("/etc/hosts", str(hosts))
    subprocess.run(["bash", "-c", script], check=True)
    assert hosts.read_text() == ("127.0.0.1 localhost\n"
                                 "10.2.3.4 pypi.org # harness egress allowlist\n")


def test_the_ruleset_starts_every_trial_without_egress():
    rules = firewall.RULESET
    for name in ("uplinks", "egress_public", "egress_allow"):
        assert f"set {name} {{ type" in rules and "elements" not in rules
    out = rules.split("chain out_of_trial")[1].split("}")[0]
    assert out.index('oifname "hx*" counter drop') < out.index("@egress_public")
    assert "169.254.0.0/16 counter drop" in out


def test_the_host_answers_dns_only_for_a_bridge_with_public_egress():
    chain = firewall.RULESET.split("chain from_trial")[1].split("}\n")[0]
    dns = "iifname @egress_public meta l4proto { tcp, udp } th dport 53 accept"
    assert dns in chain  # on the bridge's own address only: after the drop of any other
    assert chain.index("fib daddr . iif type != local counter drop") < chain.index(dns)
    assert chain.count("dport 53") == 1


def test_uplinks_union_the_machine_setting_and_the_substrates_own():
    from harness.config import Settings

    settings = Settings(egress_uplinks=["eth9", "tvo1"])
    assert egress.uplinks(settings, ["tvo1", "eth7"]) == ["eth9", "tvo1", "eth7"]
