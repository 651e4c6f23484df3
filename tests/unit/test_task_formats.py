"""Harbor (`version = "1.0"`) and InfraBench (`schema_version = "1.1"`) task.toml files:
every published key parsed, honoured or refused with the file, the key and what is valid."""

from __future__ import annotations

import pytest

from harness import substrates
from harness.agents import get_agent
from harness.errors import TaskError
from harness.task import load_task
from harness.task.compat import NetworkPolicy, normalize, parse_size_mb, task_format
from harness.tools.ansible import prepare_skip_tags
from tests.unit.test_task import REPO, make

HARBOR = """\
version = "1.0"
[metadata]
author_name = "Test Author"
difficulty = "easy"
category = "sysadmin"
tags = ["compat"]
[agent]
timeout_sec = 120.0
[verifier]
timeout_sec = 60.0
[verifier.env]
EXPECTED = "hello"
[solution.env]
GREETING = "hello"
[environment]
build_timeout_sec = 300.0
cpus = 1
memory = "2G"
storage = "10G"
gpus = 0
"""

INFRABENCH = """\
schema_version = "1.1"
[task]
name = "ib-compat"
[metadata]
layer = "L3"
[environment]
type = "vm-cluster"
vm_backend = "libvirt"
base_image = "debian-12"
memory_mb = 1024
[[environment.nodes]]
name = "node0"
roles = ["primary"]
host = "ms1001.utah.cloudlab.us"
[[environment.nodes]]
name = "node1"
memory = "512M"
"""


def problems(tmp_path, toml: str, **kw) -> list[str]:
    with pytest.raises(TaskError) as info:
        load_task(make(tmp_path, toml, **kw))
    return info.value.problems


@pytest.mark.parametrize("text,mb", [("512M", 512), ("2G", 2048), ("2GB", 2048),
                                     ("1.5GiB", 1536), ("1T", 1048576), ("2048", 2048),
                                     (" 4g ", 4096), (768, 768)])
def test_size_strings(text, mb):
    assert parse_size_mb(text) == mb


@pytest.mark.parametrize("text", ["2Q", "lots", "-1G", "0.1K"])
def test_bad_size_strings_say_what_is_valid(text):
    with pytest.raises(ValueError, match="512M|less than 1 MB"):
        parse_size_mb(text)


def test_harbor_task_keys_are_honoured_not_kept(tmp_path):
    task = load_task(make(tmp_path, HARBOR))
    assert task.format == "harbor"
    assert (task.env.memory_mb, task.env.storage_mb, task.env.gpus) == (2048, 10240, 0)
    assert task.config.verifier.env == {"EXPECTED": "hello"}
    assert task.config.solution.env == {"GREETING": "hello"}
    assert not any("memory" in w or "storage" in w or "env" in w for w in task.warnings)
    # Harbor's default is allow_internet = true: egress in every phase (`public`)
    assert task.network_policy("agent").mode == "public" and task.needs_egress
    (tmp_path / "closed").mkdir()
    closed = load_task(make(tmp_path / "closed", HARBOR + "allow_internet = false\n"))
    assert closed.network_policy("verifier").mode == "no-network" and not closed.needs_egress


def test_network_modes_every_spelling_and_phase(tmp_path):
    toml = HARBOR + """allow_internet = true
[agent.network]
mode = "allowlist"
allowed_hosts = ["pypi.org", "10.9.8.7"]
[agent.setup_network]
mode = "public"
[verifier.network]
mode = "no-network"
"""
    task = load_task(make(tmp_path, toml))
    got = {phase: p.describe() for phase, p in task.network_policies.items()}
    assert got == {"environment": "public", "agent_setup": "public",
                   "agent": "allowlist(pypi.org, 10.9.8.7)", "verifier": "no-network"}
    assert task.needs_egress


