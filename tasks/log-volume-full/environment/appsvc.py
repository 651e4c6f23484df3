#!/usr/bin/env python3
"""appsvc: a tiny HTTP service that logs to /var/log/app/app.log and dies when it cannot."""
import http.server
import os
import sys
import threading
import time

CONF = "/etc/appsvc/appsvc.conf"
LOG = "/var/log/app/app.log"


def level() -> str:
    try:
        for line in open(CONF):
            if line.strip().startswith("LOG_LEVEL="):
                return line.split("=", 1)[1].strip().lower()
    except OSError:
        pass
    return "info"


def logger(lvl: str) -> None:
    noise = ("debug: request trace " + "x" * 1000 + "\n") * 100
    with open(LOG, "a") as fh:
        while True:
            try:
                fh.write(f"{time.time():.3f} info: heartbeat\n")
                if lvl == "debug":
                    fh.write(noise)
                fh.flush()
            except OSError as exc:
                print(f"appsvc: cannot write {LOG}: {exc}", file=sys.stderr, flush=True)
                os._exit(1)
            time.sleep(0.1)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"ok\n" if self.path == "/health" else b"appsvc\n"
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    os.makedirs(os.path.dirname(LOG), exist_ok=True)
    threading.Thread(target=logger, args=(level(),), daemon=True).start()
    http.server.ThreadingHTTPServer(("0.0.0.0", 8080), Health).serve_forever()
