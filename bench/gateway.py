"""Latency the model gateway adds, side by side with calling the scripted upstream directly.

Two servers run in a child process on 127.0.0.1: `direct`, a bare aiohttp server that
answers every Chat Completions call with the scripted model's answer (no token, checks,
budget or record), and `gateway`, the harness gateway with one trial's grant in front of
the same scripted model (token and address checks, body limits, budget, usage, and the
fsync'd, redacted llm.jsonl record). The client (this process) sends the same requests to
both, with 1 and with 32 calls in flight, in rounds that alternate the sides, and prints per
side the median over rounds of the p50 and p99 latency of a whole call and of a streamed
call's first byte, and the gateway's added time.

Goal (issue 37): under 2 ms p50 added, under 5 ms added to the first streamed byte (p50),
32 concurrent streams held (every call answered 200).

    python bench/gateway.py [--calls 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

from harness.gateway.grants import Grant
from harness.gateway.models import Budget, GatewaySettings, Upstream
from harness.gateway.scripted import Scripted
from harness.gateway.server import Gateway
from harness.gateway.shapes import sse

SCRIPT = "- run: systemctl status nginx\n- run: systemctl restart nginx\n- say: done\n"
BODY = {"model": "m", "messages": [{"role": "system", "content": "You are an SRE. " * 50},
                                   {"role": "user", "content": "fix nginx"}],
        "tools": [{"type": "function", "function": {"name": "shell", "parameters": {
            "type": "object", "properties": {"command": {"type": "string"}}}}}]}


def serve(conn, script: Path, records: Path) -> None:
    """The child process: both servers, then the ports and token go back to the parent."""
    async def main():
        model = Scripted(script)

        async def direct(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            full, events, _ = model.answer("chat", body)
            if events is None:
                return web.json_response(full)
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(sse(events, "chat"))
            await resp.write_eof()
            return resp

        app = web.Application()
        app.router.add_post("/v1/chat/completions", direct)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        direct_port = site._server.sockets[0].getsockname()[1]
        gw = Gateway(GatewaySettings(streams_per_trial=64))
        port = await gw.listen("127.0.0.1", 0)
        up = Upstream(name="scripted", provider="scripted", model="scripted", script=script)
        grant = Grant.mint("bench", up, Budget(), ["127.0.0.0/8"], ["127.0.0.1"], records)
        gw.add(grant)
        conn.send((direct_port, port, grant.token))
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)

    asyncio.run(main())


async def measure(url: str, token: str, calls: int, inflight: int, stream: bool
                  ) -> tuple[list[float], list[float]]:
    """(whole-call seconds, first-byte seconds) of `calls` calls, `inflight` at a time."""
    whole, first = [], []
    body = json.dumps({**BODY, "stream": stream}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    queue = list(range(calls))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        async def worker():
            while queue:
                queue.pop()
                t = time.perf_counter()
                async with s.post(url, data=body, headers=headers) as r:
                    await r.content.readany()
                    first.append(time.perf_counter() - t)
                    await r.read()
                    assert r.status == 200, r.status
                whole.append(time.perf_counter() - t)

        await asyncio.gather(*(worker() for _ in range(inflight)))
    return whole, first


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1000 if len(values) > 1 else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per side and round")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds, the sides alternating; each figure is their median")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hx-bench-gw-"))
    (tmp / "c.yaml").write_text(SCRIPT)
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=serve, args=(child, tmp / "c.yaml",
                                                       tmp / "llm.jsonl"), daemon=True)
    proc.start()
    direct_port, gw_port, token = parent.recv()
    urls = {"direct": f"http://127.0.0.1:{direct_port}/v1/chat/completions",
            "gateway": f"http://127.0.0.1:{gw_port}/v1/chat/completions"}
    ok = True
    print(f"{'in flight':>9} {'side':>8} {'p50 ms':>8} {'p99 ms':>8} {'1st byte p50':>13} "
          f"{'1st byte p99':>13}")
    for inflight in (1, 32):
        rounds: dict[str, list[tuple[float, ...]]] = {side: [] for side in urls}
        for url in urls.values():
            asyncio.run(measure(url, token, 50, inflight, False))  # warm up
        for _ in range(args.rounds):  # the sides alternate: a busy spell hits both
            for side, url in urls.items():
                whole, _ = asyncio.run(measure(url, token, args.calls, inflight, False))
                _, first = asyncio.run(measure(url, token, args.calls, inflight, True))
                rounds[side].append((pct(whole, 50), pct(whole, 99), pct(first, 50),
                                     pct(first, 99)))
        results = {side: [statistics.median(col) for col in zip(*r, strict=True)]
                   for side, r in rounds.items()}
        for side, values in results.items():
            print(f"{inflight:>9} {side:>8} " + " ".join(
                f"{v:>{w}.2f}" for v, w in zip(values, (8, 8, 13, 13), strict=True)))
        added = [g - d for g, d in zip(results["gateway"], results["direct"], strict=True)]
        print(f"{inflight:>9} {'added':>8} " + " ".join(
            f"{v:>{w}.2f}" for v, w in zip(added, (8, 8, 13, 13), strict=True)))
        ok = ok and added[0] < 2.0 and added[2] < 5.0
    parent.send("stop")
    proc.join(10)
    print("goal met" if ok else "goal missed (p50 added < 2 ms, first byte added < 5 ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
