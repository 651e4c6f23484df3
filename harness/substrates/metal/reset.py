"""Between trials a machine is made clean again, per its pool's `reset`:

- `reimage`: an emulated machine's disk reverts to the pristine image and its BMC to its
  configuration (`emulate.reimage`); a real pool runs its `reimage_command` on this host
  with `HX_POOL`, `HX_MACHINE`, `HX_SSH_HOST`, `HX_BMC_ADDRESS` (and the harness's BMC
  credentials as `HX_BMC_USER` / `HX_BMC_PASSWORD`, in its environment only);
- `power-cycle`: the harness's own files are removed over SSH (`CLEANUP`), then the chassis
  is power-cycled through the BMC;
- `none`: the harness's own files are removed.

Every reset also restores the BMC's two accounts and its LAN channel (`accounts`): on a
real machine first, out of band through the harness account when the BMC still accepts
it, else in-band on the node; and the harness account must work afterwards, else
`ipmi.BmcRefused` (the caller quarantines the machine).

Before a trial starts on a machine, `dirty()` lists what a clean machine must not have
(the harness's files, fault ledgers): a machine that is not clean is refused.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

from harness.errors import HarnessError, SubstrateError
from harness.substrates import ipmi, ssh
from harness.substrates.metal import accounts, emulate, lease
from harness.substrates.metal.pool import Machine, Pool, load_pool

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
    """Make machine `name` clean per the pool's `reset`, its BMC's accounts restored;
    returns what was done. `ipmi.BmcRefused` when its BMC no longer accepts the harness."""
    m = pool.machine(name)
    if pool.reset == "reimage" and pool.emulated:
        emulate.reimage(pool, name, log=log)  # (the BMC restored from its configuration)
        return "reimage"
    restored = restore_bmc(pool, m, log)
    if pool.reset == "reimage":
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
        verify_bmc(pool, m)
        return f"reimage{restored}"
    res = _exec(m, CLEANUP)
    if not res.ok and m.bmc and ipmi.power(pool.bmc_credentials(m), "status") == "off":
        ipmi.power(pool.bmc_credentials(m), "on")  # (a task left it off: clean it up first)
        asyncio.run(ssh.wait_ready(m.ssh.host, m.ssh.key_path, 600, user=m.ssh.user,
                                   port=m.ssh.port))
        res = _exec(m, CLEANUP)
    if not res.ok:
        raise SubstrateError("baremetal", f"cleaning {name} failed", res.stderr)
    if pool.reset == "power-cycle":
        creds = pool.bmc_credentials(m)
        ipmi.power(creds, "cycle")
        time.sleep(2)
        verify_bmc(pool, m)
        return f"cleanup + power-cycle{restored}"
    verify_bmc(pool, m)
    return f"cleanup{restored}"


def verify_bmc(pool: Pool, m: Machine) -> None:
    """After a reset: the BMC accepts the harness (else `ipmi.BmcRefused`, also when it no
    longer answers)."""
    if m.bmc is None:
        return
    try:
        accounts.check(pool.bmc_credentials(m))
    except ipmi.BmcRefused as exc:
        hint = "" if pool.has_harness_account(m) else (
            " (the pool gives the harness no account of its own, `bmc.harness`: a task that "
            "changes the task-facing password locks it out)")
        raise ipmi.BmcRefused(str(exc).removeprefix("baremetal: ") + hint) from None
    except SubstrateError as exc:
        raise ipmi.BmcRefused(str(exc).removeprefix("baremetal: ") + " after its reset") \
            from None


def restore_bmc(pool: Pool, m: Machine, log=print) -> str:
    """A real machine's BMC accounts and LAN channel as the pool says, before its reset:
    out of band through the harness account while the BMC accepts it, else in-band on
    the node (root; the passwords on stdin). What was done, for the reset's summary ("" for
    a pool without a harness account: nothing to restore with)."""
    if m.bmc is None or not pool.has_harness_account(m):
        return ""
    harness, task = pool.bmc_credentials(m), pool.task_credentials(m)
    try:
        accounts.check(harness)
        accounts.restore_out_of_band(harness, task)
        return " + BMC accounts restored"
    except SubstrateError as exc:
        log(f"pool {pool.name}: {m.name}: {exc}; restoring its BMC in-band")
    res = asyncio.run(ssh.exec_on(
        m.ssh.host, m.ssh.key_path, accounts.in_band_script(m.bmc.address, m.bmc.channel), 120,
        stdin=accounts.in_band_stdin(harness, task), user=m.ssh.user, port=m.ssh.port))
    if not res.ok:
        log(f"pool {pool.name}: {m.name}: in-band BMC restore failed: {res.stderr.strip()}")
    return " + BMC accounts restored in-band"


def repair(pool: Pool, name: str, log=print) -> str:
    """Bring back a machine whose BMC refused the harness: an emulated one gets its BMC
    configuration made again (a new harness password), ipmi_sim restarted without its
    persisted state, and is reimaged; a real one has its BMC accounts restored (out of
    band, else in-band) and is reset. The harness account must work afterwards (else
    `ipmi.BmcRefused`). What was done."""
    if pool.emulated:
        emulate.repair(pool, name, log=log)
        return "BMC configuration regenerated (new harness password), BMC restarted, reimaged"
    return reset(pool, name, log=log)


def reset_or_quarantine(pool: Pool, machine: str, trial: str | None = None, log=None) -> str:
    """Reset a machine (the pool's reset, its BMC restored); one whose BMC then refuses the
    harness is quarantined instead (said on stderr), one already quarantined is left
    alone. What was done; other reset failures raise (the caller keeps the lease for gc)."""
    if machine in lease.quarantined(pool.name):
        return "quarantined: left for `harness pool repair`"
    try:
        return reset(pool, machine, log=log or (lambda m: None))
    except ipmi.BmcRefused as exc:
        record = lease.quarantine(pool.name, machine, str(exc).removeprefix("baremetal: "),
                                  trial)
        print(f"machine {machine} of pool {pool.name} is quarantined: {record['reason']}; "
              f"`{record['repair']}` brings it back", file=sys.stderr)
        return f"quarantined: {record['reason']}"


def main(argv: list[str] | None = None) -> int:
    """`release --pool P --trial T --machine M`: the trial's Terraform destroy step. The
    machine is reset (or quarantined when its BMC refuses the harness) and its lease
    released; a reset that fails otherwise keeps the lease, for gc to retry."""
    parser = argparse.ArgumentParser(prog="python -m harness.substrates.metal.reset")
    parser.add_argument("action", choices=("release",))
    parser.add_argument("--pool", required=True)
    parser.add_argument("--trial", required=True)
    parser.add_argument("--machine", required=True)
    args = parser.parse_args(argv)
    if lease.read(args.pool).get(args.machine, {}).get("trial") == args.trial:
        try:
            reset_or_quarantine(load_pool(args.pool), args.machine, args.trial)
        except HarnessError as exc:
            print(f"machine {args.machine} of pool {args.pool}: {exc}; its lease is kept "
                  "for `harness gc`", file=sys.stderr)
            return 1
    lease.release(args.pool, args.trial, [args.machine])
    return 0


if __name__ == "__main__":
    sys.exit(main())
