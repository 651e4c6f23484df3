"""Lifecycle buckets of checks: Functional, Durability, Cleanup (InfraBench appendix E).

A check's bucket is its `phase` when the verifier gives one (the better design: authors tag
each check), otherwise a keyword rule over its name, applied to the name's main clause:

1. Durability: what must hold *after or across* a restart or reboot ("... still passes
   after compute reboots", "fix survives restart"), or anything about a re-apply of
   configuration management ("re-apply", "puppet apply"). A bare state such as
   "recently_rebooted" describes the fix itself and stays Functional.
2. Cleanup: residue of the incident or of the repair: a residue / marker / leftover /
   stale / orphaned artefact, packaging leftovers (`*.dpkg-dist`, `.rpmnew`), and drifted
   settings: "drift", and the drifted-setting names the paper uses (MaxJobCount, a
   maintenance cgroup drop-in).
3. Functional: everything else.

The main clause is the name without a contrast clause (", not the ...", "rather than ...",
"instead of ..."): "Origin uses the rebuilt host key, not the pre-incident stale key" is
about which key is in use, so "stale" there does not make it Cleanup. Snake_case names are
read with spaces. Durability is tested first, so "workload broke after compute reboot
(drop-in came back)" is Durability even though it mentions a drop-in.
"""

from __future__ import annotations

import re

import polars as pl

BUCKETS = ("functional", "durability", "cleanup")
LABELS = {"functional": "Functional", "durability": "Durability", "cleanup": "Cleanup"}

_CONTRAST = re.compile(r",\s*(but\s+)?not\b.*$|\b(rather than|instead of)\b.*$")
_PERSIST = r"(after|across|survives?|surviving|persists?|persistent|through|following|post)"
_DURABILITY = re.compile(
    rf"\b{_PERSIST}\b.*\b(re-?start|reboot|power[- ]cycle)"
    rf"|\b(re-?start|reboot|power[- ]cycle)\w*\b.*\b{_PERSIST}\b"
    r"|\bre-?appl(y|ied|ies|ication)\b|\bpuppet (apply|run|agent)\b")
_CLEANUP = re.compile(
    r"residue|residual|marker|leftover|left[- ]over|left behind|orphan|\bstale\b|drift"
    r"|dpkg-(dist|old|new)|\.rpm(new|save)|maxjobcount|drop-?in\b")


def rule_bucket(name: str) -> str:
    """The keyword-rule bucket of a check name (see the module docstring)."""
    text = _CONTRAST.sub("", name.lower().replace("_", " "))
    if _DURABILITY.search(text):
        return "durability"
    if _CLEANUP.search(text):
        return "cleanup"
    return "functional"


def bucket(name: str, phase: str | None = None) -> str:
    """A check's bucket: its declared `phase` if valid, else the keyword rule."""
    if phase and phase.lower() in BUCKETS:
        return phase.lower()
    return rule_bucket(name)


def with_buckets(checks: pl.DataFrame) -> pl.DataFrame:
    """Add a `bucket` column; the rule runs once per distinct name, then is joined back."""
    names = checks.select("name").unique()
    names = names.with_columns(
        pl.Series("rule", [rule_bucket(n) for n in names["name"]], dtype=pl.String))
    phase = pl.col("phase").str.to_lowercase()
    return (checks.join(names, on="name", how="left")
            .with_columns(bucket=pl.when(phase.is_in(BUCKETS)).then(phase)
                          .otherwise(pl.col("rule")))
            .drop("rule"))


def bucket_rates(checks: pl.DataFrame, by: tuple[str, ...] = ()) -> pl.DataFrame:
    """Pass rate per bucket (and per `by` columns): `passed`, `total`, `rate` in percent.

    Every check outcome counts, scored or not: a diagnostic that fails after a reboot is a
    durability failure even when it adds no partial credit.
    """
    if "bucket" not in checks.columns:
        checks = with_buckets(checks)
    order = pl.col("bucket").replace_strict({b: i for i, b in enumerate(BUCKETS)},
                                            return_dtype=pl.Int8)
    return (checks.group_by([*by, "bucket"])
            .agg(passed=pl.col("passed").sum().cast(pl.Int64), total=pl.len().cast(pl.Int64))
            .with_columns(rate=100 * pl.col("passed") / pl.col("total"))
            .sort([*by, order]))
