"""CLI: `harness campaign plan | apply | status | destroy | collect`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

campaign_app = typer.Typer(help="Plan and apply campaigns: tasks x agents x attempts.",
                           no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(campaign_app, name="campaign")


@campaign_app.command("plan")
def plan(
    file: Path = typer.Argument(..., help="Campaign YAML file."),
    out: Path = typer.Option(None, "--out", "-o", help="Run dir (default runs/<name>)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Expand, validate, preflight and render every trial; create no resource."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from harness.campaign.plan import plan_campaign
    from harness.redact import printable

    summary = plan_campaign(file, out)
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    con = Console()
    con.print(f"campaign [bold]{escape(printable(summary['campaign']))}[/bold]: "
              f"{summary['trials']} trials -> {escape(printable(summary['run_dir']))}",
              emoji=False)
    for title in ("by_task", "by_agent", "by_substrate", "states"):
        table = Table(title.replace("by_", ""), "trials")
        for k, v in sorted(summary[title].items()):
            table.add_row(Text(printable(k)), str(v))
        con.print(table)
    c, p = summary["concurrency"], summary["peak"]
    con.print(f"concurrency {c['total']} (per substrate {c['per_substrate']}); peak "
              f"{p['cpus']} cpus, {p['memory_mb']} MiB")


@campaign_app.command("apply")
def apply(
    target: Path = typer.Argument(..., help="Campaign file or run dir."),
    out: Path = typer.Option(None, "--out", "-o", help="Run dir for a file."),
    concurrency: int = typer.Option(None, "--concurrency", "-j", help="Total parallel trials."),
    force: bool = typer.Option(False, "--force", help="Re-run finished trials that changed."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    shard: str = typer.Option(None, "--shard", help="K/N: run a deterministic 1/N of the "
                              "trials (N controllers share one campaign); auto or auto/N: K (and "
                              "N) from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX."),
    executor: str = typer.Option("local", "--executor", help="local (this process) or ray "
                                 "(one Ray task per trial on a Ray cluster's worker nodes; "
                                 "extra `ray`)."),
    address: str = typer.Option(None, "--address", help="With --executor ray: the cluster's "
                                "host:port (default $RAY_ADDRESS, else the local cluster)."),
) -> None:
    """Run every trial without a final result; resume after a crash; Ctrl-C stops cleanly."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.text import Text

    from harness.campaign.ops import apply_campaign
    from harness.redact import printable

    con = Console(stderr=True)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        console=con, transient=True, disable=as_json)
    overall = progress.add_task("trials", total=None)
    lines: dict[str, int] = {}

    def on_change(state) -> None:
        statuses = escape(printable(dict(sorted(state.statuses.items()))))
        progress.update(overall, total=state.total, completed=state.done,
                        description=f"trials {statuses}")
        for trial_id, phase in state.running.items():
            if trial_id not in lines:
                lines[trial_id] = progress.add_task("", total=None)
            progress.update(lines[trial_id],
                            description=escape(printable(f"  {trial_id}: {phase}")))
        for trial_id in [t for t in lines if t not in state.running]:
            progress.remove_task(lines.pop(trial_id))

    with progress:
        summary = apply_campaign(target, out, concurrency, force, on_change,
                                 log=(lambda m: None) if as_json else
                                 (lambda m: con.print(Text(printable(m)))), shard=shard,
                                 executor=executor, address=address)
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        con.print(Text(printable(f"ran {summary['ran']} (kept {summary['kept']}): "
                                 f"{summary['statuses']}; results in "
                                 f"{summary['run_dir']}/results")))
    if summary["cancelled"]:
        raise typer.Exit(130)
    if summary.get("crashed"):
        con.print(Text(printable(f"{len(summary['crashed'])} trial(s) ended by a harness "
                                 "error (HarnessCrash, see their result.json): "
                                 f"{', '.join(summary['crashed'])}"), style="red"))
        raise typer.Exit(3)


@campaign_app.command("status")
def status(run_dir: Path = typer.Argument(..., help="Campaign run dir."),
           as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Counts by status, running trials and their phase, ETA."""
    from harness.campaign.status import campaign_status
    from harness.redact import printable

    st = campaign_status(run_dir)
    if as_json:
        print(json.dumps(st, indent=2))
        return
    # statuses come from the trials' result.json files: shown, never acted on
    print(printable(f"{st['campaign']}: {st['state']}; {st['total']} trials {st['states']}"))
    for trial_id, phase in st["running"].items():
        print(printable(f"  running {trial_id}: {phase}"))
    for trial_id in st["interrupted"]:
        print(printable(f"  interrupted {trial_id} (its apply is gone; apply again re-runs "
                        "it)"))
    for node, info in sorted((st.get("nodes") or {}).items()):
        print(printable(f"  node {node}: {len(info['running'])} running, done "
                        f"{dict(sorted(info['done'].items()))}"))
    if st["eta_sec"] is not None:
        print(printable(f"  eta ~{st['eta_sec']} s"))


@campaign_app.command("node-resources")
def node_resources() -> None:
    """Print the Ray resources this node offers (its hosts file's trial slots), as JSON
    for `ray start --resources`."""
    from harness.campaign.executors.ray.node import node_resources as offer

    print(json.dumps(offer()))


@campaign_app.command("destroy")
def destroy(run_dir: Path = typer.Argument(..., help="Campaign run dir."),
            as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Remove everything the campaign owns (idempotent)."""
    from harness.campaign.ops import destroy_campaign
    from harness.redact import printable

    rep = destroy_campaign(run_dir)
    if as_json:
        print(json.dumps(rep, indent=2))
        return
    n = sum(len(v) for v in rep["swept"].values())
    print(f"{printable(rep['campaign'])}: destroyed {len(rep['terraform_destroyed'])} trial "
          f"state(s), swept {n} leftover(s)")


@campaign_app.command("collect")
def collect(run_dir: Path = typer.Argument(..., help="Campaign run dir."),
            merge: list[Path] = typer.Option(None, "--merge", help="Another shard's run dir "
                                             "(repeatable): copy in its finished trials.")
            ) -> None:
    """(Re)write results/trials.parquet and results/checks.parquet."""
    from harness.campaign.ops import collect_results

    rows = collect_results(run_dir, merge)
    if merge:
        print(f"merged {rows['merged']} trial(s) from {len(merge)} run dir(s)")
    print(f"results/trials.parquet: {rows['trials']} rows, results/checks.parquet: "
          f"{rows['checks']} rows")
