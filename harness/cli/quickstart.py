"""CLI: `harness quickstart` - run the seed docker tasks with oracle and nop."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("quickstart")(quickstart)


def quickstart(
    tasks_dir: Path = typer.Option(None, "--tasks", help="Tasks dir (default: the seed suite)."),
    out: Path = typer.Option(Path("runs"), "--out", "-o", help="Run directory root."),
    concurrency: int = typer.Option(2, "--concurrency", "-j", min=1, help="Parallel trials."),
) -> None:
    """Run every seed docker task with the oracle and nop agents and print a table."""
    from rich.console import Console
    from rich.table import Table

    from harness.campaign.quickstart import quickstart as run_quickstart
    from harness.paths import SEED_TASKS

    con = Console()
    running: dict[str, str] = {}
    with con.status("starting") as status:
        def on_phase(trial_id: str, phase: str) -> None:
            running[trial_id] = phase
            status.update(" | ".join(f"{t}: {p}" for t, p in running.items()
                                     if p != "teardown")[-150:] or "tearing down")

        records = run_quickstart(tasks_dir or SEED_TASKS, out, concurrency=concurrency,
                                 on_phase=on_phase)
    table = Table("task", "agent", "status", "reward", "checks", "seconds", title="quickstart")
    for r in sorted(records, key=lambda r: (r.task.name, r.agent.name)):
        passed = sum(c["passed"] for c in r.checks)
        secs = sum(v["seconds"] for v in r.timings.values())
        color = {"passed": "green", "failed": "yellow"}.get(r.status, "red")
        table.add_row(r.task.name, r.agent.name, f"[{color}]{r.status}[/]",
                      "-" if r.reward is None else f"{r.reward:.2f}",
                      f"{passed}/{len(r.checks)}", f"{secs:.1f}")
    con.print(table)
    con.print(f"results under {(out / 'quickstart').resolve()}; leaderboard: "
              f"harness leaderboard {out / 'quickstart'}")
