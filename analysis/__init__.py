"""Analysis of trial records with Polars: metrics, check weights, lifecycle buckets, reports.

The pipeline reads only `result.json` files (`analysis.load`), normalises them into trial,
check and gate frames, and computes everything from those frames:

- `analysis.metrics`: leaderboard (score ± SEM, Attempt Pass@tau, Best-of-N@tau, cost, risk);
- `analysis.weights`: difficulty-weighted checks and their frozen `tests/weights.json`;
- `analysis.lifecycle`: Functional / Durability / Cleanup buckets of checks;
- `analysis.pareto`: the cost vs reliability frontier;
- `analysis.pipeline.analyze`: all of the above from run directories in one call;
- `analysis.render` and `analysis.report`: terminal, Markdown, JSON, CSV, Parquet, HTML.
"""

from analysis.pipeline import Analysis, analyze, derive_sidecars

__all__ = ["Analysis", "analyze", "derive_sidecars"]
