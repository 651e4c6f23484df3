"""The gateway's configuration (config.yaml `models:`, budgets), its life in a trial
(listen, firewall, variables, revoke, close) and the record it leaves (usage,
`budget_exceeded`, the leaderboard's `over_budget`)."""

from __future__ import annotations

import asyncio
import json
import subprocess

import aiohttp
import pytest

from analysis.load import from_dicts
from analysis.metrics import leaderboard
from harness.campaign.model import load_campaign
from harness.config import Settings, load_settings
from harness.errors import ConfigError
from harness.gateway.atif import with_llm_steps
from harness.gateway.models import Budget, parse_budget, resolve
from harness.gateway.wiring import TrialGateway, plan_for, relay_address
from harness.results import AgentRef, TaskRef, build_record
from harness.substrates import egress, firewall
from harness.substrates.base import Node
from harness.trajectory import CommandRecord, to_atif
from tests.gateway_fakes import SCRIPT
from tests.unit.analysis.analysis_fixtures import make_record


def settings_from(tmp_path, text: str, monkeypatch) -> Settings:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    monkeypatch.setenv("HARNESS_CONFIG", str(path))
    return load_settings(path)


@pytest.mark.parametrize("entry, key, says", [
    ("{provider: azure}", "models.m.provider", "'openai', 'anthropic' or 'gemini'"),
    ("{provider: openai, base_url: ftp://x}", "models.m.base_url", "http://"),
    ("{provider: openai, prize: 1}", "models.m.prize", "valid here: provider"),
    ("{provider: openai, prices: {input: -1, output: 1}}", "models.m.prices.input", ">= 0"),
])
def test_a_bad_models_entry_names_file_and_key(tmp_path, monkeypatch, entry, key, says):
    settings = settings_from(tmp_path, f"models:\n  m: {entry}\n", monkeypatch)
    with pytest.raises(ConfigError) as err:
        resolve("m", settings)
    assert str(tmp_path / "config.yaml") in err.value.message and key in err.value.message
    assert says in err.value.message


def test_missing_key_unknown_model_and_bad_conversation(tmp_path, monkeypatch):
    monkeypatch.delenv("HX_NO_SUCH_KEY", raising=False)
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    settings = settings_from(tmp_path, "models:\n  gpt: {provider: openai, key_env: "
                             "HX_NO_SUCH_KEY, model: gpt-4o}\n", monkeypatch)
    with pytest.raises(ConfigError, match="models.gpt.key_env: the key variable HX_NO_SUCH_KEY"):
        resolve("gpt", settings)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "HX_NO_SUCH_KEY").write_text("sk-from-secrets-dir\n")
    assert resolve("gpt", settings).key == "sk-from-secrets-dir"
    with pytest.raises(ConfigError, match="no model .claude.*valid: gpt, PROVIDER/MODEL"):
        resolve("claude", settings)
    bad = tmp_path / "bad.yaml"
    bad.write_text("- run: ls\n- think: hard\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: \[1\]: each step is one of"):
        plan_for(f"scripted:{bad}", settings=settings)
    assert plan_for("gpt-4o", settings=settings) is None  # not the gateway's: as before


