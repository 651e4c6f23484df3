"""VM boot overhead: harness time from apply to "agent may start" vs a raw QEMU boot to SSH.

    python bench/vm_boot.py [--task tasks/<vm task>] [--runs 1]

Harness: one real trial (nop agent) through Trial; the time from `phase.provision.start`
(render + terraform apply + SSH wait + Ansible setup/bootstrap + agent setup) to
`phase.agent.start` in its events.jsonl. Without --task a minimal vm task (no bootstrap)
is generated, so the number is the harness's own cost. Raw: the same kernel, initrd,
overlay and seed disk booted by `qemu-system-x86_64` alone (TCG unless KVM works here)
with user networking, until SSH answers. Runs one VM at a time; prints both and the ratio
(target <= 1.3).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.agents import get_agent  # noqa: E402
from harness.errors import SubstrateError  # noqa: E402
from harness.paths import RunPaths  # noqa: E402
from harness.substrates import get_substrate  # noqa: E402
from harness.substrates.libvirt import detect_domain_type  # noqa: E402
from harness.substrates.libvirt.baseline import raw_boot_to_ssh  # noqa: E402
from harness.task import load_task  # noqa: E402
from harness.trial import Trial, make_trial_id, run_async  # noqa: E402

MINIMAL_TOML = """version = "1.0"
[task]
name = "vm-boot-bench"
[agent]
timeout_sec = 60
[verifier]
timeout_sec = 60
[environment]
type = "vm"
cpus = 1
memory_mb = 1024
"""
MINIMAL_TEST = "#!/bin/bash\necho 1.0 > /logs/verifier/reward.txt\n"


def minimal_task(root: Path) -> Path:
    task = root / "vm-boot-bench"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text(MINIMAL_TOML)
    (task / "instruction.md").write_text("Nothing to do: boot benchmark.\n")
    (task / "tests" / "test.sh").write_text(MINIMAL_TEST)
    (task / "tests" / "test.sh").chmod(0o755)
    return task


def harness_to_agent(task_dir: Path, work: Path) -> tuple[float, dict]:
    """Seconds from provision start to agent start in one real nop trial, and its timings."""
    task = load_task(task_dir)
    trial_id = make_trial_id(task.name, "nop", 1)
    trial = Trial(task=task, agent=get_agent("nop"), substrate=get_substrate(task.env.type),
                  root=RunPaths(work).trial(trial_id).root, trial_id=trial_id,
                  campaign="vm-bench")
    rec = run_async(trial.run())
    events = [json.loads(line) for line in trial.paths.events.read_text().splitlines()]
    at = {e["name"]: e["elapsed_sec"] for e in events}
    if "phase.agent.start" not in at:
        raise SystemExit(f"trial {trial_id} never opened the agent window: {rec.error}")
    if rec.leaks:
        print(f"warning: leaks after the trial: {rec.leaks}", file=sys.stderr)
    return (at["phase.agent.start"] - at["phase.provision.start"],
            {k: v["seconds"] for k, v in rec.timings.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", type=Path, help="a vm task (default: a generated minimal one)")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="hx-vm-boot-") as tmp:
        work = Path(tmp)
        task_dir = args.task or minimal_task(work)
        for n in range(args.runs):
            try:
                raw = raw_boot_to_ssh(work / f"raw{n}", accel="kvm" if detect_domain_type()
                                      == "kvm" else "tcg")
            except SubstrateError as exc:
                raise SystemExit(exc.message) from exc
            harness, timings = harness_to_agent(task_dir, work)
            rows.append((raw, harness))
            print(f"run {n + 1}: raw qemu boot->ssh {raw:6.1f}s   harness apply->agent "
                  f"{harness:6.1f}s   ratio {harness / raw:4.2f}   timings {timings}")
    raw = sum(r for r, _ in rows) / len(rows)
    harness = sum(h for _, h in rows) / len(rows)
    print(f"\nmean: raw {raw:.1f}s  harness {harness:.1f}s  ratio {harness / raw:.2f} "
          f"(target <= 1.30)")


if __name__ == "__main__":
    main()
