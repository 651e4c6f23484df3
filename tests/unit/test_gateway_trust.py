"""The gateway treats every request as hostile: tokens bound to one trial's addresses and
window, budgets, bounded bodies, malformed JSON, slow clients, stream caps."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp

from harness.gateway.grants import Grant
from harness.gateway.models import Budget, GatewaySettings, Upstream
from tests.gateway_fakes import FakeUpstream, gateway_with_grant, records, scripted

CHAT = {"messages": [{"role": "user", "content": "x"}]}


def run(coro):
    return asyncio.run(coro)


async def call(url: str, token: str | None, body=CHAT, raw: bytes | None = None,
               path: str = "/v1/chat/completions"):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as s:
        async with s.post(url + path, data=raw if raw is not None else json.dumps(body),
                          headers=headers) as r:
            return r.status, await r.json()


def test_unknown_token_and_wrong_trial_source_and_address_are_refused(tmp_path):
    async def main():
        gw, grant, url = await gateway_with_grant(tmp_path, scripted(tmp_path),
                                                  sources=["10.213.0.0/28"])
        assert (await call(url, None))[0] == 401
        assert (await call(url, "hxg-not-a-token"))[0] == 401
        status, body = await call(url, grant.token)  # its trial's subnet is elsewhere
        assert status == 401 and "not valid from this address" in body["error"]["message"]
        other = (await gateway_with_grant(tmp_path / "b", scripted(tmp_path),
                                          local=["127.0.0.2"]))
        gw.add(other[1])  # right source, but the gateway's site is not that trial's
        assert (await call(url, other[1].token))[0] == 401
        await gw.close()
        await other[0].close()
        assert [r["status"] for r in records(grant)] == [401]

    run(main())


def test_address_decisions_are_remembered_per_pair_and_bounded(tmp_path):
    """A grant decides each (remote, local) pair once, the same way every time; the pairs
    it remembers are bounded (a spoofing neighbour cannot grow them)."""
    from harness.gateway import grants

    up = Upstream(name="s", provider="scripted", model="s", script=tmp_path / "c.yaml")
    grant = Grant.mint("t", up, Budget(), ["10.0.0.0/30", "fd00::/126"], ["10.0.0.9"],
                       tmp_path / "llm.jsonl")
    cases = {("10.0.0.2", "10.0.0.9"): True, ("10.0.0.5", "10.0.0.9"): False,
             ("10.0.0.2", "127.0.0.1"): False, ("fd00::1", "10.0.0.9"): True,
             (None, "10.0.0.9"): False, ("not an address", "10.0.0.9"): False}
    for _ in range(2):
        assert {k: grant.allows(*k) for k in cases} == cases
    for n in range(3 * grants.ALLOWS_CACHED):
        assert not grant.allows(f"10.1.{n // 256}.{n % 256}", "10.0.0.9")
    assert len(grant._allowed) <= grants.ALLOWS_CACHED
    assert {k: grant.allows(*k) for k in cases} == cases


def test_revoked_token_is_refused_and_recorded(tmp_path):
    async def main():
        gw, grant, url = await gateway_with_grant(tmp_path, scripted(tmp_path))
        assert (await call(url, grant.token))[0] == 200
        grant.revoked = True
        status, body = await call(url, grant.token)
        assert status == 401 and "revoked" in body["error"]["message"]
        await gw.close()
        assert [r["status"] for r in records(grant)] == [200, 401]

    run(main())


def test_budgets_answer_429_and_mark_the_grant(tmp_path):
    async def main():
        gw, grant, url = await gateway_with_grant(tmp_path, scripted(tmp_path),
                                                  budget=Budget(requests=2))
        assert [(await call(url, grant.token))[0] for _ in range(3)] == [200, 200, 429]
        assert grant.exceeded.startswith("budget exhausted: requests 2 of 2")
        await gw.close()
        gw, grant, url = await gateway_with_grant(tmp_path / "t", scripted(tmp_path),
                                                  budget=Budget(output_tokens=1))
        statuses = [(await call(url, grant.token))[0] for _ in range(2)]
        status, body = await call(url, grant.token)
        assert statuses == [200, 429] and "output_tokens" in body["error"]["message"]
        await gw.close()

    run(main())


def test_bad_bodies_get_4xx(tmp_path):
    async def main():
        settings = GatewaySettings(max_body_mb=0.01)
        gw, grant, url = await gateway_with_grant(tmp_path, scripted(tmp_path),
                                                  settings=settings)
        status, _ = await call(url, grant.token, raw=b"x" * 20000)
        assert status == 413
        status, body = await call(url, grant.token, raw=b"{not json")
        assert status == 400 and "not valid JSON" in body["error"]["message"]
        status, body = await call(url, grant.token, raw=b"[1, 2]")
        assert status == 400
        status, body = await call(url, grant.token, raw=b"[" * 5000 + b"]" * 5000)
        assert status == 400  # nested past the parser's depth: still a clear 400
        status, body = await call(url, grant.token, path="/v1/messages", raw=b"{")
        assert status == 400 and body["type"] == "error"
        async with aiohttp.ClientSession() as s:
            async with s.post(url + "/v1/../admin", headers={}) as r:
                assert r.status in (401, 404)
        await gw.close()

    run(main())


def test_a_slow_client_is_cut_off_without_holding_up_others(tmp_path):
    async def main():
        gw, grant, url = await gateway_with_grant(tmp_path, scripted(tmp_path),
                                                  settings=GatewaySettings(read_timeout_sec=1))
        port = int(url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {grant.token}\r\nContent-Length: 1000\r\n\r\n{{"
                      ).encode())
        await writer.drain()
        assert (await call(url, grant.token))[0] == 200  # others are served meanwhile
        head = await asyncio.wait_for(reader.read(200), 5)
        assert head.startswith(b"HTTP/1.1 408")
        writer.close()
        await gw.close()

    run(main())


def test_concurrent_streams_past_the_cap_get_429(tmp_path):
    async def main():
        gw, grant, url = await gateway_with_grant(tmp_path, scripted(tmp_path),
                                                  budget=Budget(streams=1))
        grant.streams = 1  # one stream already open
        status, body = await call(url, grant.token, body={**CHAT, "stream": True})
        assert status == 429 and "concurrent streams" in body["error"]["message"]
        assert grant.exceeded is None  # back-pressure, not a spent budget
        grant.streams = 0
        async with aiohttp.ClientSession() as s:
            async with s.post(url + "/v1/chat/completions", json={**CHAT, "stream": True},
                              headers={"Authorization": f"Bearer {grant.token}"}) as r:
                assert r.status == 200 and (await r.read()).endswith(b"[DONE]\n\n")
        assert grant.streams == 0
        await gw.close()

    run(main())


def test_two_hundred_streams_from_one_trial_do_not_slow_another(tmp_path):
    """One trial opens 200 streams at once against a slow upstream: the grant's cap holds
    16 open, the rest get 429 at once; another trial's call is served meanwhile."""
    async def main():
        fake = FakeUpstream(stream_delay=1.0)
        base = await fake.start()
        up = Upstream(name="gpt", provider="openai", model="gpt-4o-mini",
                      base_url=f"{base}/v1", key="sk-x")
        gw, hog, url = await gateway_with_grant(tmp_path, up)
        other = Grant.mint("t2", scripted(tmp_path), Budget(), ["127.0.0.1/32"],
                           ["127.0.0.1"], tmp_path / "t2.jsonl")
        gw.add(other)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as s:
            async def stream():
                async with s.post(url + "/v1/chat/completions", json={**CHAT, "stream": True},
                                  headers={"Authorization": f"Bearer {hog.token}"}) as r:
                    await r.read()
                    return r.status

            streams = [asyncio.create_task(stream()) for _ in range(200)]
            await asyncio.sleep(0.3)
            started = time.monotonic()
            status, _ = await call(url, other.token)
            other_secs = time.monotonic() - started
            statuses = await asyncio.gather(*streams)
        await gw.close()
        await fake.stop()
        return statuses, status, other_secs

    statuses, status, other_secs = run(main())
    assert statuses.count(200) == 16 and statuses.count(429) == 184
    assert status == 200 and other_secs < 1.0


def test_calls_in_flight_past_the_cap_get_429_before_their_body_is_read(tmp_path):
    async def main():
        gw, grant, url = await gateway_with_grant(
            tmp_path, scripted(tmp_path), settings=GatewaySettings(calls_per_trial=2))
        grant.calls = 2  # two calls being served already
        status, body = await call(url, grant.token, raw=b"not even json")
        assert status == 429 and "calls in flight" in body["error"]["message"]
        grant.calls = 0
        assert (await call(url, grant.token))[0] == 200
        big = json.dumps({**CHAT, "pad": "x" * 2**21}).encode()  # parsed beside the loop
        assert (await call(url, grant.token, raw=big))[0] == 200
        await gw.close()

    run(main())
