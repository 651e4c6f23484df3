"""Forwarding a call to an HTTP upstream, the real key added here and nowhere else.

The URL is the upstream's configured `base_url` plus the API's fixed path: nothing of the
request chooses where it goes (no SSRF). Only a short list of request headers passes
(content type, Anthropic's version and beta flags); the client's own credentials never
do. Redirects are not followed. A streamed answer is copied to the client chunk by chunk
as it arrives, and parsed on the way for usage and the record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import quote

import aiohttp
from aiohttp import web

from harness.gateway.models import Upstream
from harness.gateway.shapes import SSEParser, sse

PATHS = {("openai", "chat"): "/chat/completions", ("openai", "responses"): "/responses",
         ("openai", "models"): "/models", ("anthropic", "messages"): "/v1/messages",
         ("anthropic", "count_tokens"): "/v1/messages/count_tokens",
         ("anthropic", "models"): "/v1/models",
         ("gemini", "gemini"): "/v1beta/models/{model}:generateContent",
         ("gemini", "gemini_stream"): "/v1beta/models/{model}:streamGenerateContent?alt=sse",
         ("gemini", "gemini_count"): "/v1beta/models/{model}:countTokens"}
PASS_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta", "accept")
ANTHROPIC_VERSION = "2023-06-01"
CONNECT_TIMEOUT, READ_TIMEOUT = 30, 600
ERROR_BODY_MAX = 64 * 1024


@dataclass
class Reply:
    """What the upstream answered: status, the body (JSON, or the stream's events)."""

    status: int
    body: dict | None = None
    events: list[dict] = field(default_factory=list)
    streamed: bool = False
    error: str | None = None
    first_byte_sec: float | None = None


def url_for(upstream: Upstream, api: str) -> str:
    path = PATHS.get((upstream.provider, api))
    if path is None:
        raise KeyError(api)
    base = upstream.base_url.rstrip("/")
    if upstream.provider in ("anthropic", "gemini") and base.endswith(("/v1", "/v1beta")):
        base = base.rsplit("/", 1)[0]
    return base + path.replace("{model}", quote(upstream.model, safe=""))


def headers_for(upstream: Upstream, request: web.BaseRequest) -> dict[str, str]:
    out = {"Content-Type": "application/json"}
    for name in PASS_HEADERS:
        if request.headers.get(name):
            out[name] = request.headers[name]
    if upstream.provider == "anthropic":
        out.setdefault("anthropic-version", ANTHROPIC_VERSION)
        if upstream.key:
            out["x-api-key"] = upstream.key
    elif upstream.provider == "gemini":
        if upstream.key:
            out["x-goog-api-key"] = upstream.key
    elif upstream.key:
        out["Authorization"] = f"Bearer {upstream.key}"
    return out


LOCAL_MAX_TOKENS = 256


def llama_compatible(body: dict) -> dict:
    """A Chat Completions request as llama-cpp-python's server takes it: an assistant
    message with tool calls and `content: null` (valid for OpenAI) is refused there, so its
    content becomes an empty string; without a limit a small model may generate until its
    context is full, so an answer is capped at LOCAL_MAX_TOKENS unless the request says."""
    out = dict(body)
    if "max_tokens" not in out and "max_completion_tokens" not in out:
        out["max_tokens"] = LOCAL_MAX_TOKENS
    messages = out.get("messages")
    if isinstance(messages, list):
        out["messages"] = [
            {**m, "content": ""} if isinstance(m, dict) and m.get("role") == "assistant"
            and m.get("content") is None else m for m in messages]
    return out


class Forwarder:
    """One client session for every upstream of the process."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT,
                                              sock_read=READ_TIMEOUT),
                auto_decompress=True)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def forward(self, upstream: Upstream, api: str, body: dict | None,
                      request: web.BaseRequest, response_factory, clock, convert=None) -> Reply:
        """Send the call; a stream is written to the response `response_factory(status,
        content_type)` makes, as it arrives (through `convert`, a translate.StreamTo*
        object, when the agent speaks another API). `clock()` gives seconds since the call
        began."""
        method = "GET" if body is None else "POST"
        if upstream.local and api == "chat" and body is not None:
            body = llama_compatible(body)
        data = None if body is None else json.dumps(body).encode()
        try:
            async with self.session.request(method, url_for(upstream, api), data=data,
                                            headers=headers_for(upstream, request),
                                            allow_redirects=False) as resp:
                ctype = resp.headers.get("Content-Type", "")
                if resp.status == 200 and ctype.startswith("text/event-stream"):
                    return await self._stream(resp, response_factory, clock, convert)
                raw = await resp.content.read(ERROR_BODY_MAX if resp.status >= 300 else -1)
                first = clock()
                try:
                    parsed = json.loads(raw) if raw else None
                except ValueError:
                    parsed = {"error": {"message": raw[:2000].decode("utf-8", "replace")}}
                return Reply(resp.status, parsed if isinstance(parsed, dict) else
                             {"data": parsed}, first_byte_sec=first)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return Reply(502, {"error": {"type": "upstream_unreachable",
                                         "message": f"the upstream {upstream.name} could not "
                                                    f"be reached: {type(exc).__name__}"}},
                         error=str(exc)[:500])

    async def _stream(self, resp, response_factory, clock, convert) -> Reply:
        out = await response_factory(200, resp.headers.get("Content-Type"))
        parser, first = SSEParser(), None
        try:
            async for chunk in resp.content.iter_any():
                if first is None:
                    first = clock()
                seen = len(parser.events)
                parser.feed(chunk)
                if convert is None:
                    await out.write(chunk)
                    continue
                events = [e for ev in parser.events[seen:] for e in convert.feed(ev)]
                if events:
                    await out.write(sse(events, convert.api, done=False))
            if convert is not None:
                await out.write(sse(convert.finish(), convert.api))
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Reply(200, events=parser.events, streamed=True, first_byte_sec=first,
                         error=f"upstream stream ended early: {type(exc).__name__}")
        except ConnectionResetError:
            return Reply(200, events=parser.events, streamed=True, first_byte_sec=first,
                         error="the client went away during the stream")
        await out.write_eof()
        return Reply(200, events=parser.events, streamed=True, first_byte_sec=first)
