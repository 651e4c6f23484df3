#!/usr/bin/env python3
"""queue-worker: accepts jobs over HTTP and appends each to a spool shard (held open while
the batch is flushed), with an index of every shard kept open for fast lookups."""
import http.server
import os
import sys
import time
import urllib.parse

SPOOL = "/var/lib/queue-worker"
SHARDS = 32

os.makedirs(SPOOL, exist_ok=True)
index = [open(os.path.join(SPOOL, f"shard-{i:02d}.idx"), "a") for i in range(SHARDS)]


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code: int, text: str) -> None:
        data = (text + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            return self.reply(200, "ok")
        self.reply(404, "not found")

    def do_POST(self):
        url = urllib.parse.urlparse(self.path)
        job = urllib.parse.parse_qs(url.query).get("id", [""])[0]
        if url.path != "/enqueue" or not job.isalnum():
            return self.reply(400, "bad request")
        shard = sum(job.encode()) % SHARDS
        try:
            with open(os.path.join(SPOOL, f"shard-{shard:02d}.log"), "a") as fh:
                fh.write(f"{time.time():.3f} {job}\n")
                fh.flush()
                time.sleep(0.4)  # group commit: hold the shard until the batch flushes
                os.fsync(fh.fileno())
        except OSError as exc:
            print(f"queue-worker: rejecting job {job}: {exc}", file=sys.stderr, flush=True)
            return self.reply(503, f"rejected: {exc}")
        self.reply(200, "queued")

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 128


if __name__ == "__main__":
    print("queue-worker: listening on :8090", flush=True)
    Server(("0.0.0.0", 8090), Handler).serve_forever()
