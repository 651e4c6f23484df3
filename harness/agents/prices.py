"""Model prices (USD per million tokens) and the cost of a run's token usage.

The table holds list prices the providers published for their APIs (standard tier, text,
no batch discount), as of late 2025; prices change, so check them before comparing costs
and override them per run with the agents' `prices` kwarg, e.g.
`prices={"my-model": {"input": 0.5, "output": 1.5, "cache": 0.05}}`. `cache` is the price
of a cached prompt token (a cache read); where a provider bills cache writes extra, that
surcharge is not modelled. A model is matched by its exact name, else by the longest
table key it starts with (`gpt-4o-2024-08-06` -> `gpt-4o`), after dropping a
`provider/` prefix. An unknown model has no cost (None), never a guessed one.

Token convention everywhere in the harness: `input` counts every prompt token, cached
ones included; `cache` is the part of `input` read from the provider's cache.
"""

from __future__ import annotations

from collections.abc import Mapping

Price = Mapping[str, float]

PRICES: dict[str, dict[str, float]] = {
    "gpt-4o": {"input": 2.50, "output": 10.00, "cache": 1.25},
    "gpt-4o-mini": {"input": 0.15, "output": 0.60, "cache": 0.075},
    "gpt-4.1": {"input": 2.00, "output": 8.00, "cache": 0.50},
    "gpt-4.1-mini": {"input": 0.40, "output": 1.60, "cache": 0.10},
    "gpt-4.1-nano": {"input": 0.10, "output": 0.40, "cache": 0.025},
    "gpt-5": {"input": 1.25, "output": 10.00, "cache": 0.125},
    "gpt-5-mini": {"input": 0.25, "output": 2.00, "cache": 0.025},
    "gpt-5-nano": {"input": 0.05, "output": 0.40, "cache": 0.005},
    "o3": {"input": 2.00, "output": 8.00, "cache": 0.50},
    "o3-mini": {"input": 1.10, "output": 4.40, "cache": 0.55},
    "o4-mini": {"input": 1.10, "output": 4.40, "cache": 0.275},
    "claude-opus-4": {"input": 15.00, "output": 75.00, "cache": 1.50},
    "claude-opus-4-5": {"input": 5.00, "output": 25.00, "cache": 0.50},
    "claude-haiku-4-5": {"input": 1.00, "output": 5.00, "cache": 0.10},
    "claude-sonnet-4": {"input": 3.00, "output": 15.00, "cache": 0.30},
    "claude-3-7-sonnet": {"input": 3.00, "output": 15.00, "cache": 0.30},
    "claude-3-5-haiku": {"input": 0.80, "output": 4.00, "cache": 0.08},
    "gemini-2.5-pro": {"input": 1.25, "output": 10.00, "cache": 0.31},
    "gemini-2.5-flash": {"input": 0.30, "output": 2.50, "cache": 0.075},
    "gemini-2.5-flash-lite": {"input": 0.10, "output": 0.40, "cache": 0.025},
}


def price_for(model: str | None, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price entry of `model` (overrides first), or None when unknown."""
    if not model:
        return None
    table = {**PRICES, **(overrides or {})}
    name = model.split("/")[-1]
    if name in table:
        return table[name]
    prefixes = [k for k in table if name.startswith(k)]
    return table[max(prefixes, key=len)] if prefixes else None


def cost_usd(model: str | None, tokens: Mapping[str, int | None],
             overrides: Mapping[str, Price] | None = None) -> float | None:
    """USD cost of `tokens` ({input, output, cache}); None without a price or token counts."""
    return cost_of(price_for(model, overrides), tokens)


def cost_of(price: Price | None, tokens: Mapping[str, int | None]) -> float | None:
    """USD cost of `tokens` at `price` (see `cost_usd`)."""
    if price is None or tokens.get("input") is None or tokens.get("output") is None:
        return None
    cached = tokens.get("cache") or 0
    fresh = max(0, tokens["input"] - cached)
    total = (fresh * price["input"] + cached * price.get("cache", price["input"])
             + tokens["output"] * price["output"]) / 1e6
    return round(total, 6)
