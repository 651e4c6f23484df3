"""The shape of the code: plug-ins are folders the core never names, layers import
downwards only, the harness root stays small, imports are not hidden in function bodies."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness import substrates
from harness.errors import InputError, RegistryError

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"
# packages and root modules, lowest first: a module imports its own layer and those below
LAYERS = [
    {"errors", "paths", "config", "owner", "validation", "redact", "results", "trajectory",
     "http_errors", "__init__", "__version__"},
    {"substrates"},
    {"task", "tools", "placement"},
    {"agents", "faults", "risk", "gateway"},
    {"trial"},
    {"campaign", "upkeep"},
    {"cli"},
]
# core: what must never name a substrate (plug-ins and the risk catalog, which names
# commands and services such as `docker exec`, are not core)
PLUGIN_DIRS = {"substrates", "risk"}


def _part(path: Path) -> str:
    rel = path.relative_to(HARNESS)
    return rel.parts[0].removesuffix(".py") if rel.parts else ""


def _layer(part: str) -> int:
    for i, layer in enumerate(LAYERS):
        if part in layer:
            return i
    raise AssertionError(f"harness/{part} is in no layer of {__file__}")


def _modules() -> list[Path]:
    return sorted(p for p in HARNESS.rglob("*.py"))


def _runtime_imports(tree: ast.Module):
    """Import nodes outside `if TYPE_CHECKING:` blocks."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            skip |= {id(n) for n in ast.walk(node)}
    return [n for n in ast.walk(tree)
            if isinstance(n, ast.Import | ast.ImportFrom) and id(n) not in skip]


def _harness_targets(node) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        if node.module == "harness":
            return [a.name for a in node.names]
        if node.module and node.module.startswith("harness."):
            return [node.module.split(".")[1]]
        return []
    return [a.name.split(".")[1] for a in node.names if a.name.startswith("harness.")]


def _plugin_words() -> re.Pattern:
    """Substrate and engine names as whole words (not `docker_api`, `vm_image`, `a.docker`)."""
    words = set(substrates.names()) | {c.engine for c in substrates.classes().values()
                                       if c.engine}
    alts = "|".join(sorted((re.escape(w) for w in words), key=len, reverse=True))
    return re.compile(rf"(?<![\w./-])({alts})(?![\w/-])")


def test_the_core_never_names_a_substrate():
    """No string of a core module (docstrings aside: constants, f-string parts, messages)
    names a substrate or its engine; ask the registry or the substrate instead."""
    words = _plugin_words()
    found = []
    for path in _modules():
        if _part(path) in PLUGIN_DIRS:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef |
                                    ast.AsyncFunctionDef)
                      and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docstrings and words.search(node.value):
                found.append(f"{path.relative_to(HARNESS)}:{node.lineno}: {node.value!r}")
    assert found == [], "ask the registry instead: " + "; ".join(found)


def test_playbooks_and_roles_never_branch_on_a_substrate():
    """Plays and roles ask for what a substrate declares (inventory variables such as
    harness_control_path), never compare with its name."""
    words = _plugin_words()
    quoted = re.compile(rf"""['"]{words.pattern}['"]""")
    found = []
    for path in sorted([*ROOT.glob("playbooks/*.yml"), *ROOT.glob("roles/*/*/*.yml"),
                        *ROOT.glob("roles/*/templates/*.j2")]):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if quoted.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == [], found


def test_imports_only_go_down():
    wrong = []
    for path in _modules():
        here = _layer(_part(path))
        for node in _runtime_imports(ast.parse(path.read_text())):
            for target in _harness_targets(node):
                if _layer(target) > here:
                    wrong.append(f"{path.relative_to(HARNESS)}:{node.lineno} imports "
                                 f"harness.{target}")
    assert wrong == []