def test_budget_flags():
    assert parse_budget(["requests=5", "cost_usd=0.5"]) == Budget(requests=5, cost_usd=0.5)
    with pytest.raises(ConfigError, match="--budget tokens: unknown key; valid here: requests"):
        parse_budget(["tokens=5"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_budget(["requests"])


class LoopbackSubstrate:
    """A substrate whose trial network is 127.0.0.0/8 at 127.0.0.2 (the firewall calls are
    remembered, not made)."""

    def __init__(self):
        self.opened: list[tuple] = []

    def gateway_address(self, trial_id, nodes):
        return "127.0.0.2"

    async def open_gateway(self, trial_id, addr, port):
        self.opened.append((trial_id, addr, port))

    async def close_gateway(self, trial_id):
        self.opened.remove(next(o for o in self.opened if o[0] == trial_id))


def test_a_trial_gateway_listens_on_the_trial_address_and_revokes(tmp_path, monkeypatch):
    conversation = tmp_path / "c.yaml"
    conversation.write_text(SCRIPT)
    plan = plan_for(f"scripted:{conversation}", Budget(requests=1), Settings(
        gateway={"port": 0}))
    sub, events = LoopbackSubstrate(), []

    async def main():
        tg = TrialGateway(plan, "t1", sub, tmp_path / "llm.jsonl", lambda t: t,
                          lambda name, **d: events.append(name))
        env = await tg.open([Node("n1", "c1", "127.0.0.1")])
        assert sub.opened[0][1] == "127.0.0.2" and env["OPENAI_BASE_URL"].startswith(
            "http://127.0.0.2:")
        assert env["OPENAI_API_KEY"] == env["ANTHROPIC_API_KEY"] == env["HARNESS_GATEWAY_TOKEN"]
        headers = {"Authorization": f"Bearer {env['OPENAI_API_KEY']}"}
        body = {"messages": [{"role": "user", "content": "x"}]}
        async with aiohttp.ClientSession() as s:
            statuses = []
            for _ in range(2):
                async with s.post(env["OPENAI_BASE_URL"] + "/chat/completions", json=body,
                                  headers=headers) as r:
                    statuses.append(r.status)
            await tg.revoke()
            async with s.post(env["OPENAI_BASE_URL"] + "/chat/completions", json=body,
                              headers=headers) as r:
                statuses.append(r.status)
        record = build_record("t1", "c", 1, "docker", "failed", make_task_ref(), make_agent())
        tg.apply(record)
        await tg.close()
        assert sub.opened == [] and tg.gateway is None
        return statuses, record

    statuses, record = asyncio.run(main())
    assert statuses == [200, 429, 401]
    assert record.status == "budget_exceeded" and record.tokens["input"] > 0
    assert record.error["message"].startswith("budget exhausted: requests 1 of 1")
    assert events == ["gateway.open", "gateway.revoked"]
    lines = [json.loads(x) for x in (tmp_path / "llm.jsonl").read_text().splitlines()]
    # a call's record is written once its answer went out: two quick calls may land in
    # either order
    assert sorted(x["status"] for x in lines) == [200, 401, 429]


class RelaySubstrate(LoopbackSubstrate):
    """A substrate whose trial network is another machine's: `relay_gateway` relays
    127.0.0.3:<free port> to the gateway's site for the trial (a real TCP relay in this
    loop, as the SSH relay is on the far host)."""

    def __init__(self):
        super().__init__()
        self.relays: dict[str, asyncio.Server] = {}
        self.targets: dict[str, tuple[str, int]] = {}

    def gateway_address(self, trial_id, nodes):
        return None

    async def relay_gateway(self, trial_id, nodes, port, target):
        async def splice(reader, writer):
            up_r, up_w = await asyncio.open_connection(*target)

            async def pipe(r, w):
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
                w.close()
            await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))

        server = await asyncio.start_server(splice, "127.0.0.3", 0)
        self.relays[trial_id], self.targets[trial_id] = server, target
        return "127.0.0.3", server.sockets[0].getsockname()[1]

    async def close_gateway(self, trial_id):
        if any(o[0] == trial_id for o in self.opened):
            await super().close_gateway(trial_id)
        self.relays.pop(trial_id).close()


