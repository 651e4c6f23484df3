"""CLI: `harness run` - one trial."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def run(
    task_dir: Path = typer.Argument(..., help="Task directory (holds task.toml)."),
    agent: str = typer.Option("oracle", "--agent", "-a", help="Agent name (oracle, nop, ...)."),
    substrate: str = typer.Option(None, "--substrate", "-s",
                                  help="Substrate (default: the task's environment type)."),
    model: str = typer.Option(None, "--model", "-m", help="Model for model-backed agents."),
    keep: bool = typer.Option(False, "--keep", help="Leave the environment up afterwards."),
    out: Path = typer.Option(Path("runs"), "--out", "-o", help="Run directory root."),
    retries: int = typer.Option(0, "--retries", min=0, help="Pre-window retries."),
    as_json: bool = typer.Option(False, "--json", help="Print only the trial record as JSON."),
    agent_kwarg: list[str] = typer.Option([], "--agent-kwarg", "-k",
                                          help="KEY=VALUE for the agent (repeatable), e.g. "
                                               "commands=replay.yaml, base_url=..."),
    budget: list[str] = typer.Option([], "--budget", "-b",
                                      help="KEY=VALUE limit of the model gateway for this trial "
                                           "(repeatable): requests, input_tokens, "
                                           "output_tokens, cost_usd, streams."),
) -> None:
    """Run one trial of AGENT on TASK_DIR; exit 0 whenever the trial ran."""
    from harness.tools.ansible import warm_playbook_server

    warm_playbook_server()  # Ansible's start-up beside this process's own, first thing

    from rich.console import Console
    from rich.markup import escape
    from rich.text import Text

    from harness.redact import printable
    from harness.trial.adhoc import run_one

    err = Console(stderr=True)
    status = None if as_json else err.status("starting")

    def on_phase(trial_id: str, phase: str) -> None:
        if status is not None:
            status.update(f"[bold]{escape(printable(trial_id))}[/bold]: "
                          f"{escape(printable(phase))}")

    def show(text: str, style: str = "") -> Text:
        """Text a node may have written (check names, error messages, verifier output):
        control characters made visible, markup not interpreted."""
        return Text(printable(text), style=style)

    from harness.errors import HarnessError

    if status is not None:
        status.start()
    try:
        kwargs = _parse_kwargs(agent_kwarg)
        record = run_one(task_dir, agent, substrate, out, keep, model, retries, on_phase,
                         log=lambda m: err.print(show(m)) if not as_json else None,
                         agent_kwargs=kwargs, budget=budget)
    except HarnessError as exc:
        if not as_json:
            raise
        print(json.dumps(refusal(exc, task_dir, agent), indent=2))
        raise typer.Exit(exc.exit_code) from None
    finally:
        if status is not None:
            status.stop()
    if as_json:
        print(json.dumps(record.model_dump(mode="json"), indent=2))
        _exit_for(record)
        return
    color = {"passed": "green", "failed": "yellow"}.get(record.status, "red")
    err.print(Text.assemble(show(record.status, color), f" reward={record.reward} trial=",
                            show(record.trial_id)))
    for c in record.checks:
        mark = Text("PASS", "green") if c.get("passed") else Text("FAIL", "red")
        err.print(Text.assemble("  ", mark, " ", show(c.get("name", "")),
                                "" if c.get("scored", True) else " (unscored)"))
    for warning in record.warnings:
        err.print(Text.assemble("  ", Text("warning:", "yellow"), " ", show(warning)))
    if record.error:
        message = printable(record.error.get("message", ""))[:300]
        err.print(Text(f"  error: {message}"))
        for line in printable(record.error.get("tail") or "").splitlines()[-8:]:
            err.print(Text(f"    | {line}"))
    phases = ", ".join(f"{k} {v['seconds']:.1f}s" for k, v in record.timings.items())
    err.print(show(f"  timings: {phases}"))
    from harness.paths import RunPaths
    from harness.trial.adhoc import ADHOC

    paths = RunPaths(Path(out).resolve() / ADHOC).trial(record.trial_id)
    err.print(show(f"  result: {paths.result}"))
    if keep and paths.keep_info.exists():
        err.print(show(paths.keep_info.read_text()))
    _exit_for(record)


def refusal(exc, task_dir: Path, agent: str) -> dict:
    """The one JSON object `run --json` prints when no trial ran (a refused task, a host
    that is not ready, bad arguments): `status` refused (the input) or error, the error's
    type and message, each problem of a refused task."""
    from harness.errors import InputError
    from harness.redact import printable

    problems = getattr(exc, "problems", None) or [exc.message]
    return {"status": "refused" if isinstance(exc, InputError) else "error", "reward": None,
            "task": {"path": str(task_dir)}, "agent": {"name": agent}, "trial_id": None,
            "error": {"type": type(exc).__name__, "message": printable(exc.message)[:4000],
                      "problems": [printable(p) for p in problems]}}


def _parse_kwargs(items: list[str]) -> dict[str, str]:
    from harness.errors import InputError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"expected KEY=VALUE, got {item!r}", key="--agent-kwarg")
        out[key] = value
    return out


def _exit_for(record) -> None:
    """Exit 0 whenever the trial ran; a trial that never reached its window is an error:
    2 when the input was at fault (a Dockerfile that does not build), else 3; 130 when it
    was interrupted (SIGINT/SIGTERM: torn down and recorded as cancelled)."""
    if record.status == "cancelled":
        raise typer.Exit(130)
    if record.status == "setup_error":
        raise typer.Exit(2 if record.error and record.error.get("type") == "InputError" else 3)
