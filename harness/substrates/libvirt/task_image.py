"""Per-task VM images: a task's `environment/setup.sh` runs once per (base image, task) and
its result is cached as that task's image; `bootstrap.sh` still runs every trial.

The image is a qcow2 overlay on the cached base image (its backing file, by absolute path)
in `$HARNESS_HOME/images/vm-task-<task>-<hash>/`, next to links to the base's kernel and
initrd. The hash covers the base image and every file of `environment/` except the
per-trial bootstrap files, so editing setup.sh (or a file it copies) rebuilds it. The build
boots a raw QEMU guest (`baseline.raw_guest`: no network beyond its forwarded SSH port),
copies `environment/` to /tmp/harness-env, runs `bash setup.sh` there under the task's
`build_timeout_sec`, powers the guest off cleanly and publishes the directory atomically.
Concurrent trials of one task build it once (a file lock); the build log stays in the image
directory (`setup.log`), and a failing setup.sh is a clear error naming the task's file.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import re
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

from harness.errors import InputError
from harness.substrates.hypervisor.host import detect_domain_type
from harness.substrates.hypervisor.image import kernel_paths
from harness.substrates.libvirt.baseline import raw_guest

PER_TRIAL = ("bootstrap.sh", "bootstrap.yml")


def _env_files(task) -> list[Path]:
    env = task.path / "environment"
    return sorted(p for p in env.rglob("*") if p.is_file()
                  and p.relative_to(env).as_posix() not in PER_TRIAL)


def image_key(base: Path, task) -> str:
    """Hash of the base image (its cached directory, itself content-addressed) and the
    task's environment files other than the per-trial bootstrap ones."""
    h = hashlib.sha256(str(base.resolve()).encode())
    env = task.path / "environment"
    for p in _env_files(task):
        h.update(p.relative_to(env).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:40] or "task"


def _env_tar(task) -> bytes:
    buf = io.BytesIO()
    env = task.path / "environment"
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in _env_files(task):
            tar.add(p, arcname=p.relative_to(env).as_posix())
    return buf.getvalue()


def task_image(base: Path, task, log=print) -> Path:
    """The disk a trial of `task` boots: `base` itself when the task has no setup.sh, else
    its cached task image (built now if missing)."""
    if task.env_file("setup.sh") is None:
        return base
    final = base.parent.parent / f"vm-task-{_slug(task.name)}-{image_key(base, task)}"
    disk = final / "disk.qcow2"
    if disk.exists():
        return disk
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not disk.exists():
            _build(base, task, final, log)
    return disk


def _build(base: Path, task, final: Path, log) -> None:
    setup = task.path / "environment" / "setup.sh"
    timeout = float(task.env.build_timeout_sec)
    stage = Path(tempfile.mkdtemp(prefix=f".build-{final.name}-", dir=final.parent))
    out = stage / "out"
    out.mkdir()
    setup_log = out / "setup.log"
    failed_log = final.parent / f"{final.name}.failed-setup.log"
    started = time.monotonic()
    log(f"building vm task image {final.name}: running {setup} once (cached)")
    try:
        accel = "kvm" if detect_domain_type() == "kvm" else "tcg"
        with raw_guest(stage, base=base, accel=accel, overlay=out / "disk.qcow2",
                       timeout=300) as guest:
            res = guest.run("rm -rf /tmp/harness-env && mkdir -p /tmp/harness-env && "
                            "tar -x -C /tmp/harness-env", timeout=120, stdin=_env_tar(task))
            if res.returncode != 0:
                raise InputError(f"cannot copy environment/ into the image builder: "
                                 f"{res.stdout.decode(errors='replace')[-300:]}",
                                 file=str(setup))
            res = guest.run("cd /tmp/harness-env && bash setup.sh", timeout=timeout,
                            log=setup_log)
            if res.returncode != 0:
                text = setup_log.read_text(errors="replace")
                tail = text.strip().splitlines()[-3:]
                lines = re.findall(r"setup\.sh: line (\d+)", text)  # as bash reports it
                raise InputError(f"setup.sh failed with exit {res.returncode} while building "
                                 f"the task image (full log: {failed_log}): "
                                 f"{' | '.join(tail)[-400:]}",
                                 file=f"{setup}:{lines[-1]}" if lines else str(setup))
            guest.run("rm -rf /tmp/harness-env", timeout=60)
            guest.poweroff()
        kernel, initrd = kernel_paths(base)
        (out / "vmlinuz").symlink_to(kernel.resolve())
        (out / "initrd.img").symlink_to(initrd.resolve())
        (out / "build.json").write_text(json.dumps({
            "task": task.name, "base": str(base.resolve()), "setup_sha256":
            hashlib.sha256(setup.read_bytes()).hexdigest(),
            "seconds": round(time.monotonic() - started, 1)}, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        out.rename(final)
        log(f"vm task image built in {time.monotonic() - started:.0f}s: {final / 'disk.qcow2'}")
    except BaseException:
        if setup_log.exists():
            shutil.copyfile(setup_log, failed_log)
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
