"""`python -m harness.substrates.docker.engine start|stop|kill|status` (start/stop need root).

`--name N --bridge B --bridge-addr CIDR` address a second engine (`Engine.named`) beside the
harness's own one, e.g. to stand in for a remote host: its socket is
`/run/harness/N/docker.sock`. `kill` stops it with SIGKILL, as a crashed host would.
"""

from __future__ import annotations

import argparse
import json
import sys

from harness.errors import PreflightError
from harness.substrates.docker.engine import (
    DEFAULT,
    Engine,
    client,
    remove_bridge,
    start,
    status,
    stop,
)

parser = argparse.ArgumentParser(prog="python -m harness.substrates.docker.engine")
parser.add_argument("verb", nargs="?", default="status",
                    choices=["start", "stop", "kill", "status"])
parser.add_argument("--name", help="a second engine's name (default: the harness's engine)")
parser.add_argument("--bridge", default="", help="its default bridge (hx*)")
parser.add_argument("--bridge-addr", default="", help="the bridge's address, CIDR")
args = parser.parse_args()
try:
    eng = DEFAULT
    if args.name:
        if not (args.bridge and args.bridge_addr):
            raise PreflightError("--name needs --bridge and --bridge-addr")
        eng = Engine.named(args.name, args.bridge, args.bridge_addr)
    if args.verb == "start":
        start(eng=eng)
    elif args.verb in ("stop", "kill"):
        stop(eng, signal=9 if args.verb == "kill" else 15)
        if eng is not DEFAULT:
            remove_bridge(eng)
    elif eng is DEFAULT:
        print(json.dumps(status(), indent=2))
    else:
        print(json.dumps({"host": eng.host,
                          "version": client(timeout=10, host=eng.host).version()["Version"]}))
except PreflightError as exc:
    print(f"error: {exc.message}", file=sys.stderr)
    sys.exit(2)