def test_flat_harbor_network_keys(tmp_path):
    toml = HARBOR.replace("[agent]\n", '[agent]\nnetwork_mode = "allowlist"\n'
                          'allowed_hosts = ["example.org"]\n')
    toml = toml.replace("[verifier]\n", '[verifier]\nnetwork_mode = "public"\n')
    task = load_task(make(tmp_path, toml))
    assert task.network_policy("agent") == NetworkPolicy(mode="allowlist",
                                                         allowed_hosts=["example.org"])
    assert task.network_policy("verifier").mode == "public"
    assert task.network_policy("agent_setup").mode == "public"  # Harbor's default baseline


def test_allow_internet_false_and_a_subnet_string_still_mean_what_they_did(tmp_path):
    toml = HARBOR + 'allow_internet = false\nnetwork = "10.77.0.0/24"\n'
    task = load_task(make(tmp_path, toml))
    assert task.network == "10.77.0.0/24" and not task.needs_egress


@pytest.mark.parametrize("extra,key,valid", [
    ('gpu_types = ["a100"]\n', "environment.gpus", "valid: 0 or unset"),
    ('mcp_servers = [{name = "x", command = "y"}]\n', "environment.mcp_servers", "[] or unset"),
    ('memory_mb = 512\n', "environment.memory", "keep one"),
    ('[environment.network]\nmode = "open"\n', "environment.network.mode",
     "'no-network', 'public' or 'allowlist'"),
    ('[agent.network]\nmode = "allowlist"\nallowed_hosts = ["bad host!"]\n',
     "agent.network.allowed_hosts", "host name or IPv4"),
    ('[agent.network]\nmode = "public"\nproxy = "x"\n', "agent.network.proxy", "unknown key"),
])
def test_refusals_name_file_key_and_what_is_valid(tmp_path, extra, key, valid):
    toml = HARBOR.replace("gpus = 0", "gpus = 2") if "gpu_types" in extra else HARBOR
    found = problems(tmp_path, toml + extra)
    line = next((p for p in found if f": {key}" in p), None)
    assert line is not None, found
    assert line.startswith(str(tmp_path / "t" / "task.toml")) and valid in line


def test_infrabench_task_keys(tmp_path):
    task = load_task(make(tmp_path, INFRABENCH, dockerfile=False))
    assert task.format == "infrabench"
    assert task.primary.name == "node0"
    assert task.nodes[0].host == "ms1001.utah.cloudlab.us"
    assert task.nodes[1].memory_mb == 512
    assert not any("host" in w or "vm_backend" in w or "roles" in w for w in task.warnings)
    assert "cluster_ssh" not in prepare_skip_tags(task)


def test_infrabench_refusals(tmp_path):
    found = problems(tmp_path, INFRABENCH.replace('"libvirt"', '"xen"'), dockerfile=False)
    assert any("environment.vm_backend: got 'xen'" in p and "libvirt" in p for p in found)
    (tmp_path / "cloudlab").mkdir()  # InfraBench's CloudLab tasks run on the bare-metal pool
    cloudlab = INFRABENCH.replace('type = "vm-cluster"', 'type = "cloudlab"') \
        .replace('vm_backend = "libvirt"\n', "").replace('base_image = "debian-12"\n', "")
    task = load_task(make(tmp_path / "cloudlab", cloudlab, dockerfile=False))
    assert task.env.type == "cloudlab" and substrates.for_env_type("cloudlab") == "baremetal"


def test_egress_modes_refused_where_the_substrate_cannot_enforce_them(tmp_path, monkeypatch):
    from harness.substrates.libvirt import LibvirtClusterSubstrate

    toml = INFRABENCH.replace("[[environment.nodes]]", '[verifier]\nnetwork_mode = "public"\n'
                              "[[environment.nodes]]", 1)
    (tmp_path / "ok").mkdir()
    ok = load_task(make(tmp_path / "ok", toml, dockerfile=False))
    assert ok.network_policy("verifier").mode == "public"  # VMs enforce every mode
    monkeypatch.setattr(LibvirtClusterSubstrate, "network_modes", ("no-network",))
    (tmp_path / "refused").mkdir()
    found = problems(tmp_path / "refused", toml, dockerfile=False)
    assert any("verifier.network: network mode 'public' is not available on the "
               "'vm-cluster' type (it supports: no-network)" in p for p in found)


