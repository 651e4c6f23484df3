"""Reimage without a boot: an emulated machine goes back to its saved first boot.

When `harness pool emulate` makes a machine, right after its first boot (SSH answers,
/dev/ipmi0 is there) its memory and device state is saved (libvirt save) and its disk is
copied while it is stopped::

    $HARNESS_HOME/pools/NAME/nodeI-booted.save    libvirt save image (memory, devices)
    $HARNESS_HOME/pools/NAME/nodeI-booted.qcow2   the disk as saved (an overlay on the image)
    $HARNESS_HOME/pools/NAME/nodeI-booted.json    base image and QEMU/libvirt versions it needs

A reimage then powers the machine off through its BMC, copies the saved disk over the
machine's disk, leaves a marker (`nodeI.restore`) and powers it on through its BMC: the
BMC's power-on command (`emulate power --restore ...`) removes the marker and restores the
save image instead of booting (any later power-on boots, as a machine does). The guest
wakes with the clock of its save: the reimage steps it to the host's over SSH. A save
that does not match (another base image, QEMU or libvirt) or a restore that does not
answer makes the reimage cold (a new overlay, a boot), with the reason in the log; a
restore that failed drops the saved state. A machine is the same machine after either
(its name, addresses and keys are its own), so nothing in the guest needs a fix-up but
the clock. `HARNESS_VM_START=cold` makes every reimage cold.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from harness.errors import SubstrateError
from harness.substrates import ssh
from harness.substrates.common import RESEED_CRNG

RESTORE_WAIT_SEC = 120
FIXUP = ("echo ready && read -r seed && read -r now && date -u -s \"@$now\" >/dev/null && "
         "echo \"$seed\" | base64 -d | " + RESEED_CRNG)


def files(pool_dir: Path, node: str) -> dict[str, Path]:
    return {"save": pool_dir / f"{node}-booted.save", "disk": pool_dir / f"{node}-booted.qcow2",
            "meta": pool_dir / f"{node}-booted.json", "marker": pool_dir / f"{node}.restore"}


def _needs(conn, base: Path) -> dict:
    stat = base.resolve().stat()
    return {"base": str(base.resolve()), "base_mtime": int(stat.st_mtime),
            "libvirt": conn.getLibVersion(), "qemu": conn.getVersion()}


def capture(conn, domain: str, disk: Path, pool_dir: Path, node: str, base: Path,
            boot_id: str) -> None:
    """Save running `domain` (it stops: its BMC then reports the chassis off) and copy
    its disk next to the save; published atomically (the meta file last). `boot_id` is the
    guest's, kept in the meta file: a restored guest still has it, a booted one has not."""
    f = files(pool_dir, node)
    drop(pool_dir, node)
    needs = _needs(conn, base)
    tmp_save, tmp_disk = (f[k].with_name(f[k].name + ".tmp") for k in ("save", "disk"))
    try:
        subprocess.run(["sync"], check=False)
        conn.lookupByName(domain).save(str(tmp_save))
        subprocess.run(["cp", "--sparse=always", str(disk), str(tmp_disk)], check=True)
        tmp_save.replace(f["save"])
        tmp_disk.replace(f["disk"])
        f["meta"].write_text(json.dumps({**needs, "saved": time.time(),
                                                 "boot_id": boot_id}) + "\n")
    finally:
        tmp_save.unlink(missing_ok=True)
        tmp_disk.unlink(missing_ok=True)


def unusable(conn, pool_dir: Path, node: str, base: Path) -> str | None:
    """Why the machine's saved first boot cannot be restored now (None: it can)."""
    if os.environ.get("HARNESS_VM_START") == "cold":
        return "HARNESS_VM_START=cold"
    f = files(pool_dir, node)
    if not all(f[k].exists() for k in ("save", "disk", "meta")):
        return "no saved first boot"
    try:
        saved = json.loads(f["meta"].read_text())
    except (OSError, ValueError) as exc:
        return f"{f['meta']}: {exc}"
    now = _needs(conn, base)
    changed = [k for k in now if saved.get(k) != now[k]]
    return f"saved with another {', '.join(changed)}" if changed else None


def stage(pool_dir: Path, node: str, disk: Path) -> None:
    """The saved disk over the machine's disk, and the marker its next power-on restores by."""
    f = files(pool_dir, node)
    tmp = disk.with_suffix(".tmp")
    subprocess.run(["cp", "--sparse=always", str(f["disk"]), str(tmp)], check=True)
    tmp.replace(disk)
    f["marker"].touch()


def drop(pool_dir: Path, node: str) -> None:
    for path in files(pool_dir, node).values():
        path.unlink(missing_ok=True)


def settle(machine, timeout: float = RESTORE_WAIT_SEC) -> None:
    """Wait until the restored machine answers SSH, then step its clock to the host's and
    reseed its RNG (every restore wakes with the saved RNG state) from the host's bytes."""
    key = machine.ssh.key_path
    ssh.close_master(machine.ssh.host, key)  # (a connection of before the save is dead)

    async def go():
        await ssh.wait_ready(machine.ssh.host, key, timeout)
        return await asyncio.wait_for(_fix_up(machine), 30)
    try:
        rc, err = asyncio.run(go())
    except TimeoutError:
        rc, err = 124, "timed out"
    if rc != 0:
        raise SubstrateError("baremetal", f"{machine.name}: stepping its clock failed", err)


async def _fix_up(machine) -> tuple[int, str]:
    """Run FIXUP with the host's time sent once the guest's shell is ready to read it, so the
    clock it steps to is late by one trip over the open connection, not by an SSH login."""
    user = machine.ssh.user
    argv = ssh.ssh_argv(machine.ssh.host, machine.ssh.key_path, user=user, port=machine.ssh.port)
    proc = await asyncio.create_subprocess_exec(
        *argv, ssh.as_root(FIXUP, user), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True)
    try:
        if (await proc.stdout.readline()).strip() == b"ready":
            seed = base64.b64encode(os.urandom(512)).decode()
            proc.stdin.write(f"{seed}\n{time.time():.6f}\n".encode())
            await proc.stdin.drain()
        proc.stdin.close()
        _, err = await proc.communicate()
        return proc.returncode, err.decode(errors="replace")
    finally:
        if proc.returncode is None:  # timed out: its group goes, as `ssh.run` does it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


def power_on(dom, conn, save: Path | None, marker: Path | None) -> str:
    """The BMC's power-on: restore the saved first boot when a reimage left the marker
    (the marker is consumed either way), else boot. Returns how it started."""
    import libvirt  # the libvirt SDK: an optional extra of the vm substrates

    if save and marker and marker.exists():
        marker.unlink(missing_ok=True)
        try:
            conn.restore(str(save))
            return "restored"
        except libvirt.libvirtError as exc:
            print(f"restore of {save} failed, booting instead: {exc}", flush=True)
    if not dom.isActive():
        dom.create()
    return "booted"

