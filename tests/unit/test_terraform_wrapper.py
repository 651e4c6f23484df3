"""python-terraform fixed for Terraform 1.x, exercised against the real terraform CLI.

The root module uses only Terraform's built-in `terraform_data`, so no provider is needed.
"""

from __future__ import annotations

import json

import pytest
import python_terraform

from harness.tools.terraform import Terraform1, _error_summary, terraform_bin, terraform_env


def _has_terraform() -> bool:
    try:
        return bool(terraform_bin())
    except Exception:
        return False


pytestmark = pytest.mark.skipif(not _has_terraform(), reason="terraform not installed")

ROOT = {"resource": {"terraform_data": {"this": {"input": "${var.word}"}}},
        "variable": {"word": {"type": "string", "default": "hello"}},
        "output": {"word": {"value": "${terraform_data.this.output}"}}}


@pytest.fixture
def workdir(tmp_path):
    terraform_env()
    (tmp_path / "main.tf.json").write_text(json.dumps(ROOT))
    return tmp_path


def test_generated_commands_fit_terraform_1x(workdir):
    tf = Terraform1(working_dir=str(workdir), terraform_bin_path=terraform_bin())
    destroy = tf.generate_cmd_string("destroy", auto_approve=python_terraform.IsFlagged)
    assert "-auto-approve" in destroy and "-force" not in destroy
    old = python_terraform.Terraform(working_dir=str(workdir))
    captured = {}
    old.cmd = lambda cmd, *a, **kw: captured.update({cmd: kw}) or (0, "", "")
    python_terraform.Terraform.destroy(old)
    assert "force" in captured["destroy"]  # the unmaintained library's bug this class fixes


def test_init_apply_output_destroy_for_real(workdir):
    tf = Terraform1(working_dir=str(workdir), terraform_bin_path=terraform_bin())
    code, out, err = tf.init()
    assert code == 0, err
    code, out, err = tf.apply()
    assert code == 0, err
    assert tf.outputs() == {"word": "hello"}
    state = json.loads((workdir / "terraform.tfstate").read_text())
    assert state["resources"][0]["type"] == "terraform_data"
    code, out, err = tf.destroy()
    assert code == 0, err
    assert json.loads((workdir / "terraform.tfstate").read_text())["resources"] == []


def test_unpatched_destroy_fails_on_terraform_1x(workdir):
    Terraform1(working_dir=str(workdir), terraform_bin_path=terraform_bin()).init()
    old = python_terraform.Terraform(working_dir=str(workdir), terraform_bin_path=terraform_bin())
    code, _, err = old.destroy()
    assert code != 0
    assert "force" in err


def test_error_summary_flattens_the_first_error_block():
    text = "Plan: 1 to add\n╷\n│ Error: Unable to create container\n│ \n│ reason: boom\n╵\n"
    assert _error_summary(text).startswith("Error: Unable to create container")
    assert "boom" in _error_summary(text)


def test_cmd_env_reaches_only_that_command(workdir):
    tf = Terraform1(working_dir=str(workdir), terraform_bin_path=terraform_bin())
    assert tf.init()[0] == 0
    code, _, err = tf.apply(env={"TF_VAR_word": "bonjour"})
    assert code == 0, err
    assert tf.outputs() == {"word": "bonjour"}
    code, _, err = tf.apply()
    assert code == 0, err
    assert tf.outputs() == {"word": "hello"}


def _trial_with_module(base, name: str, word: str = "hello"):
    """A trial directory whose root calls a local module (terraform_data only)."""
    from harness.paths import TrialPaths

    module = base / "modules" / "m"
    module.mkdir(parents=True, exist_ok=True)
    (module / "main.tf.json").write_text(json.dumps({
        "variable": {"word": {"type": "string"}},
        "resource": {"terraform_data": {"this": {"input": "${var.word}"}}},
        "output": {"word": {"value": "${terraform_data.this.output}"}}}))
    paths = TrialPaths(base / "trials" / name).make()
    paths.main_tf.write_text(json.dumps({
        "module": {"trial": {"source": "../../../modules/m", "word": word}},
        "output": {"word": {"value": "${module.trial.word}"}}}))
    return paths


def test_init_is_run_once_then_copied_for_the_same_inputs(tmp_path, monkeypatch):
    from harness.tools.terraform import TrialTerraform

    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "home"))
    terraform_env()
    first = TrialTerraform(_trial_with_module(tmp_path, "a"))
    assert first.apply() == {"word": "hello"}
    assert "Initializing" in first.log.read_text()
    (entry,) = (tmp_path / "home" / "terraform-init").iterdir()
    second = TrialTerraform(_trial_with_module(tmp_path, "b", "bonjour"))
    assert second.apply() == {"word": "bonjour"}
    log = second.log.read_text()
    assert f"(copied from {entry})" in log and "Initializing" not in log
    assert (second.paths.terraform / ".terraform" / "modules" / "modules.json").is_file()
    second.destroy()
    # a changed module is a different key: init runs for real again
    (tmp_path / "modules" / "m" / "extra.tf.json").write_text(
        json.dumps({"locals": {"x": 1}}))
    third = TrialTerraform(_trial_with_module(tmp_path, "c"))
    assert third.apply() == {"word": "hello"}
    assert "Initializing" in third.log.read_text()
    assert len(list((tmp_path / "home" / "terraform-init").iterdir())) == 2
