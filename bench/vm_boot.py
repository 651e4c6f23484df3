"""VM start overhead: harness time from apply to "agent may start", cold and from a snapshot,
vs a raw QEMU cold boot to SSH of the same image.

    python bench/vm_boot.py [--task tasks/<vm task>] [--nodes 1|3] [--runs 1]

Harness: real trials (nop agent) through Trial; the time from `phase.provision.start`
(render + terraform apply + node start + SSH wait + Ansible setup/bootstrap + agent setup)
to `phase.agent.start` in its events.jsonl, once with `HARNESS_VM_START=cold` and once
from the snapshot (restore of a booted template; a warm-up trial builds the template
first and its time is printed apart). Without --task a minimal task (no bootstrap; `vm`,
or `vm-cluster` with --nodes > 1) is generated, so the numbers are the harness's own cost.
Raw: the same kernel, initrd, overlay and seed disk booted by `qemu-system-x86_64` alone
(TCG unless KVM works here) with user networking, until SSH answers: one VM; with --nodes
N > 1 also N VMs started at once, until the last answers (the raw way to bring up the same
nodes). Prints all and the ratios (snapshot target <= 0.25 of raw).
"""

from __future__ import annotations

import argparse
import json
import os
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
from harness.substrates.libvirt.baseline import (  # noqa: E402
    raw_boot_to_ssh,
    raw_cluster_boot_to_ssh,
)
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


def minimal_task(root: Path, nodes: int = 1) -> Path:
    task = root / f"vm-boot-bench-{nodes}"
    (task / "tests").mkdir(parents=True)
    toml = MINIMAL_TOML
    if nodes > 1:
        toml = toml.replace('type = "vm"', 'type = "vm-cluster"') + "".join(
            f'\n[[environment.nodes]]\nname = "node{i}"\n' for i in range(nodes))
    (task / "task.toml").write_text(toml)
    (task / "instruction.md").write_text("Nothing to do: boot benchmark.\n")
    (task / "tests" / "test.sh").write_text(MINIMAL_TEST)
    (task / "tests" / "test.sh").chmod(0o755)
    return task


def harness_to_agent(task_dir: Path, work: Path, mode: str) -> tuple[float, dict]:
    """Seconds from provision start to agent start in one real nop trial, and its timings."""
    os.environ["HARNESS_VM_START"] = mode
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
    starts = [json.loads(p.read_text()) for p in sorted((trial.root / "vm").glob("start-*.json"))]
    if any(s.get("mode") != mode for s in starts):
        print(f"warning: asked for {mode} start, got {starts}", file=sys.stderr)
    return (at["phase.agent.start"] - at["phase.provision.start"],
            {k: v["seconds"] for k, v in rec.timings.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", type=Path, help="a vm task (default: a generated minimal one)")
    ap.add_argument("--nodes", type=int, default=1, help="nodes of the generated task")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="hx-vm-boot-") as tmp:
        work = Path(tmp)
        task_dir = args.task or minimal_task(work, args.nodes)
        warm, _ = harness_to_agent(task_dir, work, "snapshot")
        print(f"warm-up (builds the snapshot when missing): harness apply->agent {warm:.1f}s")
        accel = "kvm" if detect_domain_type() == "kvm" else "tcg"
        several = args.nodes > 1
        for n in range(args.runs):
            try:
                raw = raw_boot_to_ssh(work / f"raw{n}", accel=accel)
                raw_n = raw_cluster_boot_to_ssh(work / f"rawn{n}", args.nodes, accel=accel) \
                    if several else raw
            except SubstrateError as exc:
                raise SystemExit(exc.message) from exc
            cold, _ = harness_to_agent(task_dir, work, "cold")
            snap, timings = harness_to_agent(task_dir, work, "snapshot")
            rows.append((raw, raw_n, cold, snap))
            print(f"run {n + 1}: raw qemu boot->ssh 1 VM {raw:6.1f}s"
                  + (f" / {args.nodes} at once {raw_n:6.1f}s" if several else "")
                  + f"   harness cold {cold:6.1f}s (ratio {cold / raw_n:4.2f})   harness "
                  f"snapshot {snap:6.1f}s (ratio {snap / raw:4.2f} of 1 VM"
                  + (f", {snap / raw_n:4.2f} of {args.nodes}" if several else "")
                  + f")   snapshot timings {timings}")
    raw, raw_n, cold, snap = (sum(r[i] for r in rows) / len(rows) for i in range(4))
    print(f"\nmean over {len(rows)} runs, {args.nodes} node(s): raw 1 VM {raw:.1f}s"
          + (f", raw {args.nodes} VMs at once {raw_n:.1f}s" if several else "")
          + f"  cold {cold:.1f}s (ratio {cold / raw_n:.2f})  snapshot {snap:.1f}s (ratio "
          f"{snap / raw:.2f} of 1 VM"
          + (f", {snap / raw_n:.2f} of {args.nodes} VMs" if several else "")
          + "; target <= 0.25)")


if __name__ == "__main__":
    main()
