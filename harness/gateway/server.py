"""The gateway's HTTP server: one per harness process, one listening site per address.

Endpoints: OpenAI `/v1/chat/completions`, `/v1/responses`, `/v1/models`; Anthropic
`/v1/messages`, `/v1/messages/count_tokens`; Gemini `/v1beta/models/MODEL:generateContent`,
`:streamGenerateContent` (SSE) and `:countTokens`, `/v1beta/models`.

Every call is checked in this order, and every refusal of a known token is recorded in its
trial's `agent/llm.jsonl`: a token (`Authorization: Bearer`, `x-api-key`, `x-goog-api-key`
or `?key=`) of a live grant (unknown: 401; revoked after its window: 401), called from the
grant's addresses on the grant's own listening address (else 401), at most
`calls_per_trial` calls of the grant in flight (429, before the body is read), a body of at
most `max_body_mb` (413) sent within `read_timeout_sec` (408) that is a JSON object (400),
the budget (429, and the grant is marked `exceeded`), the grant's concurrent streams (429,
back-pressure only), an upstream that speaks the agent's API or one it is translated to
(Anthropic Messages against an OpenAI-compatible server, Responses against a `chat_only`
one, Chat Completions against an Anthropic one; other pairs: 400). Errors come in the shape
of the API called (OpenAI's `{"error": {...}}`, Anthropic's `{"type": "error", ...}`,
Gemini's `{"error": {"code", "message", "status"}}`).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

from aiohttp import web

from harness.gateway import translate, translate_chat, translate_responses
from harness.gateway.grants import Grant, token_digest
from harness.gateway.models import GatewaySettings
from harness.gateway.scripted import Scripted
from harness.gateway.shapes import (
    assemble,
    dumps,
    estimated_usage,
    loads,
    sse,
    stream_usage,
    tokens,
    usage_of,
)
from harness.gateway.upstream import Forwarder, Reply
from harness.results import now_iso

ROUTES = {("POST", "/v1/chat/completions"): "chat", ("POST", "/v1/responses"): "responses",
          ("POST", "/v1/messages"): "messages",
          ("POST", "/v1/messages/count_tokens"): "count_tokens",
          ("GET", "/v1/models"): "models", ("GET", "/v1beta/models"): "models"}
GEMINI = re.compile(r"^/v1beta/models/[^/:]+:(generateContent|streamGenerateContent|countTokens)$")
GEMINI_APIS = {"generateContent": "gemini", "streamGenerateContent": "gemini_stream",
               "countTokens": "gemini_count"}
SERVES = {"openai": {"chat", "responses", "models"},
          "anthropic": {"messages", "count_tokens", "models"},
          "gemini": {"gemini", "gemini_stream", "gemini_count", "models"}}
BILLED = ("chat", "responses", "messages", "gemini", "gemini_stream")
COUNTS = ("count_tokens", "gemini_count")
BIG_BODY = 2**20
WRITE_GATHER_SEC = 0.001


class Refusal(Exception):
    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def route(method: str, path: str) -> str | None:
    """The API a request calls (None: no such endpoint); the model named in a Gemini path
    is ignored, as every request's own model is."""
    path = path.rstrip("/") or "/"
    if (method, path) in ROUTES:
        return ROUTES[(method, path)]
    m = GEMINI.match(path) if method == "POST" else None
    return GEMINI_APIS[m.group(1)] if m else None


def streaming(api: str, body: dict | None) -> bool:
    return api == "gemini_stream" or (api != "gemini" and bool(body and body.get("stream")))


def error_response(api: str, status: int, kind: str, message: str) -> web.Response:
    if api in ("messages", "count_tokens"):
        body = {"type": "error", "error": {"type": kind, "message": message}}
    elif api.startswith("gemini"):
        body = {"error": {"code": status, "message": message, "status": kind.upper()}}
    else:
        body = {"error": {"message": message, "type": kind, "code": kind}}
    return web.json_response(body, status=status)


def token_of(request: web.BaseRequest) -> str | None:
    """The token as CLIs send it: `Authorization: Bearer`, `x-api-key` (Anthropic),
    `x-goog-api-key` or `?key=` (Gemini)."""
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return (request.headers.get("x-api-key") or request.headers.get("x-goog-api-key")
            or request.query.get("key") or None)


