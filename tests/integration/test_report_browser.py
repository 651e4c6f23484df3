"""The HTML report renders in a real headless Chromium, offline, with every chart drawn.

The report's inline script stamps each chart with the marks it holds and its laid-out size;
the test reads them back from `--dump-dom`, then keeps a screenshot under tests/artifacts/.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis.pipeline import analyze
from analysis.report import write_report

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
AGENTS = {"claude/sonnet": (0.9, 3.0), "codex/gpt-5": (0.6, 1.5), "nop": (0.0, 0.0)}
TASKS = {"web-tls": "L4", "etcd-quorum": "L3", "raid-degraded": "L2", "ipmi-power": "L1"}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian chromium at /usr/bin/chromium"),
]


def write_campaign(root: Path) -> Path:
    """3 configurations x 4 tasks x 2 attempts with checks in every lifecycle bucket."""
    run = root / "runs" / "demo"
    for config, (skill, cost) in AGENTS.items():
        agent, _, model = config.partition("/")
        for i, (task, layer) in enumerate(TASKS.items()):
            for attempt in (1, 2):
                if agent == "codex" and task == "ipmi-power":
                    continue
                level = max(0.0, skill - 0.15 * i - 0.1 * (attempt - 1))
                checks = [{"name": f"{task} works", "passed": level > 0.2},
                          {"name": "fix survives restart", "passed": level > 0.5},
                          {"name": "no stale incident marker", "passed": level > 0.7}]
                reward = sum(c["passed"] for c in checks) / 3
                trial_id = f"{task}__{agent}__{attempt}"
                record = {"trial_id": trial_id, "campaign": "demo",
                          "task": {"name": task, "layer": layer},
                          "agent": {"name": agent, "model": model or None},
                          "attempt": attempt, "status": "passed" if reward == 1 else "failed",
                          "reward": reward, "checks": checks, "cost_usd": cost,
                          "tokens": {"input": 1000, "output": 200}}
                trial = run / "trials" / trial_id
                trial.mkdir(parents=True)
                (trial / "result.json").write_text(json.dumps(record))
    return run


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=True)


def test_report_renders_every_chart(tmp_path):
    report = tmp_path / "report.html"
    write_report(analyze([write_campaign(tmp_path)]), report)
    url = report.as_uri()

    dom = chromium("--dump-dom", url, profile=tmp_path / "profile-dom").stdout
    assert 'data-rendered="yes"' in dom
    charts = {m.group(1): m.group(0) for m in re.finditer(r'<svg class="chart" id="(\w+)"[^>]*>',
                                                          dom)}
    expected_marks = {"heatmap": 4 * 3, "funnel": 3, "scatter": 3}
    assert set(charts) == set(expected_marks)
    for chart, marks in expected_marks.items():
        tag = charts[chart]
        assert f'data-marks="{marks}"' in tag, tag
        width = int(re.search(r'data-width="(\d+)"', tag).group(1))
        height = int(re.search(r'data-height="(\d+)"', tag).group(1))
        assert width > 100 and height > 50, tag
    assert 'class="frontier"' in dom

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = tmp_path / "report.png"
    chromium(f"--screenshot={shot}", "--window-size=1400,2600", "--hide-scrollbars", url,
             profile=tmp_path / "profile-shot")
    assert shot.stat().st_size > 20_000
    shutil.copy(shot, ARTIFACTS / "report.png")
