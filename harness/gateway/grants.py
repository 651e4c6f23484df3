"""One trial's right to call models: its token, where it may call from, what it may spend,
where its calls are recorded.

A `Grant` is minted at agent setup (`Grant.mint`) with a random token, the addresses its
calls may come from (the trial's nodes' own addresses on its network and the bridge's;
127.0.0.0/8 for agents whose loop runs on the controller), the local addresses it may
call (the gateway's site on the trial's bridge, and loopback), its upstream and its
`Budget`. `revoke()` ends it when the window closes; the gateway keeps revoked grants
until the trial's teardown, so that a later call is refused and recorded in that trial's
`agent/llm.jsonl`. Totals (`usage`, `cost_usd`) come from the upstream's own usage fields,
summed per call.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.agents.prices import Price, cost_of, price_for
from harness.gateway.models import Budget, Upstream
from harness.gateway.shapes import dumps

TOKEN_PREFIX = "hxg-"
ALLOWS_CACHED = 256


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass
class Grant:
    """A trial's grant. Counters: `streams` open now, `calls` being served now, `active`
    calls being served or not yet recorded (`pending` records, written by the gateway's
    `writer` task for this grant), `requests` billed calls so far; `exceeded` says why the
    budget refused one."""

    trial_id: str
    token: str
    upstream: Upstream
    budget: Budget
    sources: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
    local_addrs: set[str]
    records: Path
    redact: Callable[[str], str] = lambda text: text
    revoked: bool = False
    exceeded: str | None = None
    streams: int = 0
    calls: int = 0
    active: int = 0
    requests: int = 0
    usage: dict[str, int] = field(default_factory=lambda: {"input": 0, "output": 0,
                                                           "cache": 0})
    cost: float = 0.0
    priced: bool = True
    calls_with_usage: int = 0
    pending: list[dict] = field(default_factory=list)
    writer: asyncio.Task | None = None
    _allowed: dict[tuple[str | None, str | None], bool] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _price: tuple[Upstream, Price | None] | None = field(
        default=None, init=False, repr=False, compare=False)

    @classmethod
    def mint(cls, trial_id: str, upstream: Upstream, budget: Budget, sources: list[str],
             local_addrs: list[str], records: Path,
             redact: Callable[[str], str] = lambda t: t) -> Grant:
        return cls(trial_id=trial_id, token=TOKEN_PREFIX + secrets.token_urlsafe(32),
                   upstream=upstream, budget=budget,
                   sources=[ipaddress.ip_network(s, strict=False) for s in sources],
                   local_addrs=set(local_addrs), records=records, redact=redact)

    def allows(self, remote: str | None, local: str | None) -> bool:
        """Whether a call from `remote` to the gateway's `local` address may use it (each
        pair is decided once; at most `ALLOWS_CACHED` pairs are remembered)."""
        key = (remote, local)
        allowed = self._allowed.get(key)
        if allowed is None:
            if len(self._allowed) >= ALLOWS_CACHED:
                self._allowed.clear()
            allowed = self._allowed[key] = self._decide(remote, local)
        return allowed

    def _decide(self, remote: str | None, local: str | None) -> bool:
        try:
            addr = ipaddress.ip_address(remote or "")
        except ValueError:
            return False
        return local in self.local_addrs and any(addr in net for net in self.sources
                                                 if net.version == addr.version)

    def over_budget(self) -> str | None:
        """Why the next call is refused by the budget (requests, tokens, cost), or None."""
        b = self.budget
        limits = (("requests", self.requests, b.requests),
                  ("input_tokens", self.usage["input"], b.input_tokens),
                  ("output_tokens", self.usage["output"], b.output_tokens),
                  ("cost_usd", round(self.cost, 6), b.cost_usd))
        for name, used, limit in limits:
            if limit is not None and used >= limit:
                return f"budget exhausted: {name} {used} of {limit}"
        return None

    def stream_limit(self, default: int) -> int:
        return self.budget.streams or default

    def account(self, usage: dict[str, int] | None) -> float | None:
        """Add one call's usage; return its cost (None when the model has no price)."""
        if usage is None:
            return None
        self.calls_with_usage += 1
        for k in self.usage:
            self.usage[k] += usage.get(k, 0)
        if self._price is None or self._price[0] is not self.upstream:
            up = self.upstream
            self._price = (up, price_for(up.model, {up.model: up.prices} if up.prices else None))
        price = cost_of(self._price[1], usage)
        if self.upstream.provider == "scripted" and not self.upstream.prices:
            price = 0.0
        if price is None:
            self.priced = False
            return None
        self.cost += price
        return price

    def totals(self) -> tuple[dict[str, int | None], float | None]:
        """(tokens, cost_usd) for result.json; None where no call reported usage."""
        if not self.calls_with_usage:
            return {"input": None, "output": None, "cache": None}, None
        return dict(self.usage), (round(self.cost, 6) if self.priced else None)

    def record(self, entry: dict) -> None:
        """Append one call to the trial's llm.jsonl (see `append`)."""
        self.append(self.encode([entry]))

    def encode(self, entries: list[dict]) -> bytes:
        """Calls as llm.jsonl lines, redacted (the upstream key is among the trial's
        secrets). The gateway encodes on its loop and appends beside it: encoding in the
        appending thread would hold the GIL against the loop's every socket call."""
        return "".join(self.redact(dumps(e)) + "\n"
                       for e in entries).encode()

    def append(self, data: bytes) -> None:
        """Append encoded calls to the trial's llm.jsonl: one write, one fsync."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            fd = os.open(self.records, flags, 0o644)
        except FileNotFoundError:  # its directory is made on the first write
            self.records.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.records, flags, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
