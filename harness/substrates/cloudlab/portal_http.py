"""The local portal's HTTP side: the CloudLab Portal API's paths, JSON bodies, the
`X-Api-Token` header and its error responses ({error, code}; 400/401/404/429), served by
a threading HTTP server (`harness cloudlab serve`, or `serve()` from tests).

Paths sit at the root like the API description's (`/experiments`, `/profiles`, ...); a
`/portal/api` prefix is accepted too. With `redirect_slash`, collection paths answer a 307
to their trailing-slash form first, as the real server may.
"""

from __future__ import annotations

import hmac
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from harness.substrates.cloudlab.portal import ApiError, Portal
from harness.substrates.cloudlab.portal_model import AGGREGATE, error, iso

VERSION = {"major": 1, "minor": 0, "patch": 0, "version": "1.0.0", "branch": "harness-local",
           "commit": None, "build_timestamp": None}
E = r"(?P<exp>[^/]+)"
ROUTES: list[tuple[str, re.Pattern, str]] = [(m, re.compile(f"^{p}/?$"), h) for m, p, h in [
    ("GET", "/version", "version"),
    ("GET", "/tokens/this", "token"),
    ("GET", "/profiles", "list_profiles"),
    ("POST", "/profiles", "create_profile"),
    ("GET", r"/profiles/(?P<prof>[^/]+)", "get_profile"),
    ("PATCH", r"/profiles/(?P<prof>[^/]+)", "patch_profile"),
    ("DELETE", r"/profiles/(?P<prof>[^/]+)", "delete_profile"),
    ("GET", "/experiments", "list_experiments"),
    ("POST", "/experiments", "create_experiment"),
    ("GET", f"/experiments/{E}", "get_experiment"),
    ("PUT", f"/experiments/{E}", "extend_experiment"),
    ("PATCH", f"/experiments/{E}", "patch_experiment"),
    ("DELETE", f"/experiments/{E}", "delete_experiment"),
    ("GET", f"/experiments/{E}/manifests", "manifests"),
    ("GET", f"/experiments/{E}/node/(?P<node>[^/]+)", "get_node"),
    ("POST", f"/experiments/{E}/node/(?P<node>[^/]+)/(?P<action>[a-z]+)", "node_action"),
    ("POST", f"/experiments/{E}/nodes/(?P<action>[a-z]+)", "nodes_action"),
]]
COLLECTIONS = ("/profiles", "/experiments")


class PortalServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, portal: Portal, token: str, redirect_slash: bool = False,
                 record: list | None = None):
        super().__init__(address, Handler)
        self.portal, self.token, self.redirect_slash = portal, token, redirect_slash
        self.record = record  # (handler or "error", status, payload) of every response


