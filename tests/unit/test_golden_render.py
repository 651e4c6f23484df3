"""Golden files for every renderer: main.tf.json and the Ansible inventory.

Set HARNESS_UPDATE_GOLDEN=1 to rewrite the expected files after an intended change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from harness.config import Settings
from harness.paths import REPO_ROOT
from harness.substrates.base import TrialSpec
from harness.substrates.docker import DockerSubstrate, render_vars
from harness.task import load_task
from harness.tools.terraform import render_root, required_providers

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
CASES = sorted(p for p in GOLDEN.iterdir() if (p / "case.json").exists())


def _compare(path: Path, text: str) -> None:
    if os.environ.get("HARNESS_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with HARNESS_UPDATE_GOLDEN=1 once"
    assert text == path.read_text(), f"{path} differs from the rendered output"


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_render_matches_golden(case, monkeypatch):
    monkeypatch.setattr("harness.owner.tag", lambda pid=None: "golden-host:4242:1000@boot")
    spec_in = json.loads((case / "case.json").read_text())
    task = load_task(case / "task")
    spec = TrialSpec(spec_in["trial_id"], spec_in["campaign"], task, case, spec_in["image"])
    monkeypatch.delenv("HARNESS_DOCKER_HOST", raising=False)
    sub = DockerSubstrate(settings=Settings())
    tf_vars = render_vars(spec, spec_in["subnet"])
    doc = render_root(sub.terraform_module(), REPO_ROOT / spec_in["terraform_root"], tf_vars,
                      required_providers(sub.providers), sub.provider_config())
    _compare(case / "main.tf.json", json.dumps(doc, indent=2, sort_keys=True) + "\n")
    nodes = sub.nodes(spec, spec_in["outputs"])
    inventory = sub.inventory(spec, nodes)
    _compare(case / "inventory.yml", yaml.safe_dump(inventory, sort_keys=True))
