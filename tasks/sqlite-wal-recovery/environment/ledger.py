#!/usr/bin/env python3
"""ledger: a tiny order API over a SQLite database in WAL mode."""
import http.server
import json
import sqlite3
import sys
import threading

DB = "/var/lib/ledger/ledger.db"
lock = threading.Lock()


def connect() -> sqlite3.Connection:
    conn = sqlite3.connect(DB, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("SELECT count(*) FROM orders").fetchone()
    return conn


class Api(http.server.BaseHTTPRequestHandler):
    def reply(self, code: int, body: dict) -> None:
        data = (json.dumps(body) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        try:
            with lock:
                if self.path == "/health":
                    n = conn.execute("SELECT count(*) FROM orders").fetchone()[0]
                    return self.reply(200, {"status": "ok", "orders": n})
                if self.path.startswith("/orders/"):
                    row = conn.execute("SELECT id, customer, amount_cents FROM orders "
                                       "WHERE id = ?", (int(self.path[8:]),)).fetchone()
                    if row is None:
                        return self.reply(404, {"error": "no such order"})
                    return self.reply(200, dict(zip(("id", "customer", "amount_cents"), row,
                                                        strict=True)))
        except (ValueError, sqlite3.Error) as exc:
            return self.reply(500, {"error": str(exc)})
        self.reply(404, {"error": "not found"})

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    try:
        conn = connect()
    except sqlite3.Error as exc:
        print(f"ledger: cannot open {DB}: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
    print("ledger: serving on :8080", flush=True)
    http.server.ThreadingHTTPServer(("0.0.0.0", 8080), Api).serve_forever()