def test_native_tasks_keep_their_semantics(tmp_path):
    task = load_task(make(tmp_path, "[environment]\nmemory_mb = 256\n"))
    assert task.format == "harness" and "cluster_ssh" in prepare_skip_tags(task)
    # a bare-metal cluster's machines trust each other whatever the task's format
    bm = load_task(REPO / "tasks" / "baremetal-power-loss")
    assert bm.format != "infrabench" and "cluster_ssh" not in prepare_skip_tags(bm)
    assert task_format({"version": "1.0"}) == "harbor"
    assert normalize({"environment": {"memory": "1G"}})[0]["environment"] == {"memory_mb": 1024}


def test_oracle_without_solve_sh_is_refused_before_anything_runs(tmp_path):
    task = load_task(make(tmp_path, HARBOR))
    why = get_agent("oracle").check_task(task)
    assert why and "solution/solve.sh: missing" in why
    assert get_agent("nop").check_task(task) is None


def test_base_image_mapping_says_when_the_distribution_changes(tmp_path):
    from harness.config import Settings, distribution

    s = Settings()
    assert distribution("ubuntu-24.04") == "ubuntu" and distribution("python:3.12") == "debian"
    assert "ubuntu -> debian" in s.mapping_note("ubuntu:24.04")
    assert "ubuntu -> debian" in s.mapping_note("ubuntu-24.04")
    assert s.mapping_note("debian:bookworm") is None and s.mapping_note("python:3.11") is None
    assert s.mapping_note("my/own:image") is None  # not mapped: used as it is


def test_vm_base_image_maps_or_is_refused(tmp_path):
    task = load_task(make(tmp_path, INFRABENCH.replace('"debian-12"', '"ubuntu-24.04"'),
                          dockerfile=False))
    assert task.base_image == "ubuntu-24.04"
    (tmp_path / "x").mkdir()
    found = problems(tmp_path / "x", INFRABENCH.replace('"debian-12"', '"centos-7"'),
                     dockerfile=False)
    assert any("environment.base_image: 'centos-7' has no VM image here" in p
               and "image_overrides" in p for p in found)


def test_the_vm_mapping_warning_follows_the_settings_in_force(tmp_path):
    """The warning a VM trial records (`image_warnings`, into result.json's `warnings`)
    comes from the substrate's own settings: a campaign's image_overrides included."""
    from harness.config import LOCAL_BASE, Settings
    from harness.substrates import get_substrate

    task = load_task(make(tmp_path, INFRABENCH.replace('"debian-12"', '"ubuntu-24.04"'),
                          dockerfile=False))
    [note] = get_substrate("vm-cluster", settings=Settings()).image_warnings(task)
    assert "'ubuntu-24.04' runs as" in note and "ubuntu -> debian" in note
    mapped = Settings(image_overrides={"ubuntu-24.04": "ubuntu-24.04"})
    assert get_substrate("vm-cluster", settings=mapped).image_warnings(task) == []
    assert LOCAL_BASE in note


def test_a_failed_build_names_the_task_file_and_line(tmp_path):
    from harness.substrates.docker.image import failing_file

    root = make(tmp_path, HARBOR, files={"environment/setup.sh": "set -e\nfalse\n"})
    (root / "environment" / "Dockerfile").write_text("FROM debian:bookworm\nRUN exit 3\n")
    task = load_task(root)
    dockerfile = root / "environment" / "Dockerfile"
    log = ["Step 1/2 : FROM harness/debian:bookworm", "Step 2/2 : RUN exit 3", ""]
    assert failing_file(task, dockerfile, log) == f"{dockerfile}:2"
    log = ["Step 3/4 : RUN bash /tmp/harness-setup.sh && rm -f /tmp/harness-setup.sh",
           "/tmp/harness-setup.sh: line 2: oops: command not found"]
    assert failing_file(task, dockerfile, log) == f"{root}/environment/setup.sh:2"


