"""One-line messages for pydantic validation errors: the key, and what would be valid.

`describe(exc, Model)` follows the error's location through the model's fields, so an
unknown or misspelled key deep in a file lists the keys valid *there*, a literal lists its
allowed values, and a bound says which.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, ValidationError


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The BaseModel classes an annotation may hold (through Optional, list, dict...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model class whose field the error location's last part names."""
    model: type[BaseModel] | None = root
    for part in loc[:-1]:
        if model is None:
            return None
        if isinstance(part, int) or part not in model.model_fields:
            continue  # a list index or a union member's tag
        models = _models_in(model.model_fields[part].annotation)
        model = models[0] if models else None
    return model


def key_of(loc: tuple) -> str:
    return ".".join(str(x) for x in loc
                    if not str(x).startswith(("function-", "literal", "union")))


def describe(exc: ValidationError, root: type[BaseModel]) -> tuple[str, str]:
    """(key, message) for the first error."""
    e = exc.errors()[0]
    loc = tuple(e["loc"])
    kind, ctx, got = e["type"], e.get("ctx") or {}, e.get("input")
    if kind == "extra_forbidden":
        model = model_at(root, loc)
        valid = ", ".join(model.model_fields) if model else "?"
        return key_of(loc), f"unknown key; valid here: {valid}"
    if kind == "missing":
        return key_of(loc), "required key is missing"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=",
                 "less_than": "<"}[kind]
        limit = next(iter(ctx.values()), "?")
        return key_of(loc), f"must be {bound} {limit} (got {got!r})"
    if kind == "finite_number":
        return key_of(loc), f"must be a finite number (got {got!r})"
    msg = e["msg"].removeprefix("Value error, ")
    if kind == "literal_error":
        msg = f"got {got!r}; {msg[0].lower()}{msg[1:]}"
    elif kind not in ("value_error", "string_pattern_mismatch"):
        msg = f"{msg} (got {got!r})"
    return key_of(loc), msg
