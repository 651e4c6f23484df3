"""`python -m harness.substrates.docker.engine start|stop|kill|status` (start/stop need root).

`--name N --bridge B --bridge-addr CIDR` address a second engine (`Engine.named`) beside the
harness's own one, e.g. to stand in for a remote host: its socket is
`/run/harness/N/docker.sock`; with `--tcp IP:PORT` it listens there too, TLS with client
certificates (files in /etc/harness/N-tls; a hosts file's `tls:` names its ca.pem, cert.pem
and key.pem). `kill` stops it with SIGKILL, as a crashed host would.

`certs DIR --ip IP` makes such a set of files for any engine (`tls.ensure_certs`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.errors import PreflightError
from harness.substrates.docker.engine import (
    DEFAULT,
    Engine,
    client,
    remove_bridge,
    start,
    status,
    stop,
    tls,
)

parser = argparse.ArgumentParser(prog="python -m harness.substrates.docker.engine")
parser.add_argument("verb", nargs="?", default="status",
                    choices=["start", "stop", "kill", "status", "certs"])
parser.add_argument("dir", nargs="?", help="certs: where to write them")
parser.add_argument("--name", help="a second engine's name (default: the harness's engine)")
parser.add_argument("--bridge", default="", help="its default bridge (hx*)")
parser.add_argument("--bridge-addr", default="", help="the bridge's address, CIDR")
parser.add_argument("--tcp", default="", help="a second engine's TLS listener, IP:PORT")
parser.add_argument("--ip", action="append", default=[],
                    help="certs: an address the engine is reached at (repeatable)")
args = parser.parse_args()
try:
    eng = DEFAULT
    if args.verb == "certs":
        if not (args.dir and args.ip):
            raise PreflightError("certs needs a directory and --ip (e.g. certs /etc/harness/"
                                 "engine-tls --ip 192.0.2.10)")
        print(tls.ensure_certs(Path(args.dir), tuple(args.ip)))
        sys.exit(0)
    if args.name:
        if not (args.bridge and args.bridge_addr):
            raise PreflightError("--name needs --bridge and --bridge-addr")
        eng = Engine.named(args.name, args.bridge, args.bridge_addr, tcp=args.tcp)
    elif args.tcp:
        raise PreflightError("--tcp applies to a second engine (--name)")
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
