"""The gateway in a trial: which trials use it, where it listens for them, what the agent
sees, and what lands in result.json.

A trial uses the gateway when its agent's model selects a gateway upstream (`plan_for`:
`scripted:FILE` or a name of config.yaml's `models:`); the upstream is resolved when the
trial is made, so a missing key or a bad entry stops the run before anything is
provisioned. At agent setup (pre-window), `TrialGateway.open` mints the trial's grant,
listens on the trial bridge's own address (`Substrate.gateway_address`) at the configured
port, opens exactly that address:port to the bridge (`Substrate.open_gateway`), and returns
the agent's variables (`agent_env`): base URLs and the token as the API key variables,
never the real key. Where the trial's network is on another machine, the substrate may
relay an address:port there to a loopback site of the trial's own here
(`Substrate.relay_gateway`, `relay_address`). Without either, the gateway listens on
127.0.0.1 only (agents whose loop runs on the controller, such as `openai`, still use it).
`revoke()` ends the token when the window closes (later calls: 401, recorded);
`close()` at teardown stops listening and closes the firewall. `apply(record)` puts the
gateway's token totals and cost into the record, and `budget_exceeded` as its status when
the budget ran out and the trial did not pass.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import importlib
import ipaddress
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.config import load_settings
from harness.errors import HarnessError
from harness.gateway.grants import Grant
from harness.gateway.local import MODELS, LocalServer
from harness.gateway.models import (
    Budget,
    GatewaySettings,
    Upstream,
    gateway_settings,
    is_gateway_model,
    resolve,
)

if TYPE_CHECKING:
    from harness.gateway.server import Gateway

SERVER = "harness.gateway.server"  # aiohttp's server: loaded by the first trial that uses it

LOOPBACK = "127.0.0.1"
_GATEWAYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class GatewayError(HarnessError):
    """The gateway could not be set up for a trial (pre-window: retried)."""


@dataclass(frozen=True)
class GatewayPlan:
    """What a trial's gateway will serve: its upstream, its budget, the settings."""

    upstream: Upstream
    budget: Budget = field(default_factory=Budget)
    settings: GatewaySettings = field(default_factory=GatewaySettings)

    @property
    def secrets(self) -> list[str]:
        return [self.upstream.key] if self.upstream.key else []


def plan_for(model: str | None, budget: Budget | None = None, settings=None
             ) -> GatewayPlan | None:
    """The gateway plan of an agent's `model`, or None when it selects no gateway upstream
    (the agent then reaches its model as before)."""
    settings = settings or load_settings()
    if not is_gateway_model(model, settings):
        return None
    return GatewayPlan(resolve(model, settings), budget or Budget(), gateway_settings(settings))


def relay_address(trial_id: str) -> str:
    """A loopback address of the trial's own (in 127.64.0.0/10, from its id) for the
    gateway's site behind a relay."""
    h = int.from_bytes(hashlib.sha256(trial_id.encode()).digest()[:4], "big")
    return f"127.{64 + (h >> 16 & 63)}.{h >> 8 & 255}.{1 + h % 254}"


def agent_env(base: str, token: str) -> dict[str, str]:
    """The variables an agent gets: base URLs of the OpenAI, Anthropic and Gemini APIs, the
    token as their API keys (`HARNESS_GATEWAY_TOKEN` says the gateway is in use)."""
    return {"OPENAI_BASE_URL": f"{base}/v1", "ANTHROPIC_BASE_URL": base,
            "GOOGLE_GEMINI_BASE_URL": base, "OPENAI_API_KEY": token, "ANTHROPIC_API_KEY": token,
            "GEMINI_API_KEY": token, "HARNESS_GATEWAY_TOKEN": token}


def process_gateway(settings: GatewaySettings) -> Gateway:
    """The gateway of this process's running event loop (made on first use)."""
    loop = asyncio.get_running_loop()
    if loop not in _GATEWAYS:
        _GATEWAYS[loop] = importlib.import_module(SERVER).Gateway(settings)
    return _GATEWAYS[loop]


