"""What the gateway reads from the API shapes: usage, and a stream's events.

APIs: `chat` (OpenAI Chat Completions), `responses` (OpenAI Responses), `messages`
(Anthropic Messages), `gemini` (Gemini's generateContent; `gemini_stream` its
streamGenerateContent, read the same way). Usage follows the harness's token convention
(harness.agents.prices): `input` counts every prompt token, cached ones included; `cache`
is the part read from the provider's cache (Anthropic reports cache reads and writes
beside `input_tokens`, so they are added to it; Gemini's thinking tokens are output). A
stream is parsed as it passes (`SSEParser`), never held back, and assembled for the
record (`assemble`): the final message with its tool calls.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

Usage = dict[str, int]
MAX_EVENTS = 5000


def loads(raw: bytes | str) -> Any:
    """JSON as the stdlib reads it (its errors, its integers of any size), parsed by orjson
    where orjson can: every call's body goes through here."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def dumps(obj: Any) -> str:
    """Compact JSON text, non-ASCII kept; what orjson cannot encode (integers past 64
    bits, non-string keys) goes through the stdlib, other objects as `str()`."""
    try:
        return orjson.dumps(obj, default=str).decode()
    except TypeError:
        return json.dumps(obj, ensure_ascii=False, default=str, separators=(",", ":"))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_of(api: str, body: Any) -> Usage | None:
    """{input, output, cache} from a (non-streamed) response body, None without usage."""
    if api in ("gemini", "gemini_stream"):
        m = body.get("usageMetadata") if isinstance(body, dict) else None
        if not isinstance(m, dict):
            return None
        return {"input": _int(m.get("promptTokenCount")),
                "output": _int(m.get("candidatesTokenCount")) + _int(m.get("thoughtsTokenCount")),
                "cache": _int(m.get("cachedContentTokenCount"))}
    u = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(u, dict):
        return None
    if api == "chat":
        details = u.get("prompt_tokens_details") or {}
        return {"input": _int(u.get("prompt_tokens")), "output": _int(u.get("completion_tokens")),
                "cache": _int(details.get("cached_tokens") if isinstance(details, dict) else 0)}
    if api == "responses":
        details = u.get("input_tokens_details") or {}
        return {"input": _int(u.get("input_tokens")), "output": _int(u.get("output_tokens")),
                "cache": _int(details.get("cached_tokens") if isinstance(details, dict) else 0)}
    read = _int(u.get("cache_read_input_tokens"))
    return {"input": _int(u.get("input_tokens")) + read
            + _int(u.get("cache_creation_input_tokens")),
            "output": _int(u.get("output_tokens")), "cache": read}


