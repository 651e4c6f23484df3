"""`harness task new`: a task skeleton that validates as written."""

from __future__ import annotations

from pathlib import Path

from harness.errors import InputError
from harness.task import HOSTNAME_RE

_TOML = """version = "1.0"

[task]
name = "{name}"

[metadata]
difficulty = "medium"
category = "operations"
tags = []
layer = "L2"
fault_classes = []
lifecycle = "management"

[agent]
timeout_sec = 1800

[verifier]
timeout_sec = 300

[environment]
type = "{type}"
cpus = 1
memory_mb = {memory}
{nodes}"""

_TEST = """#!/bin/bash
# Verifier: write /logs/verifier/reward.json with scored checks (phase: functional,
# durability or cleanup) or a float to /logs/verifier/reward.txt.
ok=false
[ -f /srv/done ] && ok=true
cat > /logs/verifier/reward.json <<JSON
{{"checks": [{{"name": "marker file exists", "passed": $ok, "scored": true,
              "phase": "functional"}}]}}
JSON
"""

_SOLVE = """#!/bin/bash
set -euo pipefail
touch /srv/done
"""


def new_task(name: str, kind: str, parent: Path) -> Path:
    """Create `parent/name` with task.toml, instruction, environment, tests and solution."""
    if kind not in ("docker", "vm", "vm-cluster"):
        raise InputError(f"unknown type {kind!r}; valid: docker, vm, vm-cluster", key="--type")
    if not HOSTNAME_RE.match(name):
        raise InputError(f"task name {name!r} must be lowercase letters, digits and '-'")
    root = parent / name
    if root.exists():
        raise InputError("already exists; choose another name", file=str(root))
    nodes = ""
    if kind == "vm-cluster":
        nodes = "".join(f'\n[[environment.nodes]]\nname = "node{i}"\n' for i in range(3))
    (root / "environment").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "solution").mkdir()
    (root / "task.toml").write_text(_TOML.format(name=name, type=kind, nodes=nodes,
                                                 memory=512 if kind == "docker" else 1024))
    (root / "instruction.md").write_text("Create the file /srv/done.\n")
    if kind == "docker":
        (root / "environment" / "Dockerfile").write_text("FROM debian:bookworm\n")
    else:
        (root / "environment" / "setup.sh").write_text(
            "#!/bin/bash\n# Runs once per (base image, task); the result is cached as this "
            "task's image.\n# Install packages and write configuration here.\nset -euo pipefail\n")
        (root / "environment" / "bootstrap.sh").write_text(
            "#!/bin/bash\n# Runs on every node of every trial, after the nodes boot.\n")
    for rel, text in (("tests/test.sh", _TEST), ("solution/solve.sh", _SOLVE)):
        (root / rel).write_text(text)
        (root / rel).chmod(0o755)
    return root