class TrialGateway:
    """One trial's use of the process gateway, from window to teardown."""

    def __init__(self, plan: GatewayPlan, trial_id: str, substrate, records, redact, event):
        self.plan, self.trial_id, self.substrate = plan, trial_id, substrate
        self.records, self.redact, self.event = records, redact, event
        self.gateway: Gateway | None = None
        self.grant: Grant | None = None
        self.addr: str | None = None
        self.relay_local: str | None = None
        self.opened = self.relayed = False

    @property
    def reaches_nodes(self) -> bool:
        """Whether the trial's nodes reach the gateway (on their bridge, or relayed)."""
        return self.addr is not None or self.relay_local is not None

    async def open(self, nodes: list) -> dict[str, str]:
        """Mint the grant (valid from the nodes' own addresses, the bridge's and loopback),
        listen, open the firewall; return the agent's variables."""
        gw = self.gateway = process_gateway(self.plan.settings)
        lo_port = await self._listen(gw, LOOPBACK, 0)
        sources, local = ["127.0.0.0/8"], [LOOPBACK]
        addr = await asyncio.to_thread(self.substrate.gateway_address, self.trial_id, nodes)
        base = f"http://{LOOPBACK}:{lo_port}"
        if addr:
            addr = str(ipaddress.ip_address(addr))
            port = await self._listen(gw, addr, None)
            self.addr = addr
            await self.substrate.open_gateway(self.trial_id, addr, port)
            self.opened = True
            sources += [addr, *(n.cluster_ip for n in nodes if n.cluster_ip)]
            local.append(addr)
            base = f"http://{addr}:{port}"
        else:
            relayed = await self._relay(gw, nodes)
            if relayed:
                local.append(self.relay_local)
                base = f"http://{relayed[0]}:{relayed[1]}"
        upstream = self.plan.upstream
        if upstream.local:
            url = await LocalServer.of(MODELS[upstream.local]).ensure()
            upstream = dataclasses.replace(upstream, base_url=url)
        self.grant = Grant.mint(self.trial_id, upstream, self.plan.budget, sources,
                                local, self.records, self.redact)
        gw.add(self.grant)
        self.event("gateway.open", url=base, upstream=self.plan.upstream.name,
                   budget=self.plan.budget.model_dump(exclude_none=True))
        return agent_env(base, self.grant.token)

    async def _relay(self, gw: Gateway, nodes: list) -> tuple[str, int] | None:
        """Where the trial's network is on another machine: a site of this trial's own on
        a loopback address (`relay_address`), relayed there by the substrate and opened to
        the nodes; the relay's (address, port), or None without one. Calls come through
        it from this machine's loopback: only this site's address binds them to the
        trial's grant."""
        self.relay_local = relay_address(self.trial_id)
        port = await self._listen(gw, self.relay_local, 0)
        try:
            relayed = await self.substrate.relay_gateway(
                self.trial_id, nodes, self.plan.settings.port, (self.relay_local, port))
        except HarnessError as exc:
            self.relayed = True  # close() undoes what was made
            raise GatewayError(f"the model gateway cannot reach the trial's network: {exc}"
                               ) from None
        if relayed is None:
            await gw.unlisten(self.relay_local)
            self.relay_local = None
            return None
        self.relayed = True
        await self.substrate.open_gateway(self.trial_id, *relayed)
        self.opened = True
        return relayed

    async def _listen(self, gw: Gateway, addr: str, port: int | None) -> int:
        try:
            return await gw.listen(addr, port)
        except OSError as exc:
            wanted = self.plan.settings.port if port is None else port
            raise GatewayError(f"the model gateway cannot listen on {addr}:{wanted} "
                               f"({exc.strerror or exc}); choose another gateway.port in "
                               "config.yaml") from None

    async def revoke(self, settle_sec: float = 5) -> None:
        """The window closed: the token is refused from now on; calls still being served
        get `settle_sec` to finish (so that llm.jsonl holds the window's calls)."""
        if self.grant is not None and not self.grant.revoked:
            self.grant.revoked = True
            if self.gateway is not None:
                await self.gateway.settle(self.grant, settle_sec)
            tokens, cost = self.grant.totals()
            self.event("gateway.revoked", requests=self.grant.requests, tokens=tokens,
                       cost_usd=cost, exceeded=self.grant.exceeded)

    async def close(self) -> None:
        """Stop serving the trial (teardown): firewall closed, sites released."""
        await self.revoke()
        gw, self.gateway = self.gateway, None
        if gw is None:
            return
        if self.grant is not None:
            await gw.settle(self.grant)
        if self.opened or self.relayed:
            await self.substrate.close_gateway(self.trial_id)
        for addr in (self.addr, self.relay_local):
            if addr:
                await gw.unlisten(addr)
        await gw.unlisten(LOOPBACK)
        if self.grant is not None:
            gw.grants = {k: g for k, g in gw.grants.items() if g is not self.grant}
        if not gw.sites:
            _GATEWAYS.pop(asyncio.get_running_loop(), None)
            await gw.close()

    def apply(self, record) -> None:
        """The gateway's usage in the record; `budget_exceeded` when the budget ran out
        and the trial did not pass (its reward stays the verifier's)."""
        grant = self.grant
        if grant is None:
            return
        if grant.requests:
            record.tokens, record.cost_usd = grant.totals()
        if grant.exceeded and record.status in ("failed", "agent_error", "agent_timeout"):
            before = record.error
            record.status = "budget_exceeded"
            record.error = {"type": "BudgetExceeded", "message": grant.exceeded,
                            **({"before": before} if before else {})}