def tokens(text: str) -> int:
    """An estimate where no tokenizer says: one token per four characters (at least one)."""
    return max(1, len(text) // 4)


def estimated_usage(request: Any, response: Any) -> Usage:
    """Usage where an upstream reports none (llama.cpp's server does not in streams): the
    `tokens` estimate of the request and of the answer, marked as an estimate in the record
    (`usage_estimated`), so that budgets still hold."""
    return {"input": tokens(json.dumps(request, default=str)),
            "output": tokens(json.dumps(response, default=str) if response is not None else ""),
            "cache": 0}


def stream_usage(api: str, events: list[dict]) -> Usage | None:
    """Usage from a stream's events (the last report wins; Anthropic's is split between
    `message_start` and `message_delta`)."""
    found: Usage | None = None
    for ev in events:
        if api in ("gemini", "gemini_stream") and isinstance(ev.get("usageMetadata"), dict):
            found = usage_of(api, ev)
        elif api == "chat" and isinstance(ev.get("usage"), dict):
            found = usage_of("chat", ev)
        elif api == "responses" and ev.get("type") in (
                "response.completed", "response.incomplete", "response.failed"):
            found = usage_of("responses", ev.get("response")) or found
        elif api == "messages" and ev.get("type") == "message_start":
            found = usage_of("messages", ev.get("message"))
        elif api == "messages" and ev.get("type") == "message_delta" and found is not None:
            u = ev.get("usage") if isinstance(ev.get("usage"), dict) else {}
            if "input_tokens" in u:
                found = usage_of("messages", {"usage": u})
            else:
                found = {**found, "output": _int(u.get("output_tokens")) or found["output"]}
    return found


class SSEParser:
    """Feed it the bytes of an SSE stream; it keeps each event's JSON `data` (up to
    MAX_EVENTS), skipping `[DONE]` and what is not JSON."""

    def __init__(self) -> None:
        self.buffer = b""
        self.events: list[dict] = []

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self.buffer:
            raw, self.buffer = self.buffer.split(b"\n\n", 1)
            data = b"\n".join(line[5:].lstrip() for line in raw.split(b"\n")
                              if line.startswith(b"data:"))
            if not data or data == b"[DONE]" or len(self.events) >= MAX_EVENTS:
                continue
            try:
                ev = json.loads(data)
            except ValueError:
                continue
            if isinstance(ev, dict):
                self.events.append(ev)


def sse(events: list[dict], api: str, done: bool = True) -> bytes:
    """Events as the API streams them (`event:` lines for Responses and Anthropic; Chat
    Completions ends with `data: [DONE]`, unless more is to come: `done=False`)."""
    out = []
    for ev in events:
        head = f"event: {ev['type']}\n" if api in ("responses", "messages") and "type" in ev \
            else ""
        out.append(f"{head}data: {json.dumps(ev)}\n\n")
    if api == "chat" and done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def assemble(api: str, events: list[dict]) -> dict:
    """The streamed answer as one record: text and tool calls (with their arguments)."""
    if api in ("gemini", "gemini_stream"):
        parts = [p for e in events for c in (e.get("candidates") or [])[:1]
                 for p in ((c or {}).get("content") or {}).get("parts") or []]
        text = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
        calls = [p["functionCall"] for p in parts if isinstance(p, dict) and "functionCall" in p]
        return {"role": "model", "text": text, "functionCalls": calls}
    if api == "responses":
        done = [e.get("response") for e in events if e.get("type") in (
            "response.completed", "response.incomplete", "response.failed")]
        if done and isinstance(done[-1], dict):
            return done[-1]
        return {"output": [e.get("item") for e in events
                           if e.get("type") == "response.output_item.done"]}
    if api == "messages":
        blocks: dict[int, dict] = {}
        for e in events:
            i = e.get("index")
            if e.get("type") == "content_block_start" and isinstance(i, int):
                blocks[i] = dict(e.get("content_block") or {})
            elif e.get("type") == "content_block_delta" and i in blocks:
                d = e.get("delta") or {}
                b = blocks[i]
                if d.get("type") == "text_delta":
                    b["text"] = b.get("text", "") + str(d.get("text", ""))
                elif d.get("type") == "input_json_delta":
                    b["partial_json"] = b.get("partial_json", "") + str(d.get("partial_json", ""))
        for b in blocks.values():
            if "partial_json" in b:
                try:
                    b["input"] = json.loads(b.pop("partial_json") or "{}")
                except ValueError:
                    b["input"] = b.get("partial_json")
        stop = next((e.get("delta", {}).get("stop_reason") for e in events
                     if e.get("type") == "message_delta"), None)
        return {"role": "assistant", "content": [blocks[k] for k in sorted(blocks)],
                "stop_reason": stop}
    text, calls = "", {}
    for e in events:
        for choice in e.get("choices") or []:
            d = choice.get("delta") or {} if isinstance(choice, dict) else {}
            text += d.get("content") or ""
            for tc in d.get("tool_calls") or []:
                slot = calls.setdefault(tc.get("index", 0), {"id": None, "name": "",
                                                             "arguments": ""})
                slot["id"] = tc.get("id") or slot["id"]
                fn = tc.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
    return {"role": "assistant", "content": text or None,
            "tool_calls": [calls[k] for k in sorted(calls)]}
