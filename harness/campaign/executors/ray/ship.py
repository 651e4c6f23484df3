"""Moving a finished trial directory from a worker node into the campaign's run dir.

A node runs each trial in a run dir of its own (`$HARNESS_HOME/ray-runs/<campaign>/`) and
ships the trial directory back as one gzip'd tar (`pack`); the driver installs it
(`install`) exactly once: extracted beside its final place, checked, then renamed into
`trials/<id>/` in one step. A second copy of a trial that is already done (a task Ray ran
again after its node was lost, or a reconstructed return value) is dropped, so every
trial's result lands once. Shipping was chosen over a shared path: it needs no shared
file system between nodes, and a trial directory is small (bench/ray_throughput.py
reports its size and the time to ship it).
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import uuid
from pathlib import Path
from typing import Any

from harness.campaign.model import move_aside, trial_state
from harness.paths import RunPaths

MAX_BYTES = 512 << 20  # a trial directory larger than this is refused on the driver


def _kept(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """What a shipped trial holds: not Terraform's working cache (`.terraform/`, links
    into the node's provider mirror), no link to an absolute path (it would name the
    node's files), no device or fifo."""
    if ".terraform" in Path(member.name).parts:
        return None
    if member.issym() and (member.linkname.startswith("/") or ".." in member.linkname):
        return None
    return member if (member.isfile() or member.isdir() or member.issym()) else None


def pack(root: Path) -> bytes:
    """The directory `root` as a gzip'd tar, its members relative to `root` (symlinks
    kept as relative links, never followed; see `_kept`)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        tar.add(root, arcname=".", filter=_kept)
    return buf.getvalue()


def unpack(data: bytes, dest: Path) -> None:
    """Extract a `pack`ed trial into the new directory `dest`: regular files, directories
    and symlinks only, nothing outside `dest` (the data filter)."""
    if len(data) > MAX_BYTES:
        raise ValueError(f"shipped trial directory too large ({len(data)} bytes)")
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


def install(run_dir: Path, t: dict[str, Any], data: bytes) -> bool:
    """Put the shipped trial `t` into `run_dir/trials/<id>/` unless a final result of it
    is already there; True when installed. An unfinished directory in the way (a
    `cancelled` record, evidence of an earlier run) is moved aside first; the files
    `campaign plan` rendered for it are replaced."""
    tid = t["trial_id"]
    if trial_state(run_dir, t) == "done":
        return False
    final = RunPaths(run_dir).trial(tid).root
    incoming = final.parent / f".{tid}.incoming-{uuid.uuid4().hex[:8]}"
    try:
        unpack(data, incoming)
        if not (incoming / "result.json").is_file():
            raise ValueError("shipped trial directory has no result.json")
        if (final / "trial.json").exists():  # an earlier run's evidence: kept aside
            move_aside(run_dir, tid, "superseded")
        elif final.exists():  # only what `campaign plan` rendered
            shutil.rmtree(final)
        os.rename(incoming, final)
    finally:
        if incoming.exists():
            shutil.rmtree(incoming, ignore_errors=True)
    return True
