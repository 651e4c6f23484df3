"""Terraform: render a trial's root module (main.tf.json) and drive init/apply/destroy.

Every trial is one root module and one state in its own directory. The commands go through
`python-terraform`, whose 2019 release predates Terraform 1.x: its `destroy()` passes the
removed `-force` flag, its `init()` passes `-var-file`/`-parallelism`-style defaults that
`init` rejects, and `apply()` needs `skip_plan=True` to auto-approve. `Terraform1` fixes
those three methods and keeps the rest of the library (command building, state reading).
Providers come from the harness's local filesystem mirror through `TF_CLI_CONFIG_FILE`,
set in the harness's own environment, never in the user's global config.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import python_terraform
from python_terraform import IsFlagged

from harness.errors import PreflightError, TerraformError
from harness.paths import TrialPaths, provider_mirror, terraform_cli_config

PROVIDERS = {
    "docker": {"source": "kreuzwerker/docker", "version": "4.6.0"},
    "libvirt": {"source": "dmacvicar/libvirt", "version": "0.7.6"},
}
SUBSTRATE_PROVIDERS = {"docker": ("docker",), "vm": ("libvirt",), "vm-cluster": ("libvirt",)}


def providers_for(substrate: str) -> dict[str, dict]:
    """The required_providers entries a substrate's module needs (pinned versions)."""
    return {k: dict(PROVIDERS[k]) for k in SUBSTRATE_PROVIDERS.get(substrate, ())}


def terraform_env() -> None:
    """Point every terraform the harness runs at its own CLI config; no checkpoint calls."""
    os.environ["TF_CLI_CONFIG_FILE"] = str(terraform_cli_config())
    os.environ["TF_IN_AUTOMATION"] = "1"
    os.environ["CHECKPOINT_DISABLE"] = "1"


def terraform_bin() -> str:
    home_bin = Path(os.environ.get("HARNESS_HOME", Path.home() / ".cache" / "harness")) / "bin"
    candidate = home_bin / "terraform"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("terraform")
    if not found:
        raise PreflightError("terraform not found; run scripts/setup.sh (it installs "
                             "Terraform 1.11 from the Go module proxy when missing)")
    return found


def terraform_version() -> str:
    out = subprocess.run([terraform_bin(), "version", "-json"], capture_output=True, text=True,
                         env={**os.environ, "TF_CLI_CONFIG_FILE": str(terraform_cli_config())})
    try:
        return json.loads(out.stdout)["terraform_version"]
    except (ValueError, KeyError) as exc:
        raise PreflightError(f"cannot read the terraform version: {out.stderr.strip()}") from exc


def write_cli_config(path: Path | None = None, mirror: Path | None = None) -> Path:
    """Write the Terraform CLI config: providers only from the local filesystem mirror."""
    path = path or terraform_cli_config()
    mirror = mirror or provider_mirror()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "# Written by harness: providers come from the local filesystem mirror only.\n"
        "provider_installation {\n"
        f'  filesystem_mirror {{\n    path    = "{mirror}"\n'
        '    include = ["registry.terraform.io/*/*"]\n  }\n}\n'
        "disable_checkpoint = true\n")
    return path


class Terraform1(python_terraform.Terraform):
    """python-terraform with init/apply/destroy fixed for Terraform 1.x."""

    def init(self, dir_or_plan=None, **kwargs):
        """`terraform init -input=false -no-color`: no -var-file, -parallelism or -force."""
        return self.cmd("init", input=False, no_color=IsFlagged, **kwargs)

    def apply(self, dir_or_plan=None, **kwargs):
        """`terraform apply -auto-approve -input=false -no-color`."""
        return self.cmd("apply", auto_approve=IsFlagged, input=False, no_color=IsFlagged,
                        **kwargs)

    def destroy(self, dir_or_plan=None, **kwargs):
        """`terraform destroy -auto-approve` (Terraform 1.x removed `-force`)."""
        return self.cmd("destroy", auto_approve=IsFlagged, input=False, no_color=IsFlagged,
                        **kwargs)

    def outputs(self) -> dict[str, Any]:
        """Root outputs: from the state python-terraform re-read after the last command,
        else through `terraform output -json`."""
        state = getattr(self.tfstate, "outputs", None) if self.tfstate else None
        if isinstance(state, dict) and all(isinstance(v, dict) for v in state.values()):
            return {k: v.get("value") for k, v in state.items()}
        code, out, err = self.cmd("output", json=IsFlagged, no_color=IsFlagged)
        if code != 0:
            raise TerraformError("output failed", code, "terraform output", err)
        return {k: v["value"] for k, v in json.loads(out or "{}").items()}


