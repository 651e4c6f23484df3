"""The harness's own IPMI calls to a machine's BMC: `ipmitool` over the network, the
password passed in the environment (`-E`), never on a command line another user could
read in `ps`."""

from __future__ import annotations

import os
import subprocess

from harness.errors import SubstrateError

ACTIONS = {"on": "on", "off": "off", "cycle": "cycle", "reset": "reset", "status": "status",
           "soft": "soft"}


def ipmitool(creds: dict, *args: str, timeout: float = 30.0) -> str:
    """Run `ipmitool -I <interface> -H <address> -p <port> -U <user> -E <args>`; its stdout."""
    argv = ["ipmitool", "-I", str(creds.get("interface") or "lanplus"), "-H",
            str(creds["address"]), "-p", str(creds.get("port") or 623), "-U",
            str(creds["user"]), "-E", "-N", "2", "-R", "3", *args]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "IPMI_PASSWORD": str(creds["password"])})
    except subprocess.TimeoutExpired:
        raise SubstrateError("baremetal", f"BMC {creds['address']}: no answer to "
                             f"`ipmitool {' '.join(args)}` in {timeout:.0f}s") from None
    if proc.returncode != 0:
        raise SubstrateError("baremetal", f"BMC {creds['address']}: `ipmitool "
                             f"{' '.join(args)}` failed", proc.stderr.strip()[-300:])
    return proc.stdout


def power(creds: dict, action: str) -> str:
    """Chassis power `action` (on/off/cycle/reset/soft/status); for status "on" or "off"."""
    if action not in ACTIONS:
        raise SubstrateError("baremetal", f"unknown power action {action!r} (valid: "
                             f"{', '.join(ACTIONS)})")
    out = ipmitool(creds, "chassis", "power", ACTIONS[action])
    if action == "status":
        return "on" if out.strip().endswith("on") else "off"
    return out.strip()
