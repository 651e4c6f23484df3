"""Between trials a machine is made clean again, per its pool's `reset`:

- `reimage`: an emulated machine's disk reverts to the pristine image (power off through
  its BMC, a new overlay, power on); a real pool runs its `reimage_command` on this host
  with `HX_POOL`, `HX_MACHINE`, `HX_SSH_HOST`, `HX_BMC_ADDRESS` (and the BMC credentials
  as `HX_BMC_USER` / `HX_BMC_PASSWORD`, in its environment only);
- `power-cycle`: the harness's own files are removed over SSH (`CLEANUP`), then the chassis
  is power-cycled through the BMC;
- `none`: the harness's own files are removed.

Before a trial starts on a machine, `dirty()` lists what a clean machine must not have
(the harness's files, fault ledgers): a machine that is not clean is refused.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

from harness.errors import SubstrateError
from harness.substrates.baremetal import emulate, ipmi
from harness.substrates.baremetal.pool import Machine, Pool
from harness.substrates.libvirt import ssh

# what a trial leaves on a machine (cluster-info, syscraft helpers, BMC credentials, fault
# ledgers, the verifier's and agents' directories) and, in root's ~/.ssh, the cluster key
# and its config block (roles/harness_cluster_ssh: comment `harness-cluster`)
HARNESS_PATHS = ("/etc/harness", "/etc/syscraft", "/opt/syscraft", "/var/lib/harness",
                 "/run/harness", "/tests", "/solution", "/logs", "/installed-agent")
# (/etc/harness itself may be there: an emulated machine's seed disk makes an empty one)
DIRTY = ("for p in " + " ".join(p for p in HARNESS_PATHS if p != "/etc/harness")
         + " /etc/harness/bmc-credentials; do [ -e \"$p\" ] && echo \"$p\"; done; "
         "grep -qs '^trial=' /etc/harness/cluster-info && echo /etc/harness/cluster-info; "
         "sync; true")  # (sync: what boot wrote, e.g. the SSH host key, survives a hard reset)
CLEANUP = ("rm -rf " + " ".join(HARNESS_PATHS) + "; cd /root/.ssh 2>/dev/null && { "
           "sed -i '/ harness-cluster$/d' authorized_keys authorized_keys2; "
           "sed -i '/^# BEGIN harness cluster$/,/^# END harness cluster$/d' config; "
           "grep -qs ' harness-cluster$' id_ed25519.pub && rm -f id_ed25519 id_ed25519.pub; "
           "}; sync")


def _exec(m: Machine, cmd: str, timeout: float = 120):
    return asyncio.run(ssh.exec_on(m.ssh.host, m.ssh.key_path, cmd, timeout,
                                   user=m.ssh.user, port=m.ssh.port))


def dirty(m: Machine) -> list[str]:
    """What of a trial is still on the machine ([] when clean)."""
    res = _exec(m, DIRTY, 60)
    if not res.ok:
        raise SubstrateError("baremetal", f"{m.name} ({m.ssh.host}): cannot check it is clean",
                             res.stderr)
    return res.stdout.split()


def reset(pool: Pool, name: str, log=print) -> str:
    """Make machine `name` clean per the pool's `reset`; returns what was done."""
    m = pool.machine(name)
    if pool.reset == "reimage":
        if pool.emulated:
            emulate.reimage(pool, name, log=log)
        else:
            creds = pool.bmc_credentials(m) if m.bmc else {}
            env = {**os.environ, "HX_POOL": pool.name, "HX_MACHINE": name,
                   "HX_SSH_HOST": m.ssh.host, "HX_BMC_ADDRESS": str(creds.get("address", "")),
                   "HX_BMC_USER": str(creds.get("user", "")),
                   "HX_BMC_PASSWORD": str(creds.get("password", ""))}
            proc = subprocess.run(["sh", "-c", pool.reimage_command], env=env,
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise SubstrateError("baremetal", f"reimage_command failed for {name} "
                                     f"(exit {proc.returncode})", proc.stderr[-300:])
        return "reimage"
    res = _exec(m, CLEANUP)
    if not res.ok:
        raise SubstrateError("baremetal", f"cleaning {name} failed", res.stderr)
    if pool.reset == "power-cycle":
        creds = pool.bmc_credentials(m)
        ipmi.power(creds, "cycle")
        time.sleep(2)
        return "cleanup + power-cycle"
    return "cleanup"
