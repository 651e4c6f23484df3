"""The local engine's client without the Docker SDK (`engine.lite.EngineClient`), against a
small HTTP server on a Unix socket that answers like dockerd."""

from __future__ import annotations

import json
import socketserver
import threading
from http.server import BaseHTTPRequestHandler
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest

from harness.substrates.docker.engine.lite import (
    EngineClient,
    EngineError,
    ImageMissing,
    image_or_none,
)

IMAGE = {"Id": "sha256:" + "ab" * 32, "RepoTags": ["harness/debian:bookworm"],
         "Config": {"Labels": {"harness.recipe": "r1"}}}
NETWORKS = [{"Id": "n1", "Name": "hx-a", "Labels": {"harness.trial": "a"},
             "IPAM": {"Config": [{"Subnet": "10.213.1.0/24"}]}},
            {"Id": "n2", "Name": "bridge", "Labels": {}, "IPAM": {"Config": []}}]


class _Engine(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        self.seen.append(self.path)
        if url.path == "/_ping":
            return self._send(200, b"OK", "text/plain")
        if url.path == "/info":
            return self._json(200, {"DockerRootDir": "/var/lib/docker",
                                    "SecurityOptions": ["name=userns"]})
        if url.path == "/images/harness%2Fdebian%3Abookworm/json":
            return self._json(200, IMAGE)
        if url.path == "/networks":
            wanted = json.loads(parse_qs(url.query).get("filters", ["{}"])[0]).get("label", [])
            return self._json(200, [n for n in NETWORKS if not wanted or any(
                f"{k}={v}" in wanted for k, v in n["Labels"].items())])
        if url.path == "/broken":
            return self._json(500, {"message": "engine trouble"})
        return self._json(404, {"message": "no such image"})

    def _json(self, code, doc):
        self._send(code, json.dumps(doc).encode(), "application/json")

    def _send(self, code, body, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):  # http.server expects a (host, port) client address
        sock, _ = super().get_request()
        return sock, ("local", 0)


@pytest.fixture
def engine(tmp_path):
    path = tmp_path / "docker.sock"
    server = _Server(str(path), _Engine)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    made = []

    def make_sdk():
        made.append(1)
        return SimpleNamespace(containers="sdk containers", api=SimpleNamespace(exec_create="x"),
                               images=SimpleNamespace(build="sdk build"))

    yield EngineClient(f"unix://{path}", make_sdk, timeout=5), made
    server.shutdown()
    server.server_close()


def test_reads_answer_without_the_sdk(engine):
    client, made = engine
    assert client.ping() is True
    assert client.info()["DockerRootDir"] == "/var/lib/docker"
    img = client.images.get("harness/debian:bookworm")
    assert (img.id, img.short_id, img.labels, img.tags) == (
        IMAGE["Id"], IMAGE["Id"][:19], {"harness.recipe": "r1"}, ["harness/debian:bookworm"])
    assert client.api.inspect_image("harness/debian:bookworm") == IMAGE
    assert [n.name for n in client.networks.list()] == ["hx-a", "bridge"]
    assert [n.attrs["IPAM"]["Config"] for n in client.networks.list(
        filters={"label": "harness.trial=a"})] == [[{"Subnet": "10.213.1.0/24"}]]
    assert made == []  # nothing asked needed the SDK


def test_a_missing_image_is_none_and_an_engine_error_is_an_error(engine):
    client, _ = engine
    with pytest.raises(ImageMissing):
        client.images.get("hx-task/nothing:1")
    assert image_or_none(client, "hx-task/nothing:1") is None
    assert image_or_none(client, "harness/debian:bookworm").id == IMAGE["Id"]
    with pytest.raises(EngineError, match="HTTP 500"):
        client.get("/broken")


def test_the_sdks_own_not_found_is_none_too():
    class ImageNotFound(Exception):
        pass

    def get(ref):
        raise ImageNotFound(ref)

    assert image_or_none(SimpleNamespace(images=SimpleNamespace(get=get)), "x") is None


def test_everything_else_goes_to_the_sdk_made_once(engine):
    client, made = engine
    assert client.containers == "sdk containers"
    assert client.api.exec_create == "x"
    assert client.images.build == "sdk build"
    assert made == [1]


def test_an_engine_that_is_down_is_an_engine_error(tmp_path):
    client = EngineClient(f"unix://{tmp_path}/none.sock", lambda: None, timeout=1)
    with pytest.raises(EngineError, match="none.sock"):
        client.ping()
