"""Base images built offline from Debian's archive: debootstrap, then `docker import`.

No container registry is assumed. The docker base `harness/debian:bookworm` is a
systemd-capable Debian rootfs; it is rebuilt only when its recipe (suite, mirror, package
list) changes, which is recorded as the image label `harness.recipe`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.config import LOCAL_BASE
from harness.errors import PreflightError, ToolError
from harness.substrates.docker import engine
from harness.substrates.docker.engine.lite import image_or_none

DOCKER_BASE = LOCAL_BASE
SUITE = "bookworm"
MIRROR = os.environ.get("HARNESS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
DOCKER_PACKAGES = [
    "systemd", "systemd-sysv", "dbus", "python3", "python3-apt", "iproute2", "iputils-ping",
    "procps", "psmisc", "ca-certificates", "nftables", "iptables", "openssl", "curl",
    "netcat-openbsd", "less", "vim-tiny", "sudo", "kmod", "cron", "logrotate", "snoopy",
    "util-linux", "findutils", "gnupg", "apt-transport-https",
]
_DOCKERFILE_FIXUP = [
    # systemd in a container: no getty, no udev triggers, mask units that need a real host
    "systemctl mask getty@tty1.service serial-getty@ttyS0.service systemd-udevd.service "
    "systemd-udev-trigger.service systemd-remount-fs.service sys-kernel-debug.mount "
    "sys-kernel-tracing.mount systemd-logind.service console-getty.service "
    "systemd-firstboot.service systemd-resolved.service 2>/dev/null || true",
    "echo 'harness' > /etc/hostname",
    "printf 'deb %s %s main\\n' > /etc/apt/sources.list",
    "rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb",
    "mkdir -p /etc/harness /opt/harness /logs",
]


def recipe_hash(packages: list[str] = DOCKER_PACKAGES) -> str:
    data = json.dumps({"suite": SUITE, "mirror": MIRROR, "packages": sorted(packages),
                       "fixup": _DOCKERFILE_FIXUP, "v": 2})
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def _docker_client():
    return engine.client()


def docker_base_status(client=None) -> tuple[bool, str]:
    """(is the base image present and current?, a short description), on the engine of
    `client` (default: the harness engine)."""
    img = image_or_none(client or _docker_client(), DOCKER_BASE)
    if img is None:
        return False, f"{DOCKER_BASE} missing"
    if (img.labels or {}).get("harness.recipe") != recipe_hash():
        return False, f"{DOCKER_BASE} built from an older recipe"
    return True, f"{DOCKER_BASE} {img.short_id}"


def build_docker_base(force: bool = False, log=print) -> str:
    """Build `harness/debian:bookworm` with debootstrap + docker import; cached by recipe."""
    ok, desc = docker_base_status()
    if ok and not force:
        log(f"image {desc} is up to date (recipe {recipe_hash()})")
        return DOCKER_BASE
    if shutil.which("debootstrap") is None:
        raise PreflightError("debootstrap not found; run scripts/setup.sh (apt-get install "
                             "debootstrap)")
    with tempfile.TemporaryDirectory(prefix="hx-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        log(f"debootstrap {SUITE} from {MIRROR} into {rootfs} (a few minutes)")
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(DOCKER_PACKAGES)}",
               SUITE, str(rootfs), MIRROR]
        _run(cmd, "debootstrap")
        fixup = " && ".join(_DOCKERFILE_FIXUP).replace("%s %s", f"{MIRROR} {SUITE}")
        _run(["chroot", str(rootfs), "/bin/sh", "-c", fixup], "rootfs fixup")
        log(f"docker import -> {DOCKER_BASE}")
        changes = [
            "--change", f"LABEL harness.recipe={recipe_hash()} harness.base=1",
            "--change", 'CMD ["/sbin/init"]',
            "--change", "ENV container=docker",
        ]
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."],
                               stdout=subprocess.PIPE)
        imp = subprocess.run(["docker", "-H", engine.docker_host(), "import", *changes, "-",
                              DOCKER_BASE], stdin=tar.stdout, capture_output=True, text=True)
        tar.stdout.close()
        tar.kill()
        tar.wait()
        if imp.returncode != 0:
            raise ToolError("docker", "import failed", imp.returncode, stderr_tail=imp.stderr)
    log(f"built {DOCKER_BASE} (recipe {recipe_hash()})")
    return DOCKER_BASE


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolError(what, f"{' '.join(cmd[:3])}... failed", proc.returncode,
                        stderr_tail=(proc.stderr or proc.stdout)[-2000:])