def test_syscraft_helpers_tolerate_missing_arguments_under_set_u(tmp_path):
    import subprocess
    from pathlib import Path

    import jinja2

    role = Path(__file__).resolve().parents[2] / "roles" / "harness_node" / "templates"
    script = jinja2.Template((role / "cluster-info.sh.j2").read_text()).render(
        harness_node_info_dir=str(tmp_path))
    (tmp_path / "cluster-info.sh").write_text(script)
    (tmp_path / "cluster-info").write_text("node0=node0\nnode0_cluster_ip=10.0.0.10\n"
                                           "node1=node1\nnode1_bmc=10.0.0.1:16230\n")
    body = (f"set -euo pipefail; . {tmp_path}/cluster-info.sh; hostname() {{ echo node1; }}; "
            "echo \"[$(syscraft_discover_bmc_ip)][$(syscraft_remote_discover_bmc_ip)]"
            "[$(syscraft_node_host)][$(syscraft_node_bmc node0)][$(syscraft_node_host node0)]"
            "[$(harness_node_ip node0)][$(syscraft_node_host nosuch)]\"")
    out = subprocess.run(["bash", "-c", body], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[10.0.0.1][10.0.0.1][node1][][node0][10.0.0.10][]"

    # On a machine with a BMC device, this node's BMC is what it finds in-band; another
    # node's over SSH (cluster-info, found by name or by host, when it cannot be asked).
    lan_print = "IP Address Source       : Static Address\nIP Address              : 10.9.9.9\n"
    (tmp_path / "ipmi0").touch()
    body = (f"set -euo pipefail; export HARNESS_IPMI_DEVICE={tmp_path}/ipmi0; "
            f". {tmp_path}/cluster-info.sh; hostname() {{ echo node1; }}; "
            f"ipmitool() {{ printf '{lan_print}'; }}; "
            "ssh() { [ \"${*: -2:1}\" = root@node1 ] && printf 'IP Address : 10.8.8.8\\n'; }; "
            "echo \"[$(syscraft_discover_bmc_ip)][$(syscraft_discover_bmc_ip node1)]"
            "[$(syscraft_discover_bmc_ip node0)][$(syscraft_remote_discover_bmc_ip node1 '-p 22')]"
            "[$(syscraft_remote_discover_bmc_ip node1.lab)]"
            "[$(syscraft_remote_discover_bmc_ip x)]\"; "
            "syscraft_remote_discover_bmc_ip x; syscraft_discover_bmc_ip node0; "
            "ipmitool() { return 1; }; syscraft_discover_bmc_ip; echo end")
    out = subprocess.run(["bash", "-c", body], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[10.9.9.9][10.9.9.9][][10.8.8.8][10.0.0.1][]", "10.0.0.1",
                                  "end"]


def test_infrabench_bootstrap_runs_on_the_primary_only(tmp_path):
    from harness.paths import TrialPaths
    from harness.tools.ansible import task_extravars

    ib = load_task(make(tmp_path, INFRABENCH, dockerfile=False))
    paths = TrialPaths(tmp_path / "trial")
    assert task_extravars(ib, paths)["harness_bootstrap_primary_only"] is True
    (tmp_path / "h").mkdir()
    hb = load_task(make(tmp_path / "h", HARBOR))
    assert task_extravars(hb, paths)["harness_bootstrap_primary_only"] is False


def test_harbor_keys_this_harness_cannot_honour_are_refused(tmp_path):
    toml = HARBOR.replace("[agent]\n", '[agent]\nuser = "agent"\n')
    found = problems(tmp_path, toml + '[[steps]]\ninstruction = "x"\n')
    assert any(": agent.user: got 'agent'; commands run as root" in p for p in found)
    assert any(": steps: multi-step Harbor tasks" in p for p in found)
    (tmp_path / "ok").mkdir()
    task = load_task(make(tmp_path / "ok", HARBOR.replace("[agent]\n", '[agent]\nuser = "root"\n')))
    assert task.warnings == []


def test_harbor_compose_tasks_and_doubled_network_keys_are_refused(tmp_path):
    found = problems(tmp_path, HARBOR, files={"environment/docker-compose.yaml": "services: {}\n"})
    assert any("docker-compose.yaml: multi-container Harbor tasks" in p for p in found), found
    doubled = HARBOR + 'allow_internet = true\n[environment.network]\nmode = "no-network"\n'
    (tmp_path / "b").mkdir()
    found = problems(tmp_path / "b", doubled)
    assert any("environment.allow_internet: set beside [environment.network]" in p
               for p in found), found


def test_harbor_reads_docker_compose_yaml_only(tmp_path):
    """Harbor's docker environment looks for environment/docker-compose.yaml; a
    docker-compose.yml beside the Dockerfile is not read there (the Dockerfile is built):
    an info line, not a multi-container refusal. Other formats still refuse it."""
    task = load_task(make(tmp_path, HARBOR, files={"environment/docker-compose.yml":
                                                   "services: {}\n"}))
    assert task.format == "harbor" and task.dockerfile is not None
    [line] = task.info
    assert line.endswith("ignored, as Harbor ignores them: environment/docker-compose.yml "
                         "(Harbor reads environment/docker-compose.yaml only)")
    (tmp_path / "ib").mkdir()
    found = problems(tmp_path / "ib", INFRABENCH.replace('type = "vm-cluster"', 'type = "docker"')
                     .replace('vm_backend = "libvirt"\n', ""),
                     files={"environment/docker-compose.yml": "services: {}\n"})
    assert any("docker-compose.yml: multi-container Harbor tasks" in p for p in found), found


def test_format_detection_by_what_each_reader_reads(tmp_path):
    """Harbor's tasks write `version = "1.0"` or (now) `schema_version = "1.1"`, as
    InfraBench's do: the keys and files only the harness's or InfraBench's format has
    decide, then the version keys, then keys only Harbor's model reads."""
    root = make(tmp_path, HARBOR)
    assert task_format({"schema_version": "1.1", "environment": {"cpus": 1}}, root) == "harbor"
    assert task_format({"schema_version": "1.1", "environment": {"type": "docker"}}) \
        == "infrabench"
    assert task_format({"schema_version": "1.1", "metadata": {"layer": "L3"}}) == "infrabench"
    assert task_format({"version": "1.0", "environment": {"type": "docker"}}) == "harness"
    assert task_format({"version": "1.0", "gates": {}}) == "harness"
    assert task_format({"environment": {"build_timeout_sec": 60.0}}) == "harbor"
    assert task_format({"metadata": {"author_name": "a"}, "agent": {"timeout_sec": 60}}) \
        == "harbor"
    assert task_format({"environment": {"memory_mb": 256}}) == "harness"
    (root / "tests" / "score.py").write_text("")
    assert task_format({"version": "1.0"}, root) == "harness"
    (tmp_path / "s").mkdir()
    task = load_task(make(tmp_path / "s", HARBOR.replace('version = "1.0"',
                                                         'schema_version = "1.1"')))
    assert task.format == "harbor" and task.warnings == [] and task.info == []


def test_foreign_keys_are_honoured_described_ignored_or_refused(tmp_path):
    """Descriptive keys pass; a key Harbor's own model does not read is ignored as Harbor
    ignores it (one info line, with the key it may misspell); one Harbor reads that would
    change the task without the harness doing it is refused with the key and what is
    valid; InfraBench's unknown keys are refused (not kept, as in the harness's own
    format)."""
    ok = HARBOR.replace('version = "1.0"\n', 'version = "1.0"\nsource = "tb2"\nsplit = "test"\n'
                        '[task]\ndescription = "d"\nkeywords = ["k"]\nformat = "x"\n'
                        'workstream = "y"\n') \
        + 'os = "linux"\nworkdir = "/app"\n[environment.env]\n'
    (tmp_path / "ok").mkdir()
    ok = ok.replace("[metadata]\n", "[metadata]\nanything = 1\n")
    task = load_task(make(tmp_path / "ok", ok))
    assert task.warnings == [] and task.env_vars == {}
    [line] = task.info
    assert line.endswith("ignored, as Harbor ignores them: task.format, task.workstream, "
                         "environment.workdir")
    bad = HARBOR + 'os = "windows"\n[environment.env]\nTOKEN = "${HOST_TOKEN}"\n' \
        '[environment.healthcheck]\ncommand = "true"\n[verifier.environment]\ncpus = 2\n'
    (tmp_path / "bad").mkdir()
    found = problems(tmp_path / "bad", bad)
    assert any("environment.os: got 'windows'" in p and '"linux"' in p for p in found)
    assert any("environment.env.TOKEN: a ${VAR} template" in p and "literal" in p
               for p in found), found
    assert any("environment.healthcheck: a readiness check" in p for p in found)
    assert any("verifier.environment: a separate verifier sandbox" in p for p in found)
    (tmp_path / "env").mkdir()
    literal = load_task(make(tmp_path / "env", HARBOR + '[environment.env]\nMODE = "fast"\n'))
    assert literal.env_vars == {"MODE": "fast"} and literal.info == []
    (tmp_path / "ib").mkdir()
    found = problems(tmp_path / "ib", INFRABENCH.replace("[environment]\n", "[environment]\n"
                                                         "pool = \"x\"\n"), dockerfile=False)
    assert any("environment.pool: not a key this harness runs for infrabench tasks" in p
               for p in found), found
    (tmp_path / "ibenv").mkdir()
    found = problems(tmp_path / "ibenv", INFRABENCH + '[environment.env]\nX = "1"\n',
                     dockerfile=False)
    assert any("environment.env: environment variables of the sandbox" in p for p in found)


def test_agent_setup_timeout_is_honoured():
    import asyncio
    from types import SimpleNamespace

    from harness.trial.trial import Trial

    class SlowSetup:
        async def setup(self, env):
            await asyncio.sleep(30)

    task = load_task_config({"agent": {"setup_timeout_sec": 0.2}})
    trial = SimpleNamespace(task=SimpleNamespace(config=task), agent=SlowSetup(), env=None)
    with pytest.raises(TimeoutError, match=r"agent.setup_timeout_sec = 0.2 s"):
        asyncio.run(Trial._agent_setup(trial))


def load_task_config(raw: dict):
    from harness.task.model import TaskToml

    return TaskToml.model_validate(raw)


def test_vm_backend_is_kept_for_the_substrate_and_checked_per_type(tmp_path):
    from harness.substrates.libvirt import LibvirtClusterSubstrate

    (tmp_path / "qemu").mkdir()
    task = load_task(make(tmp_path / "qemu", INFRABENCH.replace('"libvirt"', '"QEMU"'),
                          dockerfile=False))
    assert task.env.vm_backend == "qemu"
    sub = LibvirtClusterSubstrate(domain_type="kvm")
    assert sub._task_domain_type(task) == "qemu" and sub.image_warnings(task) == []
    (tmp_path / "kvm").mkdir()
    kvm = load_task(make(tmp_path / "kvm", INFRABENCH.replace('"libvirt"', '"kvm"'),
                         dockerfile=False))
    tcg = LibvirtClusterSubstrate(domain_type="qemu")
    assert tcg._task_domain_type(kvm) == "qemu"
    assert any("vm_backend 'kvm'" in w and "TCG" in w for w in tcg.image_warnings(kvm))
    assert LibvirtClusterSubstrate(domain_type="kvm")._task_domain_type(kvm) == "kvm"
    (tmp_path / "docker").mkdir()
    found = problems(tmp_path / "docker", HARBOR + 'vm_backend = "qemu"\n')
    assert any("environment.vm_backend: 'qemu' is not a backend of the 'docker' type" in p
               for p in found)


def test_a_campaigns_image_overrides_rescue_an_unmapped_vm_base_image(tmp_path):
    from harness.campaign.model import CampaignFile, resolve_tasks
    from harness.campaign.plan import campaign_settings
    from harness.config import LOCAL_BASE

    toml = INFRABENCH.replace('"debian-12"', '"rocky-9"')
    root = make(tmp_path, toml, dockerfile=False)
    (tmp_path / "again").mkdir()
    assert any("environment.base_image: 'rocky-9' has no VM image" in p
               and "campaign file" in p for p in problems(tmp_path / "again", toml,
                                                          dockerfile=False))
    camp = CampaignFile.model_validate({
        "name": "c", "tasks": [str(root)], "agents": [{"name": "nop"}],
        "image_overrides": {"rocky-*": LOCAL_BASE}})
    [task] = resolve_tasks(camp, tmp_path, campaign_settings(camp))
    assert task.base_image == "rocky-9"


def test_an_allowlist_name_that_does_not_resolve_is_a_trial_warning():
    import asyncio
    from types import SimpleNamespace

    from harness.trial.trial import Trial

    class Sub:
        async def set_egress(self, trial_id, nodes, policy):
            return {"gone.invalid": [], "10.0.0.1": ["10.0.0.1"]}

    policy = NetworkPolicy(mode="allowlist", allowed_hosts=["gone.invalid", "10.0.0.1"])
    events = []
    trial = SimpleNamespace(
        task=SimpleNamespace(needs_egress=True, network_policy=lambda phase: policy),
        env=SimpleNamespace(nodes=["n"]), substrate=Sub(), trial_id="t", warnings=[],
        event=lambda name, **kw: events.append((name, kw)))
    asyncio.run(Trial._egress(trial, "agent"))
    assert events[0][0] == "network.egress" and events[0][1]["pinned"]["gone.invalid"] == []
    assert trial.warnings == ["agent: allowed host(s) gone.invalid did not resolve on this "
                              "host when the phase started; the nodes cannot reach them"]


def test_the_hosts_block_takes_the_nodes_names_off_the_machines_own_lines(tmp_path):
    """A pool machine playing node0 names its own address node1 (its pool name) and another
    machine node0, and getaddrinfo sorts its own address first: node1 reached the machine
    itself. The block comes first; the nodes' names leave the machine's lines, nothing else
    does; a second run changes nothing."""
    import shlex
    import subprocess
    from pathlib import Path

    import jinja2

    src = (Path(__file__).resolve().parents[2] / "roles" / "harness_node" /
           "templates" / "install-cluster-info.sh.j2").read_text()
    part = src[src.index("{% if harness_node_manage_hosts"):]
    part = part[:part.index("{% endif %}") + len("{% endif %}")]
    env = jinja2.Environment()
    env.filters.update(quote=shlex.quote, bool=bool)
    hosts = tmp_path / "hosts"
    script = env.from_string(src[:src.index("{% set dests")] + part).render(
        harness_node_manage_hosts=True, groups={"all": ["node0", "node1"]},
        inventory_hostname="node0",
        hostvars={"node0": {"harness_cluster_ip": "10.0.0.11"},
                  "node1": {"harness_cluster_ip": "10.0.0.12"}}).replace("/etc/hosts", str(hosts))
    hosts.write_text("127.0.0.1\tlocalhost\n10.0.0.10\tnode0\n10.0.0.11\tnode1 node1.lab\n"
                     "10.0.0.12\tnode2 # node1\n::1 ip6-localhost\n")
    runs = [subprocess.run(["bash", "-c", script], capture_output=True, text=True)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    assert hosts.read_text() == ("# BEGIN harness cluster nodes\n10.0.0.11 node0\n"
                                 "10.0.0.12 node1\n# END harness cluster nodes\n"
                                 "127.0.0.1\tlocalhost\n10.0.0.11 node1.lab\n"
                                 "10.0.0.12\tnode2 # node1\n::1 ip6-localhost\n")
    assert "changed" in runs[0].stdout and runs[1].stdout == ""
