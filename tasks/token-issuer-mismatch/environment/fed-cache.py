#!/usr/bin/env python3
"""fed-cache: the federation's client entry point. GET /<namespace>/<object> fetches the
object from the namespace's origin and serves it only if the origin's token verifies
against the issuer JWKS the registry approved for that namespace."""
import hashlib
import http.server
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, "/usr/local/lib/fed")
import fedlib  # noqa: E402

CONF = dict(line.strip().split("=", 1) for line in open("/etc/fed-cache/cache.conf")
            if "=" in line and not line.startswith("#"))
MARKER = "/var/lib/federation/incident/ns-key-mismatch.open"


def log(msg: str) -> None:
    print(f"fed-cache: {msg}", flush=True)


def incident(ns: str, why: str) -> None:
    if not os.path.exists(MARKER):
        os.makedirs(os.path.dirname(MARKER), exist_ok=True)
        with open(MARKER, "w") as fh:
            fh.write(f"opened {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
                     f"namespace {ns}: {why}\n")
        log(f"incident opened: {MARKER}")


class Handler(http.server.BaseHTTPRequestHandler):
    def send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        ns, _, obj = self.path.rpartition("/")
        if ns not in CONF["NAMESPACES"].split(","):
            return self.send(404, b"unknown namespace\n")
        try:
            with urllib.request.urlopen(CONF["REGISTRY_URL"] + "/api/v1/namespaces" + ns,
                                        timeout=3) as r:
                approval = json.load(r)
            with urllib.request.urlopen(approval["origin"] + "/objects/" + obj, timeout=5) as r:
                data, tok = r.read(), r.headers.get("X-Fed-Token", "")
        except OSError as exc:
            log(f"fetch {self.path} failed: {exc}")
            return self.send(502, b"upstream error\n")
        if CONF.get("VERIFY_ORIGIN_TOKENS", "true") == "true":
            try:
                claims = fedlib.verify(tok, approval["jwks"])
                digest = hashlib.sha256(data).hexdigest()
                if claims.get("ns") != ns or claims.get("sha256") != digest:
                    raise fedlib.KeyMismatch("token does not cover this object")
            except fedlib.KeyMismatch as exc:
                log(f"refusing {self.path}: namespace key-mismatch: {exc}")
                incident(ns, f"origin token rejected: {exc}")
                return self.send(502, b"origin not trusted for this namespace\n")
        self.send(200, data)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    log("listening on :8447")
    http.server.ThreadingHTTPServer(("0.0.0.0", 8447), Handler).serve_forever()
