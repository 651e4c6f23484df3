#!/usr/bin/env python3
"""fed-registry: the namespace registry. Holds each namespace's approved issuer JWKS in
/var/lib/fed-registry/namespaces.json (managed with fed-registry-admin) and checks origin
advertisements against it."""
import http.server
import json
import sys

sys.path.insert(0, "/usr/local/lib/fed")
import fedlib  # noqa: E402

DB = "/var/lib/fed-registry/namespaces.json"


def approvals() -> dict:
    with open(DB) as fh:
        return json.load(fh)


class Handler(http.server.BaseHTTPRequestHandler):
    def send(self, code: int, obj) -> None:
        body = (json.dumps(obj) if not isinstance(obj, str) else obj).encode() + b"\n"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/api/v1/namespaces/"):
            ns = "/" + self.path[len("/api/v1/namespaces/"):].strip("/")
            entry = approvals().get(ns)
            if not entry:
                return self.send(404, {"error": "unknown namespace"})
            return self.send(200, entry)
        self.send(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/api/v1/advertise":
            return self.send(404, {"error": "not found"})
        tok = self.headers.get("Authorization", "").removeprefix("Bearer ")
        try:
            ns = fedlib.json.loads(fedlib.unb64u(tok.split(".")[1])).get("ns", "?")
        except (ValueError, IndexError):
            return self.send(400, "malformed advertisement")
        entry = approvals().get(ns)
        if not entry:
            return self.send(403, f"namespace {ns} is not registered")
        try:
            fedlib.verify(tok, entry["jwks"])
        except fedlib.KeyMismatch as exc:
            print(f"fed-registry: rejected advertisement for {ns}: namespace key-mismatch: {exc}",
                  flush=True)
            return self.send(403, f"namespace key-mismatch for {ns}: {exc}")
        self.send(200, {"status": "ok"})

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    print("fed-registry: listening on :8446", flush=True)
    http.server.ThreadingHTTPServer(("0.0.0.0", 8446), Handler).serve_forever()