class Gateway:
    """The server, its sites and its grants (by token digest)."""

    def __init__(self, settings: GatewaySettings | None = None):
        self.settings = settings or GatewaySettings()
        self.grants: dict[str, Grant] = {}
        self.sites: dict[str, tuple[web.TCPSite, int, int]] = {}  # addr -> (site, port, users)
        self.forwarder = Forwarder()
        self._scripts: dict[Path, Scripted] = {}
        self._runner: web.ServerRunner | None = None
        self._lock = asyncio.Lock()
        self._records: set[asyncio.Task] = set()

    async def _start(self) -> web.ServerRunner:
        """aiohttp's low-level server: one handler for every path (no application, router
        or middleware to pass on each call)."""
        if self._runner is None:
            loop, limit = asyncio.get_running_loop(), int(self.settings.max_body_mb * 2**20)

            def request(message, payload, protocol, writer, task) -> web.BaseRequest:
                return web.BaseRequest(message, payload, protocol, writer, task, loop,
                                       client_max_size=limit)

            server = web.Server(self.handle, request_factory=request, access_log=None,
                                keepalive_timeout=self.settings.read_timeout_sec,
                                lingering_time=0)
            self._runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=5)
            await self._runner.setup()
        return self._runner

    async def listen(self, addr: str, port: int | None = None) -> int:
        """Listen on `addr` (once per address, counted); return the port. `port` None:
        the configured one; 0: any free one."""
        async with self._lock:
            if addr in self.sites:
                site, bound, users = self.sites[addr]
                self.sites[addr] = (site, bound, users + 1)
                return bound
            runner = await self._start()
            site = web.TCPSite(runner, addr, self.settings.port if port is None else port,
                               reuse_address=True)
            await site.start()
            bound = site._server.sockets[0].getsockname()[1]
            self.sites[addr] = (site, bound, 1)
            return bound

    async def unlisten(self, addr: str) -> None:
        async with self._lock:
            if addr not in self.sites:
                return
            site, bound, users = self.sites[addr]
            if users > 1:
                self.sites[addr] = (site, bound, users - 1)
                return
            del self.sites[addr]
            await site.stop()

    def add(self, grant: Grant) -> None:
        self.grants[token_digest(grant.token)] = grant

    async def close(self) -> None:
        if self._records:
            await asyncio.wait(set(self._records), timeout=30)
        for addr in list(self.sites):
            site = self.sites.pop(addr)[0]
            await site.stop()
        await self.forwarder.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def script(self, path: Path) -> Scripted:
        if path not in self._scripts:
            self._scripts[path] = Scripted(path)
        return self._scripts[path]

    # -- one call ------------------------------------------------------------------------

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        started = time.monotonic()
        api = route(request.method, request.path)
        if api is None:
            return error_response("chat", 404, "not_found",
                                  f"no endpoint {request.method} {request.path}; the gateway "
                                  f"serves {', '.join(p for _, p in ROUTES)} and Gemini's "
                                  "/v1beta/models/MODEL:{generateContent, "
                                  "streamGenerateContent, countTokens}")
        grant = self.grants.get(token_digest(token_of(request) or ""))
        if grant is None:
            return error_response(api, 401, "authentication_error",
                                  "unknown token: use the token the harness gave this trial")
        grant.active += 1
        grant.calls += 1
        try:
            return await self._serve(grant, api, request, started)
        finally:
            grant.active -= 1
            grant.calls -= 1

    async def settle(self, grant: Grant, timeout: float = 30) -> None:
        """Wait until no call of `grant` is being served (its records are written)."""
        deadline = time.monotonic() + timeout
        while grant.active and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    async def _serve(self, grant: Grant, api: str, request: web.BaseRequest, started: float
                     ) -> web.StreamResponse:
        entry = {"ts": now_iso(), "api": api, "upstream": grant.upstream.name,
                 "model": grant.upstream.model, "remote": request.remote}
        try:
            body = await self._admit(grant, api, request)
        except Refusal as ref:
            self._queue(grant, {**entry, "status": ref.status, "error": ref.message,  # in order
                                "latency_sec": round(time.monotonic() - started, 4)})
            resp = error_response(api, ref.status, ref.kind, ref.message)
            if ref.status in (408, 413):
                resp.force_close()  # what is left of the body is not read
            return resp
        stream = streaming(api, body)
        if stream:
            grant.streams += 1
        try:
            resp, done = await self._dispatch(grant, api, body, request, entry, started)
        finally:
            if stream:
                grant.streams -= 1
        if done is not None:  # written beside the answer: the client does not wait for the disk
            self._queue(grant, done)
        return resp

    def _queue(self, grant: Grant, entry: dict) -> None:
        """Queue a record; one writer per grant writes what has queued up, in batches: it
        waits `WRITE_GATHER_SEC` before each, so that calls finishing meanwhile share its
        write and fsync."""
        grant.active += 1
        grant.pending.append(entry)
        if grant.writer is None:
            grant.writer = task = asyncio.get_running_loop().create_task(self._write(grant))
            self._records.add(task)
            task.add_done_callback(self._records.discard)

    async def _write(self, grant: Grant) -> None:
        try:
            while grant.pending:
                await asyncio.sleep(WRITE_GATHER_SEC)
                batch, grant.pending = grant.pending, []
                try:
                    await asyncio.to_thread(grant.append, grant.encode(batch))
                finally:
                    grant.active -= len(batch)
        finally:
            grant.writer = None

    async def _admit(self, grant: Grant, api: str, request: web.BaseRequest) -> dict | None:
        """The request's body once every check passed; a Refusal otherwise."""
        local = (request.transport.get_extra_info("sockname") or ("",))[0] \
            if request.transport else ""
        if grant.revoked:
            raise Refusal(401, "authentication_error",
                          "this trial's token was revoked: its agent window has closed")
        if not grant.allows(request.remote, local):
            raise Refusal(401, "authentication_error",
                          "this token is not valid from this address")
        if grant.calls > self.settings.calls_per_trial:  # (this call is counted)
            raise Refusal(429, "rate_limit_error", "too many calls in flight for this trial "
                          f"(limit {self.settings.calls_per_trial})")
        body = None
        if request.method == "POST":
            try:
                raw = await self._read(request)
            except web.HTTPRequestEntityTooLarge:
                raise Refusal(413, "request_too_large", "the request body is larger than "
                              f"{self.settings.max_body_mb:g} MB") from None
            except TimeoutError:
                raise Refusal(408, "request_timeout", "the request body did not arrive within "
                              f"{self.settings.read_timeout_sec:g} s") from None
            try:  # a large body is parsed beside the loop, which serves other trials
                body = loads(raw) if len(raw) < BIG_BODY else \
                    await asyncio.to_thread(loads, raw)
            except (ValueError, RecursionError) as exc:
                raise Refusal(400, "invalid_request_error",
                              f"the request body is not valid JSON: {exc}") from None
            if not isinstance(body, dict):
                raise Refusal(400, "invalid_request_error",
                              "the request body must be a JSON object")
        if api in BILLED:
            why = grant.over_budget()
            if why:
                grant.exceeded = grant.exceeded or why
                raise Refusal(429, "rate_limit_error", f"{why} for this trial (harness "
                              "budget; the trial is recorded as budget_exceeded)")
            limit = grant.stream_limit(self.settings.streams_per_trial)
            if streaming(api, body) and grant.streams >= limit:
                raise Refusal(429, "rate_limit_error",
                              f"too many concurrent streams for this trial (limit {limit})")
        return body

    async def _read(self, request: web.BaseRequest) -> bytes:
        """The body, within `read_timeout_sec` unless it has all arrived already (then
        reading it does not wait)."""
        if request.content.is_eof():
            return await request.read()
        async with asyncio.timeout(self.settings.read_timeout_sec):
            return await request.read()

    async def _dispatch(self, grant: Grant, api: str, body: dict | None,
                        request: web.BaseRequest, entry: dict, started: float
                        ) -> tuple[web.StreamResponse, dict | None]:
        """The answer (sent) and the call's record, or None for calls not recorded."""
        up = grant.upstream
        if api == "models":
            return web.json_response(models_list([up.name, up.model])), None
        translator = translator_for(up, api)
        translated = translator is not None and api not in COUNTS
        if up.provider != "scripted" and api not in SERVES[up.provider] and translator is None:
            return error_response(api, 400, "invalid_request_error",
                                  f"the model {up.name} is served by a {up.provider} API; "
                                  f"this agent called {request.path}, and translating "
                                  "between the two is not available yet"), None
        if api in COUNTS:
            if up.provider == "scripted" or translator is not None:
                n = tokens(json.dumps(body))
                return web.json_response({"input_tokens": n} if api == "count_tokens"
                                         else {"totalTokens": n}), None
            reply = await self.forwarder.forward(up, api, {**body, "model": up.model},
                                                 request, None, lambda: 0.0)
            return web.json_response(reply.body, status=reply.status), None
        grant.requests += 1
        holder: list[web.StreamResponse] = []

        async def open_stream(status: int, ctype: str | None) -> web.StreamResponse:
            resp = web.StreamResponse(status=status, headers={
                "Content-Type": ctype or "text/event-stream", "Cache-Control": "no-cache"})
            await resp.prepare(request)
            holder.append(resp)
            return resp

        def clock() -> float:
            return round(time.monotonic() - started, 4)

        sent_api = translator[0] if translated else api
        if up.provider == "scripted":
            reply = await self._scripted(up.script, api, body, open_stream, clock)
        elif translated:
            _, to_upstream, answer, stream_cls, error_body = translator
            convert = stream_cls(up.model, body) if streaming(api, body) else None
            reply = await self.forwarder.forward(up, sent_api, to_upstream(body, up.model),
                                                 request, open_stream, clock, convert)
            if not reply.streamed:
                reply.body = (answer(reply.body or {}, up.model) if reply.status == 200
                              else error_body(reply.status, reply.body))
        else:
            sent = body if up.provider == "gemini" else {**body, "model": up.model}
            if api == "chat" and body.get("stream"):
                sent["stream_options"] = {**(body.get("stream_options") or {}),
                                          "include_usage": True}
            reply = await self.forwarder.forward(up, api, sent, request, open_stream, clock)
        usage = (stream_usage(sent_api, reply.events) if reply.streamed
                 else usage_of(api, reply.body))
        response = assemble(sent_api, reply.events) if reply.streamed else reply.body
        estimated = usage is None and reply.status == 200
        if estimated:  # the upstream sent none (llama.cpp's streams): counted, marked so
            usage = estimated_usage(body, response)
        cost = grant.account(usage) if reply.status == 200 else None
        if holder:
            resp = holder[0]
        else:  # redacted too: an upstream's error text may quote the key it was sent
            resp = web.Response(text=grant.redact(dumps(reply.body)), status=reply.status,
                                content_type="application/json")
        return resp, {
            **entry, "status": reply.status, "stream": reply.streamed, "request": body,
            "response": response,
            **({"translated": f"{api} -> {sent_api}"} if translated else {}), "usage": usage,
            **({"usage_estimated": True} if estimated else {}),
            "cost_usd": cost, "first_byte_sec": reply.first_byte_sec,
            "latency_sec": clock(), **({"error": reply.error} if reply.error else {})}

    async def _scripted(self, path: Path, api: str, body: dict, open_stream, clock) -> Reply:
        full, events, _ = self.script(path).answer(api, body)
        if events is None:
            return Reply(200, full, first_byte_sec=clock())
        out = await open_stream(200, "text/event-stream")
        await out.write(sse(events, api))
        first = clock()
        await out.write_eof()
        return Reply(200, events=events, streamed=True, first_byte_sec=first)