class Handler(BaseHTTPRequestHandler):
    server: PortalServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # one line per request; never headers (the token)
        self.server.portal.log(f"portal: {self.command} {urlsplit(self.path).path} "
                               f"-> {args[1] if len(args) > 1 else ''}")

    def do_GET(self):  # noqa: N802
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET  # noqa: N815

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        path = url.path.removeprefix("/portal/api") or "/"
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.server.redirect_slash and path in COLLECTIONS:
            self._send(307, None, {"Location": path + "/" + (f"?{url.query}" if url.query
                                                              else "")})
            return
        try:
            if not self._authorized():
                raise ApiError(401, "invalid or missing X-Api-Token")
            body = json.loads(raw) if raw.strip() else {}
            if not isinstance(body, dict):
                raise ApiError(400, "the request body must be a JSON object")
            for method, pattern, handler in ROUTES:
                m = pattern.match(path)
                if m and method == self.command:
                    status, payload = getattr(self, handler)(body=body, query=parse_qs(
                        url.query), **m.groupdict())
                    self._send(status, payload, handler=handler)
                    return
            if any(p.match(path) for _, p, _ in ROUTES):
                raise ApiError(405, f"{self.command} is not allowed on {path}")
            raise ApiError(404, f"no such path {path}")
        except ApiError as exc:
            headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
            self._send(exc.status, error(exc.message, exc.status), headers)
        except ValueError:
            self._send(400, error("the request body is not JSON", 400))

    def _authorized(self) -> bool:
        given = self.headers.get("X-Api-Token", "")
        return bool(given) and hmac.compare_digest(given.encode(), self.server.token.encode())

    def _send(self, status: int, payload, headers: dict | None = None,
              handler: str = "error") -> None:
        if self.server.record is not None:
            kind = handler if status < 300 else "redirect" if status < 400 else "error"
            self.server.record.append((kind, status, payload))
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        if payload is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    # ---- handlers: (status, payload) --------------------------------------------------
    def version(self, **_):
        return 200, VERSION

    def token(self, **_):
        p = self.server.portal
        return 200, {"id": "local", "user": p.user, "token": "(redacted)",
                     "issued_at": iso(p.started), "expires_at": None, "role": "user",
                     "scope": "global", "scope_value": None}

    def list_profiles(self, query, **_):
        out = [p.to_json() for p in self.server.portal.profiles.values()
               if _matches(query, {"project": p.project, "profile_name": p.name,
                                   "profile_id": p.id, "creator": p.creator})]
        return 200, {"profiles": out}

    def create_profile(self, body, **_):
        return 201, self.server.portal.create_profile(body).to_json()

    def get_profile(self, prof, **_):
        return 200, self.server.portal.find_profile(prof).to_json()

    def patch_profile(self, prof, body, **_):
        return 200, self.server.portal.update_profile(prof, body).to_json()

    def delete_profile(self, prof, **_):
        self.server.portal.delete_profile(prof)
        return 204, None

    def list_experiments(self, query, **_):
        out = [e.to_json() for e in list(self.server.portal.experiments.values())
               if _matches(query, {"project": e.project, "creator": e.creator,
                                   "experiment_id": e.id})]
        return 200, {"experiments": out}

    def create_experiment(self, body, **_):
        return 201, self.server.portal.create(body).to_json()

    def get_experiment(self, exp, **_):
        return 200, self.server.portal.find(exp).to_json()

    def extend_experiment(self, exp, body, **_):
        return 200, self.server.portal.extend(exp, body).to_json()

    def patch_experiment(self, exp, body, **_):
        return 200, self.server.portal.rebind(exp, body).to_json()

    def delete_experiment(self, exp, **_):
        self.server.portal.terminate(exp)
        return 204, None

    def manifests(self, exp, **_):
        e = self.server.portal.find(exp)
        return 200, ({AGGREGATE: e.manifest()} if e.nodes else {})

    def get_node(self, exp, node, **_):
        e, n = self.server.portal.observed(exp, node)
        return 200, n.to_json(e)

    def node_action(self, exp, node, action, **_):
        e, n = self.server.portal.node_action(exp, node, action)
        return 200, n.to_json(e)

    def nodes_action(self, exp, action, **_):
        e = self.server.portal.find(exp)
        for n in list(e.nodes):
            self.server.portal.node_action(exp, n.client_id, action)
        return 200, e.to_json()


def _matches(query: dict, fields: dict) -> bool:
    return all(fields.get(k) == v[0] for k, v in query.items() if k in fields)


def serve(portal: Portal, token: str, host: str = "127.0.0.1", port: int = 0,
          redirect_slash: bool = False,
          record: list | None = None) -> tuple[PortalServer, threading.Thread]:
    """Start the portal's HTTP server in a daemon thread; (server, thread). The URL is
    `http://{host}:{server.server_port}`."""
    server = PortalServer((host, port), portal, token, redirect_slash, record)
    thread = threading.Thread(target=server.serve_forever, name="cloudlab-portal", daemon=True)
    thread.start()
    return server, thread