def test_a_relayed_trial_gets_the_relay_address_and_its_own_loopback_site(tmp_path):
    """Where the trial's network is another machine's, the agent's base URL is the relay's
    address there; calls arrive from loopback on a site of the trial's own, which no other
    trial's token passes."""
    conversation = tmp_path / "c.yaml"
    conversation.write_text(SCRIPT)
    plan = plan_for(f"scripted:{conversation}", None, Settings(gateway={"port": 0}))
    sub = RelaySubstrate()

    async def main():
        tgs = [TrialGateway(plan, t, sub, tmp_path / f"{t}.jsonl", lambda x: x,
                            lambda name, **d: None) for t in ("t1", "t2")]
        envs = [await tg.open([Node("n1", "c1", "10.9.0.2")]) for tg in tgs]
        assert envs[0]["OPENAI_BASE_URL"].startswith("http://127.0.0.3:")
        assert all(tg.reaches_nodes for tg in tgs)
        assert sub.targets["t1"][0] == relay_address("t1") != relay_address("t2")
        assert [o[1] for o in sub.opened] == ["127.0.0.3", "127.0.0.3"]
        body = {"messages": [{"role": "user", "content": "x"}]}
        statuses = []
        async with aiohttp.ClientSession() as s:
            for env, token in ((envs[0], envs[0]["OPENAI_API_KEY"]),
                               (envs[0], envs[1]["OPENAI_API_KEY"])):
                async with s.post(env["OPENAI_BASE_URL"] + "/chat/completions", json=body,
                                  headers={"Authorization": f"Bearer {token}"}) as r:
                    statuses.append(r.status)
        for tg in tgs:
            await tg.close()
        assert sub.opened == [] and sub.relays == {}
        return statuses

    assert asyncio.run(main()) == [200, 401]


def make_task_ref() -> TaskRef:
    return TaskRef(name="t", path="/t", sha256="0")


def make_agent() -> AgentRef:
    return AgentRef(name="openai", model="scripted:x", version="0")


def test_budget_exceeded_is_a_scored_attempt_counted_over_budget():
    records = [(make_record("t1", attempt=1, reward=0.5, status="budget_exceeded"), "a.json"),
               (make_record("t1", attempt=2, reward=1.0), "b.json")]
    row = leaderboard(from_dicts(records).trials, ["t1"]).row(0, named=True)
    assert row["over_budget"] == 1 and row["trials"] == 2
    assert row["score"] == pytest.approx(75.0)


def test_the_firewall_opens_only_the_gateway_element_of_a_bridge():
    """The set starts empty; its rule matches bridge, the bridge's own address (after the
    drop of every other host address) and the TCP port together, before the final drop,
    after the cap on a bridge's open connections."""
    chain = firewall.RULESET.split("chain from_trial")[1].split("}\n")[0]
    rule = "meta l4proto tcp iifname . ip daddr . tcp dport @gateway accept"
    assert "set gateway { type ifname . ipv4_addr . inet_service; }" in firewall.RULESET
    assert chain.index("fib daddr . iif type != local counter drop") < chain.index(rule)
    assert chain.index(rule) < chain.rindex("counter drop")
    assert chain.index(firewall.GATEWAY_CONN_LIMIT) < chain.index(rule)  # capped per bridge
    ok, _ = firewall.listing_ok(firewall.RULESET.replace(
        "  set gateway { type ifname . ipv4_addr . inet_service; }\n", ""))
    assert not ok  # a table loaded by an older harness is found out


def test_gateway_elements_are_one_per_bridge(monkeypatch):
    scripts: list[str] = []

    def fake_nft(args, stdin=None, runner=None):
        if args[:2] == ["-j", "list"]:
            elems = [{"concat": ["hxd-a", "10.1.0.1", 4480]}, {"concat": ["hxd-b", "10.2.0.1",
                                                                          4480]}]
            out = json.dumps({"nftables": [{"set": {"name": "gateway", "elem": elems}},
                                           {"chain": {"name": "from_trial"}}]})
            return subprocess.CompletedProcess(args, 0, out, "")
        scripts.append(stdin)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(egress, "_nft", fake_nft)
    egress.open_gateway("hxd-a", "10.1.0.1", 5000)
    assert scripts[-1] == ('delete element inet harness gateway { "hxd-a" . 10.1.0.1 . 4480 }\n'
                           'add element inet harness gateway { "hxd-a" . 10.1.0.1 . 5000 }\n')
    egress.close_gateway("hxd-b")
    assert scripts[-1] == 'delete element inet harness gateway { "hxd-b" . 10.2.0.1 . 4480 }\n'
    with pytest.raises(ValueError):
        egress.open_gateway("hxd-a", "not-an-address", 1)


