"""The VM base image, built offline: debootstrap rootfs -> ext4 (`mkfs.ext4 -d`) -> qcow2.

No loop device, mount or guestfs is needed: the root filesystem is written straight from
the rootfs directory into a sparse raw file and converted with `qemu-img`. The Debian
kernel and initrd installed in the rootfs are copied next to the disk for direct kernel
boot (`root=/dev/vda rw console=ttyS0`), so the guest has the matching modules (dm-delay,
dm-flakey, md, netem). The image is cached under `$HARNESS_HOME/images/` by a hash of
the recipe (suite, mirror, packages, the guest files in `guest/` and this build's steps)::

    images/vm-bookworm-<hash>/
      disk.qcow2   ext4 root filesystem on the whole disk (no partition table)
      vmlinuz      kernel
      initrd.img   initramfs (MODULES=list: virtio_pci, virtio_blk, virtio_net, ext4; checked)
      recipe.json  what was built, with the timings

Per node, the harness attaches a small seed disk (/dev/vdb, ext4 labelled HXSEED) that
the baked `harness-seed.service` reads at boot: authorized_keys, hostname, /etc/hosts.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from harness.errors import ToolError
from harness.paths import harness_home

GUEST = Path(__file__).resolve().parent / "guest"
BUILD_VERSION = 2
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
DISK_SIZE = "8G"
# Drivers of emulated hardware no trial uses (KVM inside a TCG guest, wireless, graphics,
# floppy, USB, PC speaker, PS/2 mouse, SMBus, EFI pstore, balloon): each one udev loads is
# a module load and a device probe on every boot of every guest. The Terraform module
# boots guests with the same list (`module_blacklist` in main.tf).
MODULE_BLACKLIST = ("kvm,kvm_amd,kvm_intel,ccp,cfg80211,rfkill,drm,floppy,usbcore,usb_common,"
                    "uhci_hcd,ehci_hcd,pcspkr,psmouse,serio_raw,i2c_piix4,efi_pstore,"
                    "virtio_balloon")
KERNEL_CMDLINE = f"root=/dev/vda rw console=ttyS0 panic=10 module_blacklist={MODULE_BLACKLIST}"
PACKAGES = (
    "systemd", "systemd-sysv", "udev", "dbus", "kmod", "openssh-server", "python3",
    "iproute2", "iputils-ping", "nftables", "chrony", "ipmitool", "sudo", "procps", "curl",
    "ca-certificates", "netbase", "less", "snoopy", "linux-image-amd64", "mdadm", "lvm2",
    "dmsetup", "openssl", "qemu-guest-agent",
    # a replicated service from Debian for the L3 tasks (the emulated bare-metal pool's
    # machines are made from this image and guests have no egress); disabled below
    "etcd-server", "etcd-client",
    # a batch scheduler for the HPC tasks (one-node Slurm: controller, compute daemon,
    # client commands and munge authentication); disabled below like etcd
    "slurmctld", "slurmd", "slurm-client", "munge",
)
# MODULES=list: only what mounts the root disk (and the NIC); MODULES=most makes a 39 MB
# initrd whose unpacking and coldplug cost ~13 s of every boot under TCG (10 MB with this).
INITRAMFS_CONF = "MODULES=list\nCOMPRESS=gzip\n"
INITRD_MODULES = ("virtio_pci", "virtio_blk", "virtio_net", "ext4")
REQUIRED_INITRD_MODULES = INITRD_MODULES
ENABLE = ("systemd-networkd.service", "ssh.service", "harness-seed.service")
# installed, started only by the tasks that configure them
DISABLE = ("etcd.service", "slurmctld.service", "slurmd.service", "munge.service")
# qemu-guest-agent starts by udev once its virtio port appears (snapshot start fixes up a
# restored guest through it: clock, identity, network). The periodic jobs are masked: a
# daily timer is Persistent, and every node whose clock is stepped past the day of the
# image's (or a snapshot's) last run would start it at once (dpkg-db-backup ran at every
# snapshot start, beside the fix-up and the first logins, on the node's one vCPU).
MASK = ("apt-daily.timer", "apt-daily-upgrade.timer", "man-db.timer", "e2scrub_all.timer",
        "e2scrub_reap.service", "fstrim.timer", "dpkg-db-backup.timer",
        "systemd-networkd-wait-online.service", "mdmonitor-oneshot.timer",
        "getty@tty1.service")
# guest file -> (path in the rootfs, mode)
FILES = {
    "harness-seed.sh": ("usr/local/sbin/harness-seed", 0o755),
    "harness-seed.service": ("etc/systemd/system/harness-seed.service", 0o644),
    "20-harness-dhcp.network": ("etc/systemd/network/20-harness-dhcp.network", 0o644),
    "sshd-harness.conf": ("etc/ssh/sshd_config.d/harness.conf", 0o644),
}


def recipe() -> dict:
    """Everything the image depends on; its hash names the cache entry."""
    return {
        "build_version": BUILD_VERSION, "suite": SUITE, "mirror": MIRROR,
        "disk_size": DISK_SIZE, "packages": list(PACKAGES), "enable": list(ENABLE),
        "disable": list(DISABLE),
        "mask": list(MASK), "initramfs": [INITRAMFS_CONF, list(INITRD_MODULES)],
        "files": {name: hashlib.sha256((GUEST / name).read_bytes()).hexdigest()
                  for name in sorted(FILES)},
    }


def recipe_hash() -> str:
    data = json.dumps(recipe(), sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()[:12]


def image_dir() -> Path:
    return harness_home() / "images" / f"vm-{SUITE}-{recipe_hash()}"


def _run(cmd: list[str], log, **kwargs) -> str:
    log("+ " + " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise ToolError(cmd[0], f"{' '.join(cmd[:3])} ... failed", proc.returncode,
                        " ".join(cmd), proc.stderr or proc.stdout)
    return proc.stdout


def _unmount_under(path: Path) -> None:
    """Lazily unmount whatever debootstrap left mounted in the rootfs (proc, sys, ...)."""
    prefix = str(path.resolve()) + "/"
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for target in sorted((m for m in mounts if m.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True)
    left = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
            if line.split()[1].startswith(prefix)]
    if left:
        raise ToolError("image", f"cannot unmount {left}; remove {path} by hand")


def _configure(rootfs: Path, log) -> None:
    """Write the guest files and settings straight into the rootfs."""
    for name, (rel, mode) in FILES.items():
        dest = rootfs / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(GUEST / name, dest)
        dest.chmod(mode)
    (rootfs / "etc/hostname").write_text("harness\n")
    (rootfs / "etc/hosts").write_text("127.0.0.1\tlocalhost\n127.0.1.1\tharness\n")
    (rootfs / "etc/fstab").write_text("/dev/vda\t/\text4\tdefaults,errors=remount-ro\t0 0\n")
    (rootfs / "etc/apt/sources.list").write_text(
        f"deb {MIRROR} {SUITE} main\ndeb {MIRROR} {SUITE}-updates main\n")
    for key in rootfs.glob("etc/ssh/ssh_host_*"):
        key.unlink()
    (rootfs / "etc/machine-id").write_text("")
    _run(["chroot", str(rootfs), "systemctl", "enable", *ENABLE], log)
    _run(["chroot", str(rootfs), "systemctl", "disable", *DISABLE], log)
    _run(["chroot", str(rootfs), "systemctl", "mask", *MASK], log)
    _run(["chroot", str(rootfs), "passwd", "-l", "root"], log)
    shutil.rmtree(rootfs / "var/lib/apt/lists", ignore_errors=True)
    (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True)
    for deb in (rootfs / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()


def _kernel(rootfs: Path, out: Path, log) -> str:
    """Copy the newest kernel + initrd out of the rootfs and check the initrd's modules."""
    kernels = sorted((rootfs / "boot").glob("vmlinuz-*"))
    if not kernels:
        raise ToolError("image", "no kernel in the rootfs (linux-image-amd64 missing?)")
    version = kernels[-1].name.removeprefix("vmlinuz-")
    initrd = rootfs / "boot" / f"initrd.img-{version}"
    conf = rootfs / "etc/initramfs-tools"
    (conf / "conf.d" / "harness.conf").write_text(INITRAMFS_CONF)
    with open(conf / "modules", "a") as fh:
        fh.write("".join(f"{m}\n" for m in INITRD_MODULES))
    _run(["mount", "-t", "proc", "proc", str(rootfs / "proc")], log)
    try:
        _run(["chroot", str(rootfs), "update-initramfs", "-c" if not initrd.exists() else "-u",
              "-k", version], log)
    finally:
        _unmount_under(rootfs)
    listing = _run(["chroot", str(rootfs), "lsinitramfs", f"/boot/initrd.img-{version}"],
                   lambda _: None)
    missing = [m for m in REQUIRED_INITRD_MODULES
               if f"/{m}.ko" not in listing and f"/{m.replace('_', '-')}.ko" not in listing]
    if missing:
        raise ToolError("image", f"initrd {version} lacks modules {missing}")
    shutil.copyfile(kernels[-1], out / "vmlinuz")
    shutil.copyfile(initrd, out / "initrd.img")
    return version


