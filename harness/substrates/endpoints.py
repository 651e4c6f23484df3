"""Checks every hosts-file engine endpoint shares (a substrate folder's `endpoint_model`
builds on them): an allowed scheme, no embedded password, a host for remote endpoints.
Errors are `ValueError`s whose text is the one-line message the hosts file shows."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit


def split_endpoint(url: str, schemes: tuple[str, ...]) -> SplitResult:
    """urlsplit with the checks every endpoint shares: allowed scheme, no password."""
    parts = urlsplit(url)
    if parts.scheme not in schemes:
        raise ValueError(f"scheme {parts.scheme or '(none)'!r} not allowed in {url!r} "
                         f"(valid: {', '.join(s + '://' for s in schemes)})")
    if parts.password is not None:
        raise ValueError(f"credentials embedded in {parts.scheme}://{parts.username}:***@...; "
                         "use an SSH key or agent, or TLS client certificates "
                         f"(valid: {parts.scheme}://user@host)")
    if parts.fragment:
        raise ValueError(f"unexpected #fragment in {url!r}")
    try:
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise ValueError(f"bad port in {url!r} (valid: 1-65535)") from None
    return parts


def require_host(parts: SplitResult, url: str) -> None:
    """A remote endpoint names its host."""
    if not parts.hostname:
        raise ValueError(f"no host in {url!r} (valid: {parts.scheme}://user@host)")
