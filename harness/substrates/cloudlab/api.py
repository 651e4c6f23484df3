"""A small Python client of the CloudLab Portal API, for what the harness does outside
Terraform: node power (the `power_*` faults, gates), extending a running trial's
experiment, and `harness gc` (list and terminate experiments whose trial is gone).

The token is sent only as `X-Api-Token`; errors name method, path, status and the portal's
message, never the token.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

from harness.errors import PreflightError, SubstrateError
from harness.paths import harness_home

NODE_ACTIONS = {"on": "start", "off": "stop", "cycle": "powercycle", "reset": "reboot"}
LOCAL_TOKEN = Path("secrets") / "cloudlab-portal.token"  # (under $HARNESS_HOME)


class NotFound(SubstrateError):
    pass


class Portal:
    """One portal URL with one token."""

    def __init__(self, url: str, token: str, timeout: float = 60.0):
        self.url, self._token, self.timeout = url.rstrip("/"), token, timeout

    def call(self, method: str, path: str, body: dict | None = None,
             query: dict | None = None) -> dict | None:
        url = self.url + path + (f"?{urlencode(query)}" if query else "")
        for attempt in range(6):
            req = urllib.request.Request(url, method=method, data=None if body is None else
                                         json.dumps(body).encode())
            req.add_header("X-Api-Token", self._token)
            req.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
                    return json.loads(raw) if raw else None
            except urllib.error.HTTPError as exc:
                raw = exc.read()
                if exc.code == 429 and attempt < 5:
                    time.sleep(float(exc.headers.get("Retry-After") or 2))
                    continue
                message = _message(raw).replace(self._token, "(token)")
                cls = NotFound if exc.code == 404 else SubstrateError
                raise cls("cloudlab", f"{method} {path}: HTTP {exc.code}: {message}") from None
            except (urllib.error.URLError, OSError) as exc:
                raise SubstrateError("cloudlab", f"{method} {path}: portal {self.url} "
                                     f"unreachable: {getattr(exc, 'reason', exc)}") from None
        raise SubstrateError("cloudlab", f"{method} {path}: the portal stayed busy (429)")

    def experiments(self, project: str) -> list[dict]:
        return (self.call("GET", "/experiments", query={"project": project}) or {}).get(
            "experiments", [])

    def experiment(self, ref: str) -> dict:
        return self.call("GET", f"/experiments/{quote(ref, safe=',')}") or {}

    def terminate(self, ref: str, wait_sec: float = 900.0) -> None:
        """DELETE, then wait until the portal answers 404 (a 404 at once is done too)."""
        path = f"/experiments/{quote(ref, safe=',')}"
        try:
            self.call("DELETE", path)
        except NotFound:
            return
        deadline = time.monotonic() + wait_sec
        while time.monotonic() < deadline:
            try:
                self.call("GET", path)
            except NotFound:
                return
            time.sleep(2)
        raise SubstrateError("cloudlab", f"experiment {ref} still exists {wait_sec:.0f}s after "
                             "its termination")

    def extend(self, ref: str, hours: int) -> dict:
        return self.call("PUT", f"/experiments/{quote(ref, safe=',')}",
                         {"extend_by": hours, "reason": "harness trial still running"}) or {}

    def node(self, ref: str, client_id: str) -> dict:
        return self.call("GET", f"/experiments/{quote(ref, safe=',')}/node/{client_id}") or {}

    def node_op(self, ref: str, client_id: str, op: str, settle_sec: float = 600.0) -> dict:
        """A node operation (reboot, powercycle, reload, start, stop), then wait until the
        node settles (status `ready`; `failed` is an error); the node."""
        self.call("POST", f"/experiments/{quote(ref, safe=',')}/node/{client_id}/{op}")
        deadline = time.monotonic() + settle_sec
        while True:
            node = self.node(ref, client_id)
            if node.get("status") == "failed":
                raise SubstrateError("cloudlab", f"node {client_id}: {op} failed "
                                     f"(state {node.get('state')})")
            if node.get("status") == "ready":
                return node
            if time.monotonic() > deadline:
                raise SubstrateError("cloudlab", f"node {client_id}: {op} did not settle in "
                                     f"{settle_sec:.0f}s")
            time.sleep(1)

    def power(self, ref: str, client_id: str, action: str, settle_sec: float = 600.0) -> str:
        """on / off / cycle / reset / status through the node operations; "on" or "off"."""
        if action != "status":
            if action not in NODE_ACTIONS:
                raise SubstrateError("cloudlab", f"power {action}: expected one of "
                                     f"{', '.join([*NODE_ACTIONS, 'status'])}")
            self.node_op(ref, client_id, NODE_ACTIONS[action], settle_sec)
        state = str(self.node(ref, client_id).get("state", "")).upper()
        return "off" if state in ("POWEROFF", "SHUTDOWN") else "on"


def resolve_token(portal_url: str, token_file: str = "") -> str:
    """The API token: `token_file`, else $CLOUDLAB_TOKEN, else (a portal on this machine)
    the local portal's token file; exported as CLOUDLAB_TOKEN for the provider."""
    if token_file:
        path = Path(os.path.expanduser(token_file))
        if not path.is_file():
            raise PreflightError(f"substrates.cloudlab.token_file: {path} does not exist")
        token = path.read_text().strip()
    elif os.environ.get("CLOUDLAB_TOKEN"):
        token = os.environ["CLOUDLAB_TOKEN"]
    else:
        path = harness_home() / LOCAL_TOKEN
        if urlsplit(portal_url).hostname not in ("127.0.0.1", "localhost") \
                or not path.is_file():
            raise PreflightError("no CloudLab token: set CLOUDLAB_TOKEN (from the portal's "
                                 "UI) or substrates.cloudlab.token_file")
        token = path.read_text().strip()
    os.environ["CLOUDLAB_TOKEN"] = token
    return token


def _message(raw: bytes) -> str:
    try:
        body = json.loads(raw)
        return str(body.get("error") or body)
    except ValueError:
        return raw.decode(errors="replace")[:200]