def build_vm_image(force: bool = False, log=print) -> Path:
    """Build (or find in the cache) the base qcow2; return its path.

    The kernel and initrd are `vmlinuz` and `initrd.img` in the same directory.
    """
    final = image_dir()
    disk = final / "disk.qcow2"
    if disk.exists() and not force:
        log(f"vm image cached: {disk}")
        return disk
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if disk.exists() and not force:
            return disk
        work = final.parent / f".build-{final.name}-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        rootfs, out = work / "rootfs", work / "out"
        out.mkdir(parents=True)
        timings: dict[str, float] = {}
        try:
            t0 = time.monotonic()
            cache = harness_home() / "cache" / f"debootstrap-{SUITE}"
            cache.mkdir(parents=True, exist_ok=True)
            _run(["debootstrap", "--variant=minbase", f"--cache-dir={cache}",
                  f"--include={','.join(PACKAGES)}", SUITE, str(rootfs), MIRROR], log)
            timings["debootstrap_sec"] = round(time.monotonic() - t0, 1)
            _unmount_under(rootfs)
            t1 = time.monotonic()
            _configure(rootfs, log)
            kernel = _kernel(rootfs, out, log)
            raw = work / "disk.raw"
            _run(["truncate", "-s", DISK_SIZE, str(raw)], log)
            _run(["mkfs.ext4", "-q", "-F", "-L", "hxroot", "-d", str(rootfs),
                  "-E", "lazy_itable_init=0,lazy_journal_init=0", str(raw)], log)
            _run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(out / "disk.qcow2")], log)
            raw.unlink()
            timings["image_sec"] = round(time.monotonic() - t1, 1)
            timings["total_sec"] = round(time.monotonic() - t0, 1)
            meta = {**recipe(), "hash": recipe_hash(), "kernel": kernel,
                    "cmdline": KERNEL_CMDLINE, "timings": timings,
                    "size_bytes": (out / "disk.qcow2").stat().st_size}
            (out / "recipe.json").write_text(json.dumps(meta, indent=2) + "\n")
            if final.exists():
                shutil.rmtree(final)
            out.rename(final)
        finally:
            if rootfs.exists():
                _unmount_under(rootfs)
            shutil.rmtree(work, ignore_errors=True)
        log(f"vm image built in {timings['total_sec']}s: {disk}")
        return disk


def kernel_paths(disk: Path) -> tuple[Path, Path]:
    """The kernel and initrd that boot `disk`."""
    return disk.parent / "vmlinuz", disk.parent / "initrd.img"


if __name__ == "__main__":
    import sys

    print(build_vm_image(force="--force" in sys.argv))