def test_no_substrate_imports_a_sibling():
    """A substrate folder (one with a `substrate.toml`) imports its own modules and the
    neutral ones, never another folder; the neutral ones (`harness/substrates/*.py` and the
    packages without a `substrate.toml`: `hypervisor/`, `metal/`) import no folder."""
    root = HARNESS / "substrates"
    folders = {p.name for p in root.iterdir() if (p / "substrate.toml").is_file()}
    found = set()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        folder = rel.parts[0] if len(rel.parts) > 1 else None
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):  # (`from harness.substrates import x`)
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                names = [a.name for a in getattr(node, "names", [])
                         if isinstance(node, ast.Import)]
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["harness", "substrates"] and len(parts) > 2 \
                        and parts[2] in folders - {folder}:
                    found.add((str(rel), parts[2]))
    assert found == set(), sorted(found)
    assert {"hypervisor", "metal"} <= {p.name for p in root.iterdir()
                                       if (p / "__init__.py").is_file()} - folders


def test_the_root_keeps_only_cross_cutting_modules():
    loose = sorted(p.name for p in HARNESS.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 12, loose


LATE_BY_DESIGN = {
    # the registry reads declaration files; `harness --help` lists their command groups
    # without pydantic, which the node fields need on the first lookup
    ("substrates/__init__.py", "_registry"),
    # a trial's steps after apply import their modules (trial.AFTER_APPLY, imported in the
    # background while the first `terraform apply` runs): `harness run` reaches Terraform
    # without them
    *(("trial/trial.py", fn) for fn in ("_provision", "_pre_window", "_window_and_gates",
                                        "_verify_and_gates", "_live_risk", "_capture",
                                        "_risk_and_atif")),
}


def test_no_harness_import_hidden_in_a_function_body():
    """Except in the CLI (thin commands import their library late, by design) and the
    functions of `LATE_BY_DESIGN`."""
    hidden = []
    for path in _modules():
        if _part(path) == "cli":
            continue
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or (
                    str(path.relative_to(HARNESS)), fn.name) in LATE_BY_DESIGN:
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import | ast.ImportFrom) and _harness_targets(node):
                    hidden.append(f"{path.relative_to(HARNESS)}:{node.lineno}")
    assert hidden == []


@pytest.mark.parametrize("name", substrates.names())
def test_a_substrate_is_one_folder(name):
    """Its class, Terraform module and provider build live in its folder."""
    cls = substrates.substrate_class(name)
    folder = Path(__import__(cls.__module__, fromlist=["x"]).__file__).parent
    assert folder.parent == HARNESS / "substrates"
    module = cls.terraform_module(cls.__new__(cls))
    assert module.is_relative_to(folder) and (module / "main.tf").is_file()
    for pin in cls.providers.values():
        assert Path(pin["build"]).is_relative_to(folder), pin
    assert cls.env_types and cls.default_concurrency >= 1


def test_a_substrate_folder_registers_itself(tmp_path, monkeypatch):
    """The registry reads substrate.toml files only: a new folder needs no edit elsewhere."""
    for folder in substrates.FOLDERS.iterdir():
        if (folder / "substrate.toml").is_file():
            (tmp_path / folder.name).mkdir()
            (tmp_path / folder.name / "substrate.toml").write_bytes(
                (folder / "substrate.toml").read_bytes())
    (tmp_path / "moon").mkdir()
    (tmp_path / "moon" / "substrate.toml").write_text(
        '[substrates.moon]\nclass = "MoonSubstrate"\ninstall = "launch a rocket"\n')
    monkeypatch.setattr(substrates, "FOLDERS", tmp_path)
    substrates._registry.cache_clear()
    try:
        assert "moon" in substrates.names() and substrates.default_name() == "docker"
        with pytest.raises(RegistryError, match="moon: No module named.*launch a rocket"):
            substrates.substrate_class("moon")
    finally:
        monkeypatch.undo()
        substrates._registry.cache_clear()


