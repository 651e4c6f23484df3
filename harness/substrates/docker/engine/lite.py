"""The client of a local harness engine (a `unix://` socket): its reads before Terraform
applies, without the Docker SDK.

A `harness run` reads the engine a few times before its first `terraform apply` (ping, info,
the base and task images, the networks in use): through the Docker SDK that first means
importing it (requests, urllib3: the largest part of the run path's imports). `EngineClient`
answers those reads itself, one `http.client` request each over the socket, with the SDK's
names and shapes (`ping`, `info`, `images.get`, `networks.list`, `api.inspect_image`); any
other attribute goes to the SDK's client (`engine.client`), made on first use or beforehand
by `warm` in a background thread while Terraform starts. A missing image raises
`ImageMissing` here where the SDK raises `ImageNotFound`: `image_or_none` takes either.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from typing import Any
from urllib.parse import quote, urlencode

READ_LIMIT = 64 << 20  # a listing larger than this is not an engine's answer


class ImageMissing(LookupError):
    """The engine has no image of that name (the SDK's ImageNotFound)."""


class EngineError(OSError):
    """The engine answered a read with an error status, or not at all."""


def image_or_none(client, ref: str):
    """`client.images.get(ref)` (an SDK client or an EngineClient), None when missing."""
    try:
        return client.images.get(ref)
    except Exception as exc:
        if isinstance(exc, ImageMissing) or type(exc).__name__ == "ImageNotFound":
            return None
        raise


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.path)
        self.sock = sock


class _Image:
    """What the SDK's Image gives the harness's reads: id, short_id, labels, tags, attrs."""

    def __init__(self, attrs: dict):
        self.attrs = attrs
        self.id = attrs.get("Id", "")
        self.short_id = self.id[:19] if self.id.startswith("sha256:") else self.id[:12]
        self.labels = (attrs.get("Config") or {}).get("Labels") or {}
        self.tags = attrs.get("RepoTags") or []


class _Network:
    def __init__(self, attrs: dict):
        self.attrs = attrs
        self.id = attrs.get("Id", "")
        self.name = attrs.get("Name", "")


class _Part:
    """One of the client's parts (`images`, `networks`, `api`): the reads its subclass
    defines, every other attribute from the same part of the SDK's client."""

    part = ""

    def __init__(self, owner: EngineClient):
        self._owner = owner

    def __getattr__(self, name: str):
        return getattr(getattr(self._owner.sdk(), self.part), name)


class _Images(_Part):
    part = "images"

    def get(self, ref: str) -> _Image:
        return _Image(self._owner.inspect_image(ref))


class _Networks(_Part):
    part = "networks"

    def list(self, filters: dict | None = None) -> list[_Network]:
        query = {"filters": json.dumps({k: [v] if isinstance(v, str) else v
                                        for k, v in filters.items()})} if filters else None
        return [_Network(n) for n in self._owner.get("/networks", query) or []]


class _Api(_Part):
    part = "api"

    def inspect_image(self, ref: str) -> dict:
        return self._owner.inspect_image(ref)

    def info(self) -> dict:
        return self._owner.info()


class EngineClient:
    """The harness engine at the Unix socket `host`: reads here, the rest through the SDK
    client `make_sdk()` makes (once, under a lock)."""

    def __init__(self, host: str, make_sdk, timeout: float = 120):
        self.host = host
        self.path = host.removeprefix("unix://")
        self.timeout = timeout
        self._make_sdk = make_sdk
        self._sdk = None
        self._lock = threading.Lock()
        self.images = _Images(self)
        self.networks = _Networks(self)
        self.api = _Api(self)

    def get(self, path: str, query: dict | None = None) -> Any:
        """The decoded JSON of GET `path`; None for 404; EngineError for any other error."""
        conn = _UnixConnection(self.path, self.timeout)
        try:
            conn.request("GET", path + (f"?{urlencode(query)}" if query else ""))
            resp = conn.getresponse()
            body = resp.read(READ_LIMIT + 1)
        except OSError as exc:
            raise EngineError(f"{self.host}: {exc}") from exc
        finally:
            conn.close()
        if resp.status == 404:
            return None
        if resp.status >= 400 or len(body) > READ_LIMIT:
            raise EngineError(f"{self.host}: GET {path}: HTTP {resp.status} "
                              f"{body[:200].decode(errors='replace')}")
        ctype = resp.getheader("Content-Type") or ""
        return json.loads(body) if "json" in ctype else body.decode(errors="replace")

    def ping(self) -> bool:
        return self.get("/_ping") == "OK"

    def info(self) -> dict:
        return self.get("/info") or {}

    def inspect_image(self, ref: str) -> dict:
        attrs = self.get(f"/images/{quote(ref, safe='')}/json")
        if attrs is None:
            raise ImageMissing(f"no such image: {ref}")
        return attrs

    def sdk(self):
        """The Docker SDK's client of this engine (imported and made on first use)."""
        with self._lock:
            if self._sdk is None:
                self._sdk = self._make_sdk()
            return self._sdk

    def warm(self) -> None:
        """Make the SDK client in a background thread now (while Terraform starts): the
        first exec after apply then finds it ready. Errors are left to that first use."""
        def make() -> None:
            try:
                self.sdk()
            except Exception:
                pass

        threading.Thread(target=make, name="hx-docker-sdk", daemon=True).start()

    def __getattr__(self, name: str):
        if name.startswith("_"):  # not made yet (copy, pickle): never the SDK's
            raise AttributeError(name)
        return getattr(self.sdk(), name)
