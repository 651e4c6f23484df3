"""What the local portal allocates: machines of a bare-metal pool (an emulated one: QEMU
guests with ipmi_sim BMCs), leased per experiment like a trial leases them.

An experiment holds its machines through the pool's leases (trial `portal-<id8>`, owner
this portal process), so two portals, a portal and trials, or `harness gc` after a killed
portal all see who holds what. Power and reload act through each machine's BMC. What
CloudLab's node setup gives a node, and gives again at every boot, is set up by `prepare`:
its hostname (a boot-time unit) and the experiment's `sshpubkey` for root (in
authorized_keys2); both are removed at termination, when the machine is also reset per
the pool's `reset`.
"""

from __future__ import annotations

import asyncio
import shlex
from concurrent.futures import ThreadPoolExecutor

from harness.errors import HarnessError, SubstrateError
from harness.substrates import ipmi, ssh
from harness.substrates.metal import emulate, lease, reset
from harness.substrates.metal.pool import Machine, Pool, load_pool

KEY_MARK = "hx-cloudlab-portal"
KEYS = "/root/.ssh/authorized_keys2"
STATE = "/var/lib/cloudlab-node"
UNIT = "cloudlab-node.service"
UNIT_TEXT = f"""[Unit]
Description=CloudLab node identity (the local portal's, re-applied at boot)
After=harness-seed.service
Before=ssh.service
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'n=$(cat {STATE}/hostname) && echo "$n" > /etc/hostname && hostname "$n"'
[Install]
WantedBy=multi-user.target
"""
BOOT_WAIT_SEC = 300.0


class PoolMachines:
    """The machines of one pool as the portal's aggregate."""

    def __init__(self, pool_name: str):
        self.pool_name = pool_name

    @property
    def pool(self) -> Pool:
        return load_pool(self.pool_name)

    def holder(self, experiment_id: str) -> str:
        return f"portal-{experiment_id[:8]}"

    def acquire(self, experiment_id: str, count: int) -> list[Machine]:
        """Lease `count` machines (HarnessError with who holds the rest when too few)."""
        holder = self.holder(experiment_id)
        machines = lease.acquire(self.pool, holder, "cloudlab-portal", count)
        lease.keep_alive(self.pool_name, holder)
        return machines

    def release(self, experiment_id: str, log=print) -> list[str]:
        """Reset (per the pool) and release every machine the experiment holds."""
        holder = self.holder(experiment_id)
        held = [m for m, r in lease.read(self.pool_name).items() if r.get("trial") == holder]
        if not held:
            return []
        pool = self.pool

        def one(name: str) -> None:
            if not pool.emulated:  # (an emulated machine's reimage needs no running guest)
                try:
                    self.power(name, "on")
                    self.wait_up(name)
                except HarnessError as exc:
                    log(f"portal: powering {name} on failed: {exc}")
            try:  # a machine whose BMC then refuses the harness is quarantined
                reset.reset_or_quarantine(pool, name, holder, log=log)
            except HarnessError as exc:  # still released: gc finds it dirty next time
                log(f"portal: resetting {name} failed: {exc}")

        with ThreadPoolExecutor(max_workers=max(1, len(held))) as workers:
            list(workers.map(one, held))
        return lease.release(self.pool_name, holder)

    def exec(self, name: str, cmd: str, timeout: float = 120.0):
        m = self.pool.machine(name)
        return asyncio.run(ssh.exec_on(m.ssh.host, m.ssh.key_path, cmd, timeout,
                                       user=m.ssh.user, port=m.ssh.port))

    def wait_up(self, name: str, timeout: float = BOOT_WAIT_SEC) -> None:
        m = self.pool.machine(name)
        asyncio.run(ssh.wait_ready(m.ssh.host, m.ssh.key_path, timeout, user=m.ssh.user,
                                   port=m.ssh.port))

    def prepare(self, name: str, hostname: str, pubkey: str | None) -> None:
        """What CloudLab's node setup does that a trial sees, and re-does at every boot: the
        node's hostname (the profile's node name) and the experiment's key for root (in
        authorized_keys2: an emulated machine's boot re-seeds authorized_keys)."""
        short = shlex.quote(hostname.split(".")[0])
        lines = [f"mkdir -p {STATE} && echo {short} > {STATE}/hostname",
                 f"printf '%s' {shlex.quote(UNIT_TEXT)} > /etc/systemd/system/{UNIT}",
                 f"systemctl daemon-reload && systemctl enable -q {UNIT}",
                 f"hostnamectl set-hostname {short}"]
        if pubkey:
            entry = f"{pubkey.strip()} {KEY_MARK}"
            lines += ["mkdir -p /root/.ssh && chmod 700 /root/.ssh",
                      f"grep -qxF {shlex.quote(entry)} {KEYS} 2>/dev/null"
                      f" || echo {shlex.quote(entry)} >> {KEYS}", f"chmod 600 {KEYS}"]
        lines.append("sync")  # on disk before anyone pulls the plug (a BMC power-off)
        res = self.exec(name, " && ".join(lines), 60)
        if not res.ok:
            raise SubstrateError("cloudlab-portal", f"preparing {name} failed", res.stderr)

    def forget_keys(self, name: str) -> None:
        """Undo `prepare` (the machine is reset after this anyway)."""
        self.exec(name, f"sed -i '/ {KEY_MARK}$/d' {KEYS} 2>/dev/null; "
                        f"systemctl disable -q {UNIT} 2>/dev/null; "
                        f"rm -rf /etc/systemd/system/{UNIT} {STATE}; sync; true", 60)

    def power(self, name: str, action: str) -> str:
        m = self.pool.machine(name)
        ssh.close_master(m.ssh.host, m.ssh.key_path)
        return ipmi.power(self.pool.bmc_credentials(m), action)

    def reload(self, name: str, log=print) -> None:
        """A reload: the machine's disk made new (reimage), as CloudLab reloads an image."""
        pool = self.pool
        if pool.emulated:  # (its BMC as it is: the experiment's in-band accounts stay;
            # termination resets the machine, its BMC included)
            emulate.reimage(pool, name, log=log, reset_bmc=False)
        else:
            reset.reset(pool, name, log=log)
