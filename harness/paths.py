"""Where things live: the repository's assets, the harness home, a run directory and one
trial's directory.

The run directory (a campaign's, or `adhoc` for `harness run`) is the API between the
campaign layer and analysis; `RunPaths` owns its layout::

    <run>/                        campaign.yaml (as given), plan.json, journal.jsonl, .lock
      trials/<trial-id>/          one TrialPaths each
      aborted/<id>.<why>.<n>/     evidence of interrupted or changed trials, moved aside
      results/                    trials.parquet, checks.parquet, index-*.jsonl|parquet (the
                                  results index), plan-ids.json: all derived, rebuilt if gone

The trial directory is the API between phases; every phase reads and writes through
`TrialPaths`, nobody builds paths by hand::

    <run>/trials/<trial-id>/
      trial.json                 what this trial is (task ref + hash, agent, substrate, attempt)
      terraform/main.tf.json     rendered root module; terraform.tfstate, .terraform.lock.hcl
      inventory.yml              rendered Ansible inventory
      ansible/<stage>/           ansible-runner private data dir + artifacts per stage
      agent/                     trajectory.jsonl, atif.json, agent.log, llm.jsonl (model calls)
      verifier/<gate>/           reward.json / reward.txt as written, test-stdout.txt
      events.jsonl               scenario and trial event log
      risk.json                  risk findings
      retries/<n>/               evidence of pre-window failures (never scored)
      result.json                the trial record, written last and atomically
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PLAYBOOKS = REPO_ROOT / "playbooks"
ROLES = REPO_ROOT / "roles"
ANSIBLE_PLUGINS = REPO_ROOT / "ansible_plugins"
SEED_TASKS = REPO_ROOT / "tasks"
# on a trial node (the task contract Harbor and InfraBench share): the verifier's tests and
# the directory test.sh writes its reward to
NODE_TESTS = "/tests"
NODE_VERIFIER_LOGS = "/logs/verifier"


def harness_home() -> Path:
    """Machine-wide state: provider mirror, Terraform CLI config, image caches, lock files."""
    return Path(os.environ.get("HARNESS_HOME", Path.home() / ".cache" / "harness"))


def terraform_cli_config() -> Path:
    """The Terraform CLI config the harness uses (set through TF_CLI_CONFIG_FILE)."""
    return harness_home() / "terraform.rc"


def provider_mirror() -> Path:
    return harness_home() / "providers"


def _slug(text: str, n: int) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:n] or "x"


def make_trial_id(task: str, agent: str, attempt: int, salt: str | None = None,
                  model: str | None = None) -> str:
    """The one trial id scheme (`harness run`, the quickstart and campaigns alike):
    `<task>-<agent>[-<model>]-<attempt>-<salt>`, each name slugged and bounded (24, 12 and
    12 characters), so that it names a trial directory, a container, a libvirt domain and
    a bridge's hash. `salt`: six hex digits; a campaign derives them from the trial's
    identity (the same trial gets the same id on every plan), a single run draws them."""
    middle = f"-{_slug(model, 12)}" if model else ""
    return (f"{_slug(task, 24)}-{_slug(agent, 12)}{middle}-{attempt}-"
            f"{salt or uuid.uuid4().hex[:6]}")


@dataclass(frozen=True)
class TrialPaths:
    """The paths of one trial directory (see the module docstring for the tree)."""

    root: Path

    @property
    def trial_json(self) -> Path:
        return self.root / "trial.json"

    @property
    def terraform(self) -> Path:
        return self.root / "terraform"

    @property
    def main_tf(self) -> Path:
        return self.terraform / "main.tf.json"

    @property
    def inventory(self) -> Path:
        return self.root / "inventory.yml"

    def ansible(self, stage: str) -> Path:
        return self.root / "ansible" / stage

    @property
    def agent(self) -> Path:
        return self.root / "agent"

    @property
    def trajectory(self) -> Path:
        return self.agent / "trajectory.jsonl"

    @property
    def atif(self) -> Path:
        return self.agent / "atif.json"

    @property
    def agent_log(self) -> Path:
        return self.agent / "agent.log"

    @property
    def llm(self) -> Path:
        """Every model call through the gateway, one JSON line each."""
        return self.agent / "llm.jsonl"

    def verifier(self, gate: str) -> Path:
        return self.root / "verifier" / gate

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def risk(self) -> Path:
        return self.root / "risk.json"

    @property
    def retries(self) -> Path:
        return self.root / "retries"

    @property
    def result(self) -> Path:
        return self.root / "result.json"

    @property
    def keep_info(self) -> Path:
        return self.root / "KEPT.txt"

    def make(self) -> TrialPaths:
        for d in (self.terraform, self.agent):
            d.mkdir(parents=True, exist_ok=True)
        return self


@dataclass(frozen=True)
class RunPaths:
    """The paths of one run directory (see the module docstring for the tree)."""

    root: Path

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"

    @property
    def campaign_file(self) -> Path:
        return self.root / "campaign.yaml"

    @property
    def journal(self) -> Path:
        return self.root / "journal.jsonl"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def trials(self) -> Path:
        return self.root / "trials"

    def trial(self, trial_id: str) -> TrialPaths:
        return TrialPaths(self.trials / trial_id)

    def results_of_trials(self) -> list[Path]:
        """Every trial's result.json, sorted."""
        return sorted(self.trials.glob("*/result.json"))

    @property
    def aborted(self) -> Path:
        return self.root / "aborted"

    @property
    def results(self) -> Path:
        return self.root / "results"