def render_root(module_dir: Path, root_dir: Path, variables: dict[str, Any],
                providers: dict[str, dict] | None = None) -> dict[str, Any]:
    """The root module as a dict: providers pinned, one `trial` module call, its outputs."""
    providers = providers or {}
    source = os.path.relpath(module_dir, root_dir)
    if not source.startswith("."):
        source = f"./{source}"
    doc: dict[str, Any] = {
        "terraform": {"required_providers": {k: dict(v) for k, v in providers.items()}},
        "module": {"trial": {"source": source, **variables}},
        "output": {
            "nodes": {"value": "${module.trial.nodes}"},
            "network": {"value": "${module.trial.network}"},
        },
    }
    if "docker" in providers:
        doc["provider"] = {"docker": {"host": "unix:///var/run/docker.sock"}}
    return doc


def write_root(paths: TrialPaths, doc: dict[str, Any]) -> Path:
    paths.terraform.mkdir(parents=True, exist_ok=True)
    tmp = paths.main_tf.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    tmp.replace(paths.main_tf)
    return paths.main_tf


class TrialTerraform:
    """init/apply/outputs/destroy for one trial's root module, with clear errors."""

    def __init__(self, paths: TrialPaths):
        terraform_env()
        self.paths = paths
        self.state_broken = _quarantine_broken_state(paths.terraform / "terraform.tfstate")
        self.tf = Terraform1(working_dir=str(paths.terraform), terraform_bin_path=terraform_bin())
        self.log = paths.terraform / "terraform.log"

    def _run(self, what: str, fn, **kwargs) -> str:
        code, out, err = fn(**kwargs)
        with self.log.open("a") as fh:
            fh.write(f"$ terraform {what}\n{out or ''}{err or ''}\n")
        if code != 0:
            raise TerraformError(f"{what} failed in {self.paths.terraform}", code,
                                 f"terraform {what}", _error_summary(err or out or ""))
        return out or ""

    def init(self) -> None:
        if (self.paths.terraform / ".terraform" / "modules").exists() and \
                (self.paths.terraform / ".terraform.lock.hcl").exists():
            return
        self._run("init", self.tf.init)

    def apply(self) -> dict[str, Any]:
        self.init()
        self._run("apply", self.tf.apply)
        return self.tf.outputs()

    def destroy(self) -> None:
        if not self.paths.main_tf.exists():
            return
        self.init()
        self._run("destroy", self.tf.destroy, refresh=False)

    def has_state(self) -> bool:
        state = self.paths.terraform / "terraform.tfstate"
        if not state.exists():
            return False
        try:
            return bool(json.loads(state.read_text()).get("resources"))
        except ValueError:
            return True


def _quarantine_broken_state(state: Path) -> bool:
    """A process killed mid-write can leave an empty or partial state file; keep it as
    `terraform.tfstate.broken` (resources are then found by label) and report it."""
    if not state.exists():
        return False
    try:
        json.loads(state.read_text() or "null")["version"]
        return False
    except (ValueError, TypeError, KeyError):
        state.replace(state.with_suffix(".tfstate.broken"))
        return True


def _error_summary(text: str) -> str:
    """The first `Error:` block of terraform's output, flattened to one line."""
    lines = [ln.strip(" │╷╵") for ln in text.splitlines()]
    for i, ln in enumerate(lines):
        if ln.startswith("Error:"):
            block = [x for x in lines[i:i + 8] if x.strip()]
            return " ".join(block)[:600]
    return text.strip()[-600:]
