"""A raw QEMU guest: the same kernel, initrd, overlay and seed disk as a trial node, booted by
qemu-system-x86_64 alone (user networking restricted to a forwarded SSH port, no libvirt, no
Terraform, no Ansible). It is the baseline bench/vm_boot.py measures boots against, and the
builder of per-task images (`task_image`), which runs a task's setup.sh in it once."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from harness.errors import SubstrateError
from harness.substrates import ssh
from harness.substrates.hypervisor.image import KERNEL_CMDLINE, build_vm_image, kernel_paths

MAKE_DISKS = Path(__file__).resolve().parent / "terraform" / "files" / "make-disks.sh"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RawGuest:
    """A booted raw guest reachable over SSH on 127.0.0.1:`port`."""

    port: int
    key: Path
    boot_sec: float
    qemu: subprocess.Popen

    def argv(self) -> list[str]:
        base = ssh.ssh_argv("127.0.0.1", self.key, connect_timeout=5)
        return [*base[:-1], "-p", str(self.port), base[-1]]

    def run(self, cmd: str, timeout: float, stdin: bytes | None = None,
            log: Path | None = None) -> subprocess.CompletedProcess:
        """Run `cmd` in bash on the guest (output appended to `log` when given)."""
        out = log.open("ab") if log else subprocess.PIPE
        try:
            return subprocess.run([*self.argv(), ssh.remote_command(cmd, timeout)], input=stdin,
                                  stdout=out, stderr=subprocess.STDOUT, timeout=timeout + 30)
        finally:
            if log:
                out.close()

    def poweroff(self, timeout: float = 120.0) -> None:
        """Flush the guest's disks and power it off; QEMU exits (it runs with -no-reboot)."""
        self.run("sync; systemctl poweroff --no-block", timeout=30)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.qemu.wait(timeout=timeout)


@contextlib.contextmanager
def raw_guest(work: Path, base: Path | None = None, accel: str = "tcg", overlay: Path | None = None,
              timeout: float = 240.0, memory_mb: int = 1024) -> Iterator[RawGuest]:
    """Boot an overlay of `base` (default: the cached base image) until SSH answers."""
    base = base or build_vm_image(log=lambda _: None)
    kernel, initrd = kernel_paths(base)
    overlay = overlay or work / "hx-raw.qcow2"
    pub = ssh.ensure_key(work, "hx-raw-guest")
    env = {**os.environ, "HX_BASE": str(base), "HX_OVERLAY": str(overlay),
           "HX_SEED": str(work / "hx-raw-seed.img"), "HX_HOSTNAME": "raw",
           "HX_HOSTS": "127.0.0.1\tlocalhost\n", "HX_CLUSTER_INFO": "",
           "HX_AUTHORIZED_KEYS": pub}
    subprocess.run([str(MAKE_DISKS)], env=env, check=True, capture_output=True)
    port = _free_port()
    started = time.monotonic()
    qemu = subprocess.Popen(
        ["qemu-system-x86_64", "-machine", f"pc,accel={accel}", "-m", str(memory_mb),
         "-smp", "1", "-no-reboot",
         "-kernel", str(kernel), "-initrd", str(initrd), "-append", KERNEL_CMDLINE,
         "-drive", f"file={overlay},if=virtio,format=qcow2",
         "-drive", f"file={work / 'hx-raw-seed.img'},if=virtio,format=raw",
         "-netdev", f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:22",
         "-device", "virtio-net-pci,netdev=n0", "-display", "none",
         "-serial", f"file:{work / 'console.log'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        guest = RawGuest(port, ssh.key_path(work), 0.0, qemu)
        while time.monotonic() - started < timeout:
            probe = subprocess.run([*guest.argv(), "true"], capture_output=True, timeout=30)
            if probe.returncode == 0:
                guest.boot_sec = time.monotonic() - started
                break
            if qemu.poll() is not None:
                raise SubstrateError("vm", "raw qemu exited: "
                                     + qemu.stderr.read().decode()[-500:])
            time.sleep(0.5)
        else:
            raise SubstrateError("vm", f"raw qemu guest not reachable over SSH in {timeout:.0f}s "
                                       f"(console: {work / 'console.log'})")
        yield guest
    finally:
        if qemu.poll() is None:
            qemu.kill()
        qemu.wait()
        (work / "hx-raw-seed.img").unlink(missing_ok=True)


def raw_boot_to_ssh(work: Path, accel: str = "tcg", timeout: float = 240.0) -> float:
    """Seconds from starting QEMU to the first successful SSH command in the guest."""
    with raw_guest(work, accel=accel, timeout=timeout) as guest:
        return guest.boot_sec


def raw_cluster_boot_to_ssh(work: Path, nodes: int, accel: str = "tcg",
                            timeout: float = 240.0) -> float:
    """Seconds from starting `nodes` raw guests at once to the last one's first successful
    SSH command: the raw way to bring up that many nodes (each guest keeps running until
    all answer, as a cluster's nodes do)."""
    all_up = threading.Barrier(nodes)
    started = time.monotonic()

    def one(i: int) -> float:
        node_dir = work / f"raw-node{i}"
        node_dir.mkdir(parents=True, exist_ok=True)
        with raw_guest(node_dir, accel=accel, timeout=timeout):
            up = time.monotonic() - started
            all_up.wait(timeout)
            return up

    with ThreadPoolExecutor(nodes) as pool:
        futures = [pool.submit(one, i) for i in range(nodes)]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        if any(f.exception() for f in done):
            all_up.abort()  # the others stop waiting and power off
        return max(f.result() for f in futures)
