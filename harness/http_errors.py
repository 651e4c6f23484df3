"""Error text for calls to OpenAI-compatible endpoints (the openai agent, the risk judge)."""

from __future__ import annotations

import urllib.error


def describe_http_error(exc: Exception) -> str:
    """A short error text that never carries a response body (which may echo the key)."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        return f"cannot reach endpoint ({exc.reason})"
    return f"{type(exc).__name__}: {str(exc)[:200]}"
