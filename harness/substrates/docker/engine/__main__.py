"""`python -m harness.substrates.docker.engine start|stop|status` (start/stop need root)."""

from __future__ import annotations

import json
import sys

from harness.errors import PreflightError
from harness.substrates.docker.engine import start, status, stop

verb = sys.argv[1] if len(sys.argv) > 1 else "status"
try:
    if verb == "start":
        start()
    elif verb == "stop":
        stop()
    else:
        print(json.dumps(status(), indent=2))
except PreflightError as exc:
    print(f"error: {exc.message}", file=sys.stderr)
    sys.exit(2)