def test_loading_a_task_imports_no_other_substrate():
    """What a task.toml may say (types, node keys, backends) is declared in substrate.toml:
    loading a docker task imports the docker folder alone (its checks), no sibling."""
    code = ("import sys\nfrom harness.task.load import load_task\n"
            "load_task('tasks/hello-docker')\n"
            "print(sorted({m.split('.')[2] for m in sys.modules if m.startswith("
            "'harness.substrates.') and m.count('.') >= 2}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=HARNESS.parent, check=True).stdout
    folders = {d.name for d in substrates.FOLDERS.iterdir() if (d / "substrate.toml").is_file()}
    assert len(folders) >= 4
    assert folders & set(eval(out)) == {"docker"}, out  # noqa: S307 - a list we printed


def test_harness_run_reaches_terraform_without_what_it_needs_later():
    """Before the first `terraform apply`, `harness run` of a docker task with the oracle
    imports no other substrate, no other agent and none of trial.AFTER_APPLY (which load in
    the background while apply runs, and do load)."""
    code = ("import sys\n"
            "from harness.agents import get_agent\n"
            "from harness.placement import default_hosts\n"
            "from harness.trial import trial\n"
            "import harness.trial.adhoc\n"
            "get_agent('oracle'); default_hosts(only=['docker'])\n"
            "early = sorted(m for m in trial.AFTER_APPLY if m in sys.modules)\n"
            "other = sorted(m for m in sys.modules if m.startswith(('harness.agents.cli', "
            "'harness.substrates.libvirt', 'harness.substrates.hypervisor.host')))\n"
            "trial.import_after_apply(); trial.after_apply_imported()\n"
            "late = sorted(m for m in trial.AFTER_APPLY if m in sys.modules)\n"
            "print(early, other, late == sorted(trial.AFTER_APPLY))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=HARNESS.parent)
    assert out.stdout.strip() == "[] [] True", out.stdout + out.stderr[-2000:]


def test_a_bad_node_field_names_its_file_and_key(tmp_path, monkeypatch):
    (tmp_path / "moon").mkdir()
    (tmp_path / "moon" / "substrate.toml").write_text(
        '[substrates.moon]\nclass = "M"\nenv_types = ["moon"]\n'
        '[node_fields.gravity]\ntype = "float"\n')
    monkeypatch.setattr(substrates, "FOLDERS", tmp_path)
    substrates._registry.cache_clear()
    try:
        with pytest.raises(InputError, match=r"moon/substrate.toml: node_fields.gravity: type "
                                             r"must be one of \['bool', 'int', 'str'"):
            substrates.names()
    finally:
        monkeypatch.undo()
        substrates._registry.cache_clear()


def test_plug_in_command_groups_are_listed_without_importing_them():
    """`harness --help` lists a folder's command group from its declared summary (the same
    as the app's help) and imports the folder only when the group is called."""
    import importlib

    for name, (target, summary) in substrates.commands().items():
        module, _, attr = target.partition(":")
        assert summary == getattr(importlib.import_module(module), attr).info.help, name
    code = ("import sys\nfrom harness.cli.main import run\nrc = run(sys.argv[1:])\n"
            "print('IMPORTED', 'harness.substrates.baremetal' in sys.modules)")
    listed = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True,
                            text=True, cwd=HARNESS.parent).stdout
    assert "pool" in listed and "Pools of bare-metal machines" in listed
    assert "IMPORTED False" in listed
    called = subprocess.run([sys.executable, "-c", code, "pool", "--help"],
                            capture_output=True, text=True, cwd=HARNESS.parent).stdout
    assert "IMPORTED True" in called and "emulate" in called, called


def test_every_agent_class_is_registered_by_its_module():
    """An agent is one module or package under harness/agents/: each concrete class is
    found by name (the CLI agents: one class per spec of harness/agents/cli/specs.py)."""
    import harness.agents as pkg
    from harness.agents.cli.specs import SPECS
    defined = set(SPECS)
    for path in [*(HARNESS / "agents").glob("*.py"), *(HARNESS / "agents").glob("*/__init__.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and any(
                            getattr(t, "id", None) == "name" for t in stmt.targets):
                        defined.add(stmt.value.value)
    assert defined == set(pkg.names()) and len(defined) >= 9
    with pytest.raises(RegistryError, match="unknown agent 'moon'.*valid: aider"):
        pkg.get_agent("moon")


@pytest.mark.parametrize("name", ["libvirt", "baremetal", "cloudlab"])
def test_a_substrate_class_refuses_a_name_it_is_not_registered_as(name):
    """Constructors that take a registry name (`Substrate.check_name`) refuse another one,
    naming the class and the name it is registered as."""
    cls = substrates.substrate_class({"libvirt": "vm"}.get(name, name))
    with pytest.raises(InputError, match=f"{cls.__name__} is registered as {cls.name!r}, "
                                         "not 'lxc'"):
        cls(name="lxc")


def test_an_agent_is_its_module_alone(tmp_path, monkeypatch):
    """A new agent module (here a throwaway one on the package path) is found by name, and
    the keys it declares are what it is handed: nothing else to register."""
    import harness.agents as pkg
    from harness.agents.secrets import agent_secrets

    (tmp_path / "hx_throwaway_agent.py").write_text(
        "from harness.agents.base import Agent, AgentOutcome\n\n\n"
        "class Throwaway(Agent):\n    name = 'throwaway'\n    keys = ('HX_THROWAWAY_KEY',)\n\n"
        "    async def run(self, instruction, env, ctx):\n        return AgentOutcome()\n")
    monkeypatch.setattr(pkg, "__path__", [*pkg.__path__, str(tmp_path)])
    pkg._registry.cache_clear()
    try:
        assert pkg.get_agent("throwaway").name == "throwaway"
        assert agent_secrets("throwaway", {"HX_THROWAWAY_KEY": "k", "OTHER": "x"}) == {
            "HX_THROWAWAY_KEY": "k"}
    finally:
        pkg._registry.cache_clear()


THROWAWAY_FAULT = {
    "meta/fault.yml": """
        name: hx_cut
        layer: L3
        kind: role
        summary: Print the peers a node would cut off
        selectors: [named, bridge]
        plan: partition
        example:
          targets: {named: [node1]}
          inject_contains: ["PEERS=node1"]
        """,
    "meta/argument_specs.yml": """
        argument_specs:
          main:
            short_description: Print the peers a node would cut off.
            options:
              fi_l3_hx_cut_blocks:
                type: dict
                required: true
                description: Per host, the nodes it cuts off (set by the plan).
              fi_l3_hx_cut_note:
                type: str
                default: cut
                description: A word to print.
        """,
    "templates/inject.sh.j2": """
        {{ fi_lib }}
        hx_begin <<'HX_HEAL'
        {{ lookup('ansible.builtin.template', fi_role_dir ~ '/templates/heal.sh.j2') }}
        HX_HEAL
        PEERS={{ fi_l3_hx_cut_blocks[inventory_hostname] | join(',') | quote }}
        echo {{ fi_l3_hx_cut_note | quote }} "$PEERS"
        """,
    "templates/heal.sh.j2": "{{ fi_lib }}\nhx_healed\n",
    "templates/verify.sh.j2": "{{ fi_lib }}\nhx_report healed nothing\n",
}


def test_a_fault_is_its_folder_alone(tmp_path, monkeypatch, capsys):
    """A throwaway fault folder in another roles directory is listed, checked, planned by
    the plan it declares (per-host block lists), given the selectors it declares, and its
    example rendered through a FaultSession and real Ansible: no harness code names it."""
    import textwrap

    import harness.faults as faults
    from harness.cli.fault import list_faults
    from tests.unit.faultrender import render

    for rel, text in THROWAWAY_FAULT.items():
        path = tmp_path / "roles" / "fi_l3_hx_cut" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    monkeypatch.setattr(faults, "FOLDERS", tmp_path / "roles")
    list_faults(as_json=False)
    assert capsys.readouterr().out.startswith("hx_cut ")
    spec = faults.get_spec("hx_cut")
    with pytest.raises(InputError, match="does not take the one selector; it takes: named, "
                                         "bridge"):
        spec.check_selector("one")
    scripts = render({"cut": ("hx_cut", spec.example.targets, spec.example.params)},
                     tmp_path / "render")
    assert set(scripts) == {"cut.inject", "cut.heal", "cut.verify"}
    assert "\nPEERS=node1\necho cut \"$PEERS\"\n" in scripts["cut.inject"]
    assert "HX_FAULT=hx_cut" in scripts["cut.heal"]
