"""Agent registry, replay command lists, prices, secrets and the openai agent's settings."""

from __future__ import annotations

import json

import pytest

from harness.agents import get_agent, names
from harness.agents.prices import cost_usd, price_for
from harness.agents.replay import load_commands
from harness.agents.secrets import agent_secrets
from harness.errors import ConfigError, RegistryError


def test_registry_lists_every_agent():
    assert set(names()) >= {"oracle", "nop", "replay", "claude-code", "codex", "gemini-cli",
                            "opencode", "aider", "openai"}
    with pytest.raises(RegistryError, match="valid: aider, claude-code, codex"):
        get_agent("claude")


def test_replay_commands_from_inline_yaml_and_json(tmp_path):
    items = load_commands(["ls", {"cmd": "df -h", "delay_sec": 1, "node": "node2"}])
    assert items == [{"cmd": "ls"}, {"cmd": "df -h", "delay_sec": 1, "node": "node2"}]
    (tmp_path / "c.yaml").write_text("commands:\n  - uptime\n  - {cmd: reboot, skip_exec: true}\n")
    assert load_commands(str(tmp_path / "c.yaml"))[1] == {"cmd": "reboot", "skip_exec": True}
    (tmp_path / "c.json").write_text(json.dumps([{"cmd": "id", "timeout_sec": 3}]))
    assert load_commands(tmp_path / "c.json") == [{"cmd": "id", "timeout_sec": 3}]


@pytest.mark.parametrize("spec,match", [
    (None, "needs commands"), ([{"command": "ls"}], "string 'cmd'"),
    ([{"cmd": "ls", "sleep": 1}], "unknown keys"), ("/nonexistent.yaml", "cannot read"),
    ({"cmd": "ls"}, "expected a list")])
def test_replay_rejects_bad_commands(spec, match):
    with pytest.raises(ConfigError, match=match):
        get_agent("replay", commands=spec)


def test_prices_match_by_prefix_and_can_be_overridden():
    assert price_for("gpt-4o-mini-2024-07-18")["input"] == 0.15
    assert price_for("openai/gpt-4o-2024-08-06")["input"] == 2.50
    assert price_for("claude-sonnet-4-5-20250929")["output"] == 15.00
    assert price_for("unknown-model") is None and price_for(None) is None
    tokens = {"input": 1_000_000, "output": 100_000, "cache": 400_000}
    assert cost_usd("gpt-4o", tokens) == pytest.approx(0.6 * 2.5 + 0.4 * 1.25 + 0.1 * 10)
    mine = {"gpt-4o": {"input": 1.0, "output": 1.0}}
    assert cost_usd("gpt-4o", tokens, mine) == pytest.approx(1.1)
    assert cost_usd("unknown", tokens) is None
    assert cost_usd("gpt-4o", {"input": None, "output": None, "cache": None}) is None


def test_agent_secrets_reads_only_the_agents_variables():
    environ = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o", "AWS_SECRET": "x",
               "GEMINI_API_KEY": ""}
    assert agent_secrets("claude-code", environ) == {"ANTHROPIC_API_KEY": "a"}
    assert agent_secrets("openai", environ) == {"OPENAI_API_KEY": "o"}
    assert agent_secrets("opencode", environ) == {"ANTHROPIC_API_KEY": "a",
                                                  "OPENAI_API_KEY": "o"}
    assert agent_secrets("gemini-cli", environ) == {}
    assert agent_secrets("oracle", environ) == {}


def test_openai_agent_settings(monkeypatch):
    with pytest.raises(ConfigError, match="needs a model"):
        get_agent("openai")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1/")
    agent = get_agent("openai", model="m")
    assert agent.base_url == "http://localhost:8000/v1" and agent.local
    remote = get_agent("openai", model="m", base_url="https://llm.example.com/v1")
    assert not remote.local
