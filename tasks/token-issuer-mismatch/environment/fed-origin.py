#!/usr/bin/env python3
"""fed-origin: serves the /fed/public namespace's objects, each response carrying a token
signed with the origin's issuer key, and advertises itself to the registry every 2 s."""
import hashlib
import http.server
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, "/usr/local/lib/fed")
import fedlib  # noqa: E402

CONF = dict(line.strip().split("=", 1) for line in open("/etc/fed-origin/origin.conf")
            if "=" in line and not line.startswith("#"))
KEY = fedlib.load_key(CONF["ISSUER_KEY"])
NS = CONF["NAMESPACE"]
EXPORT = CONF["EXPORT_DIR"]
ME = CONF["ISSUER_URL"]


def log(msg: str) -> None:
    print(f"fed-origin: {msg}", flush=True)


def advertise() -> None:
    last = None
    while True:
        tok = fedlib.sign(KEY, {"iss": ME, "ns": NS, "sub": "advertise"})
        req = urllib.request.Request(CONF["REGISTRY_URL"] + "/api/v1/advertise", method="POST",
                                     headers={"Authorization": "Bearer " + tok})
        try:
            with urllib.request.urlopen(req, timeout=3):
                state = "ok"
        except urllib.error.HTTPError as exc:
            state = exc.read().decode(errors="replace").strip()
        except OSError as exc:
            state = f"registry unreachable: {exc}"
        if state != "ok":
            log(f"advertise {NS} failed: {state}")
        elif last != "ok":
            log(f"advertise {NS} accepted by the registry")
        last = state
        time.sleep(2)


class Handler(http.server.BaseHTTPRequestHandler):
    def send(self, code: int, body: bytes, headers: dict | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/.well-known/issuer.jwks":
            return self.send(200, json.dumps(fedlib.jwks(KEY)).encode(),
                             {"Content-Type": "application/json"})
        if self.path.startswith("/objects/"):
            name = os.path.basename(self.path[len("/objects/"):])
            try:
                data = open(os.path.join(EXPORT, name), "rb").read()
            except OSError:
                return self.send(404, b"no such object\n")
            tok = fedlib.sign(KEY, {"iss": ME, "ns": NS, "obj": name,
                                    "sha256": hashlib.sha256(data).hexdigest()})
            return self.send(200, data, {"X-Fed-Token": tok})
        self.send(404, b"not found\n")

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    log(f"serving {NS} from {EXPORT}, issuer kid={fedlib.jwk(KEY.public_key())['kid']}")
    threading.Thread(target=advertise, daemon=True).start()
    http.server.ThreadingHTTPServer(("0.0.0.0", 8444), Handler).serve_forever()
