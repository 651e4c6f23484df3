"""What the verifier calls tampering, before test.sh and while it runs."""

from __future__ import annotations

import subprocess

from harness.trial import integrity as integ


def manifest(files: dict[str, str], hashes: dict[str, str] | None = None) -> str:
    lines = [f"F {p}|{meta}" for p, meta in files.items()]
    lines += [f"H {h}  {p}" for p, h in (hashes or {}).items()]
    lines += ["S cat", "S grep", "S bash"]
    return "\n".join(lines) + "\n"


BEFORE = {"/usr/bin/cat": "100|1|1|10|755|0", "/usr/bin/grep": "200|1|1|11|755|0"}


def test_a_program_swapped_while_test_sh_ran_is_found_even_if_swapped_back():
    before = integ.parse_manifest(manifest(BEFORE, {"/usr/bin/bash": "aa"}))
    swapped_back = dict(BEFORE, **{"/usr/bin/cat": "100|1|5|99|755|0"})  # new ctime, inode
    found = integ.changed_during(before, manifest(swapped_back, {"/usr/bin/bash": "aa"}))
    assert found == ["M /usr/bin/cat (while test.sh ran)"]
    found = integ.changed_during(before, manifest(BEFORE, {"/usr/bin/bash": "bb"}))
    assert found == ["M /usr/bin/bash (while test.sh ran)"]
    assert integ.changed_during(before, manifest({"/usr/bin/cat": BEFORE["/usr/bin/cat"]},
                                                 {"/usr/bin/bash": "aa"})) == \
        ["D /usr/bin/grep (while test.sh ran)"]


def test_what_a_verifier_installs_is_not_tampering_unless_it_shadows_a_command():
    before = integ.parse_manifest(manifest(BEFORE))
    installed = dict(BEFORE, **{"/usr/bin/curl": "9|1|1|50|755|0",
                                "/usr/local/bin/pytest": "9|1|1|51|755|0",
                                "/usr/lib/python3/__pycache__/x.pyc": "1|1|1|52|644|0"})
    assert integ.changed_during(before, manifest(installed)) == []
    shadow = dict(BEFORE, **{"/usr/local/bin/grep": "9|1|1|53|755|0"})
    assert integ.changed_during(before, manifest(shadow)) == \
        ["A /usr/local/bin/grep (shadows a system command) (while test.sh ran)"]


def test_the_manifest_script_runs_and_parses_on_a_real_shell():
    """The script the toolbox runs, on this machine's sh: two runs in a row agree."""
    runs = [subprocess.run(["sh", "-c", integ.manifest_script()], capture_output=True,
                           text=True, check=True).stdout for _ in range(2)]
    first = integ.parse_manifest(runs[0])
    assert "/usr/bin/bash" in first["hashes"] and "/usr/bin/env" in first["files"]
    assert "bash" in first["system"]
    assert integ.changed_during(first, runs[1]) == []