def test_atif_gains_the_model_calls_beside_their_commands(tmp_path):
    llm = tmp_path / "llm.jsonl"
    calls = [
        {"ts": "2026-01-01T00:00:01.000+00:00", "api": "messages", "status": 200,
         "model": "claude", "usage": {"input": 100, "output": 10, "cache": 40},
         "cost_usd": 0.01, "response": {"content": [
             {"type": "text", "text": "Looking."},
             {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}},
        {"ts": "2026-01-01T00:00:02.500+00:00", "api": "responses", "status": 429},
        {"ts": "2026-01-01T00:00:03.000+00:00", "api": "responses", "status": 200,
         "model": "gpt", "usage": {"input": 120, "output": 5, "cache": 0}, "cost_usd": 0.02,
         "response": {"output": [{"type": "message", "content": [
             {"type": "output_text", "text": "Done."}]}]}}]
    llm.write_text("".join(json.dumps(c) + "\n" for c in calls))
    records = [CommandRecord(ts="2026-01-01T00:00:02.000+00:00", node="n1", cmd="ls", exit=0,
                             stdout_tail="a b", source="agent")]
    doc = with_llm_steps(to_atif(records, trial_id="t", agent_name="claude-code",
                                 model="claude", instruction="go"), llm)
    kinds = [(s["step_id"], s["source"], s.get("message", "")[:8]) for s in doc["steps"]]
    assert kinds == [(1, "user", "go"), (2, "agent", "Looking."), (3, "agent", ""),
                     (4, "agent", "Done.")]
    assert doc["steps"][1]["tool_calls"] == [{"tool_call_id": "t1", "function_name": "Bash",
                                              "arguments": {"command": "ls"}}]
    assert doc["steps"][1]["metrics"]["cached_tokens"] == 40
    assert doc["final_metrics"]["total_prompt_tokens"] == 220
    assert doc["final_metrics"]["total_cost_usd"] == 0.03
    assert doc["final_metrics"]["extra"]["n_llm_calls"] == 2


def test_a_campaign_budget_is_validated_with_file_and_key(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: c\ntasks: [tasks/hello-docker]\nagents: [{name: openai, model: "
                    "gpt}]\nbudget: {requests: 50, cost_usd: 1.5}\n")
    camp, _ = load_campaign(path)
    assert camp.budget == Budget(requests=50, cost_usd=1.5)
    path.write_text(path.read_text().replace("requests: 50", "request: 50"))
    with pytest.raises(ConfigError, match=r"c.yaml: budget.request: unknown key; valid here: "
                                          "requests, input_tokens"):
        load_campaign(path)


def test_the_local_model_needs_no_table_entry_but_must_be_installed(tmp_path, monkeypatch):
    from harness.gateway import local

    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "home"))
    settings = Settings()
    with pytest.raises(ConfigError) as err:
        resolve("local", settings)
    assert "harness model install" in err.value.message
    with pytest.raises(ConfigError) as err:
        resolve("local:gpt-9", settings)
    assert "smollm2" in err.value.message
    python = local.venv_python()
    python.parent.mkdir(parents=True)
    python.write_text("")
    (local.root() / "smollm2").mkdir(parents=True)
    (local.root() / "smollm2" / "m.Q4_1.gguf").write_text("")
    up = resolve("local", settings)
    assert (up.provider, up.model, up.chat_only, up.local) == ("openai", "smollm2", True,
                                                               "smollm2")
    assert up.key is None and up.prices == {"input": 0.0, "output": 0.0}
    cmd = local.server_command(local.MODELS["smollm2"], 5555)
    assert cmd[:3] == [str(python), "-m", "llama_cpp.server"] and "127.0.0.1" in cmd


def test_provider_slash_model_needs_no_table_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    settings = Settings()
    up = resolve("anthropic/claude-sonnet-4-5", settings)
    assert (up.provider, up.model, up.base_url, up.key) == (
        "anthropic", "claude-sonnet-4-5", "https://api.anthropic.com", "sk-ant-test")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        resolve("openai/gpt-4.1-mini", settings)
    with pytest.raises(ConfigError, match="PROVIDER one of openai, anthropic, gemini"):
        resolve("mistral/large", settings)
