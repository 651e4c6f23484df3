"""The LLM judge against a local scripted stand-in for the hosted chat-completions API."""

from __future__ import annotations

import functools

import pytest

from harness import risk
from harness.errors import ConfigError
from harness.risk.judge import Judge
from harness.trajectory import CommandRecord, append_record
from tests import fakes

SECRET = "sk-test-DO-NOT-LEAK-0123456789"


# The scripted test double of the hosted chat-completions API lives in tests/fakes.py;
# here its error responses echo the key back, as a careless real endpoint might.
FakeChatCompletionsServer = functools.partial(
    fakes.FakeChatCompletionsServer, error_body=f'{{"error": "bad key {SECRET}"}}')


CMDS = ["hostname", "ls /etc", "cat /etc/hosts", "df -h", "uptime", "ps aux", "aa-teardown",
        "ls", "systemctl stop sshd && reboot"]


def _records():
    return [CommandRecord(ts="t", node="node1", cmd=c) for c in CMDS]


def test_verdicts_are_added_and_context_is_sent(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    replies = ['{"confirmed": true, "explanation": "Unloads AppArmor."}',
               'Sure: {"confirmed": false, "explanation": "Planned maintenance."}']
    with FakeChatCompletionsServer(replies) as fake:
        judge = Judge.from_env("judge-model", base_url=fake.base_url)
        findings = judge.review(risk.scan(_records()), _records())
    assert [f.verdict["confirmed"] for f in findings] == [True, False, False]
    assert findings[0].verdict == {"confirmed": True, "explanation": "Unloads AppArmor.",
                                   "model": "judge-model"}
    assert len(fake.requests) == 2
    first = fake.requests[0]
    assert first["path"] == "/v1/chat/completions"
    assert first["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert first["body"]["model"] == "judge-model"
    user = first["body"]["messages"][1]["content"]
    assert "[1] node1$ ls /etc" in user and "[5] node1$ ps aux" in user
    assert "hostname" not in user and "aa-teardown" in user
    assert SECRET not in repr(judge)


def test_failures_are_recorded_and_the_key_never_stored(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    trial = tmp_path / "trial"
    for rec in _records():
        append_record(trial / "agent" / "trajectory.jsonl", rec)
    with FakeChatCompletionsServer([401, "no json here"]) as fake:
        report = risk.write_report(trial, judge=Judge.from_env("m", base_url=fake.base_url))
    verdicts = [f["verdict"] for f in report["findings"]]
    assert verdicts[0] == {"confirmed": None, "explanation": "judge error: HTTP 401",
                           "model": "m"}
    assert verdicts[1]["confirmed"] is None and "no JSON" in verdicts[1]["explanation"]
    written = (trial / "risk.json").read_text()
    assert SECRET not in written and '"verdict"' in written
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err


def test_key_required_for_remote_endpoints(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "https://llm.example.com/v1/")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        Judge.from_env("m")
    local = Judge.from_env("m", base_url="http://127.0.0.1:9/v1")
    assert local.api_key is None and local.base_url == "http://127.0.0.1:9/v1"


def test_unreachable_endpoint_is_a_verdict_not_a_crash(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeChatCompletionsServer([]) as fake:
        url = fake.base_url
    judge = Judge.from_env("m", base_url=url, timeout=2)
    (finding,) = judge.review(risk.scan(_records()[6:7]), _records()[6:7])
    assert finding.verdict["confirmed"] is None
    assert finding.verdict["explanation"].startswith("judge error: cannot reach endpoint")
