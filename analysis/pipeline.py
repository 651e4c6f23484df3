"""From run directories to every table the outputs show: the one call the CLI makes.

`analyze` loads the records, settles the task set and the weights, re-scores the trials
and computes the leaderboard and the breakdowns; `derive_sidecars` freezes new weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from analysis import lifecycle, metrics, weights
from analysis.load import Records, load
from harness.errors import InputError


@dataclass
class Analysis:
    """Everything the renderers need; frames are plain Polars frames."""

    records: Records
    tasks: list[str]
    taus: tuple[float, ...]
    weights_mode: str
    weights: pl.DataFrame
    trials: pl.DataFrame
    checks: pl.DataFrame
    leaderboard: pl.DataFrame
    warnings: list[str] = field(default_factory=list)

    @property
    def layers(self) -> dict[str, str]:
        """Each task's layer, as recorded (first non-null), `?` when unknown."""
        rows = (self.records.trials.group_by("task")
                .agg(pl.col("layer").drop_nulls().first()).iter_rows())
        known = {task: layer or "?" for task, layer in rows}
        return {task: known.get(task, "?") for task in self.tasks}

    def task_means(self) -> pl.DataFrame:
        """The (config, task) grid of per-task mean scores behind the heatmap."""
        return metrics.task_means(self.trials, self.tasks)

    def buckets(self, by: tuple[str, ...] = ()) -> pl.DataFrame:
        """Lifecycle bucket pass rates, overall or per `by` (e.g. `("config",)`)."""
        return lifecycle.bucket_rates(self.checks, by)

    def breakdown(self, by: str) -> pl.DataFrame:
        """Check pass rates per configuration and `layer`, `gate`, `task` or `bucket`."""
        checks = self.checks
        if by == "layer":
            layers = self.layers
            layer_of = pl.DataFrame({"task": list(layers), "layer": list(layers.values())})
            checks = checks.join(layer_of, on="task", how="left")
        return metrics.pass_rates(checks, ["config", by])

    def check_table(self) -> pl.DataFrame:
        """Per check: task, gate, name, bucket, scored, p_c (population), w_c (in use)."""
        overall = (self.checks.group_by("task", "gate", "name")
                   .agg(bucket=pl.col("bucket").first(), scored=pl.col("scored").any(),
                        passed=pl.col("passed").sum().cast(pl.Int64),
                        total=pl.len().cast(pl.Int64))
                   .with_columns(p=pl.col("passed") / pl.col("total")))
        used = self.weights.select("task", "gate", "name", "w")
        weighted = pl.col("task").is_in(used["task"].unique().implode())
        fallback = pl.when(weighted).then(weights.MAX_WEIGHT).otherwise(1.0)
        return (overall.join(used, on=["task", "gate", "name"], how="left")
                .with_columns(w=pl.when(pl.col("scored")).then(pl.col("w").fill_null(fallback)))
                .sort("task", "gate", "name"))


def parse_taus(values: list[float] | None) -> tuple[float, ...]:
    """The thresholds to report; each must lie in (0, 1]."""
    taus = tuple(dict.fromkeys(values)) if values else metrics.DEFAULT_TAUS
    for tau in taus:
        if not 0 < tau <= 1:
            raise InputError(f"tau {tau:g} is outside (0, 1]", key="--tau")
    return taus


def analyze(run_dirs: list[Path], tasks_dir: Path | None = None, weights_mode: str | None = None,
            taus: list[float] | None = None) -> Analysis:
    """Load `run_dirs` and compute the leaderboard under `weights_mode`.

    `weights_mode` is `frozen` (sidecars), `derive` (from this population, nothing written),
    `uniform` (the recorded rewards) or None: frozen when any sidecar exists, else uniform.
    """
    if weights_mode is not None and weights_mode not in weights.MODES:
        raise InputError(f"unknown weights mode {weights_mode!r}; valid: "
                         f"{', '.join(weights.MODES)}", key="--weights")
    taus = parse_taus(taus)
    records = load(run_dirs)
    warnings = records.warnings
    task_dirs = weights.find_task_dirs(tasks_dir, warnings) if tasks_dir else {}
    tasks = sorted(set(records.tasks) | set(task_dirs))
    paths = dict(records.trials.group_by("task")
                 .agg(pl.col("task_path").drop_nulls().first()).iter_rows())
    sidecars = weights.sidecar_dirs(tasks, task_dirs, paths)
    mode = weights_mode or ("frozen" if sidecars else "uniform")
    population = weights.derive(records.trials, records.checks)
    if mode == "frozen":
        if not sidecars:
            raise InputError("no weights sidecar (tests/weights.json) found for these tasks; "
                             "run `harness weights derive RUN_DIR --tasks DIR` or use "
                             "--weights derive|uniform", key="--weights")
        used = weights.read_sidecars(sidecars, warnings)
        unweighted = sorted(set(population["task"]) - set(used["task"]))
        if unweighted:
            warnings.append("no weights sidecar for " + ", ".join(unweighted)
                            + "; their recorded rewards are used")
    elif mode == "derive":
        used = population
    else:
        used = population.clear()
    trials, missing = weights.apply(records.trials, records.checks, used)
    for task, gate, name in missing.iter_rows():
        warnings.append(f"{sidecars.get(task, task)}: check {name!r} (gate {gate}) has no "
                        f"frozen weight; given the maximum {weights.MAX_WEIGHT}")
    checks = lifecycle.with_buckets(records.checks)
    shown = used if mode != "uniform" else population.with_columns(w=pl.lit(1.0))
    shown = shown.drop("pass_rate", "attempts").join(
        population.select("task", "gate", "name", "pass_rate", "attempts"),
        on=["task", "gate", "name"], how="left")
    board = metrics.leaderboard(trials, tasks, taus)
    return Analysis(records, tasks, taus, mode, shown, trials, checks, board, warnings)


def derive_sidecars(run_dirs: list[Path], tasks_dir: Path) -> tuple[list[dict], list[str]]:
    """Derive weights from `run_dirs` and freeze them next to each task under `tasks_dir`.

    Returns one summary per sidecar written (task, version, population, checks, path) and
    the warnings (tasks with scored checks but no task dir are skipped).
    """
    records = load(run_dirs)
    warnings = records.warnings
    task_dirs = weights.find_task_dirs(tasks_dir, warnings)
    if not task_dirs:
        raise InputError("no task.toml found", file=str(tasks_dir), key="--tasks")
    derived = weights.derive(records.trials, records.checks)
    population = records.trials.filter(~pl.col("status").is_in(metrics.NOT_ATTEMPTS))
    written = []
    for task in sorted(set(derived["task"])):
        if task not in task_dirs:
            warnings.append(f"task {task!r} has scored checks but no task dir under "
                            f"{tasks_dir}; no sidecar written")
            continue
        of_task = population.filter(pl.col("task") == task)
        doc = weights.write_sidecar(task_dirs[task], task, derived.filter(pl.col("task") == task),
                                    of_task.height, of_task["config"].unique().to_list())
        written.append({"task": task, "version": doc["version"],
                        "population": doc["population"]["trials"], "checks": len(doc["checks"]),
                        "path": str(task_dirs[task] / weights.SIDECAR)})
    return written, warnings