def translator_for(up, api: str) -> tuple | None:
    """(upstream API, request mapping, answer mapping, stream converter, error mapping)
    when the agent's API must be translated to reach `up`, else None."""
    if up.provider == "openai" and api in ("messages", "count_tokens"):
        return ("chat", translate.to_chat, translate.to_message, translate.StreamToMessages,
                translate.error_body)
    if up.provider == "openai" and api == "responses" and up.chat_only:
        return ("chat", translate_responses.to_chat, translate_responses.to_response,
                translate_responses.StreamToResponses, translate_responses.error_body)
    if up.provider == "anthropic" and api == "chat":
        return ("messages", translate_chat.to_messages, translate_chat.to_chat_answer,
                translate_chat.StreamToChat, translate_chat.error_body)
    return None


def models_list(names: list[str]) -> dict:
    """`/v1/models` in a shape both OpenAI and Anthropic clients read."""
    data = [{"id": n, "object": "model", "type": "model", "created": 0,
             "owned_by": "harness", "display_name": n} for n in dict.fromkeys(names)]
    gemini = [{"name": f"models/{n}", "displayName": n, "supportedGenerationMethods": [
        "generateContent", "streamGenerateContent", "countTokens"]} for n in dict.fromkeys(names)]
    return {"object": "list", "data": data, "has_more": False,
            "first_id": data[0]["id"], "last_id": data[-1]["id"], "models": gemini}
