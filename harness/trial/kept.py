"""A kept trial (`harness run --keep`) as a TrialEnvironment again, from its directory."""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import InputError
from harness.paths import TrialPaths
from harness.substrates import default_name, get_substrate
from harness.substrates.common import nodes_from_inventory
from harness.trial.environment import TrialEnvironment


def kept_environment(trial_dir: str | Path) -> tuple[TrialEnvironment, dict]:
    """The environment of a kept trial, rebuilt from trial.json and inventory.yml, and
    trial.json's content."""
    paths = TrialPaths(Path(trial_dir).resolve())
    if not paths.trial_json.is_file() or not paths.inventory.is_file():
        raise InputError(f"{paths.root}: not a provisioned trial directory (needs trial.json "
                         "and inventory.yml; run the trial with `harness run --keep`)")
    meta = json.loads(paths.trial_json.read_text())
    substrate = get_substrate(meta.get("substrate") or default_name())
    return TrialEnvironment(substrate, nodes_from_inventory(paths.inventory), paths), meta
