"""Pareto frontier of cost against reliability (Attempt Pass@0.5 by default).

A configuration is on the frontier when no configuration that costs at most as much is at
least as reliable: cheaper-and-better points dominate. Configurations without a recorded
cost cannot be placed and are never on the frontier.
"""

from __future__ import annotations

import polars as pl


def frontier(df: pl.DataFrame, cost: str = "cost_usd", value: str = "pass@0.5") -> pl.Series:
    """A boolean Series aligned with `df`: is each row on the cost / `value` frontier?"""
    ranked = (df.select(pl.col(cost).alias("_cost"), pl.col(value).alias("_value"))
              .with_row_index("_row")
              .filter(pl.col("_cost").is_not_null() & pl.col("_value").is_not_null())
              .sort(["_cost", "_value"], descending=[False, True])
              .with_columns(_best=pl.col("_value").cum_max().shift(1)))
    on = ranked.filter(pl.col("_best").is_null() | (pl.col("_value") > pl.col("_best")))
    rows = set(on["_row"].to_list())
    return pl.Series("pareto", [i in rows for i in range(df.height)], dtype=pl.Boolean)


def frontier_points(df: pl.DataFrame, cost: str = "cost_usd",
                    value: str = "pass@0.5") -> pl.DataFrame:
    """The frontier rows of `df`, cheapest first (the staircase a chart draws)."""
    return df.filter(frontier(df, cost, value)).sort(cost)
