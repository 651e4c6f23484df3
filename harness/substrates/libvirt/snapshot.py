"""Snapshot start: a VM node starts by restoring a booted template instead of booting.

A template is keyed by the node's domain XML without what belongs to one trial (name,
uuid, description, disk files, MAC, network, console log), plus the base image's identity
and the QEMU/libvirt versions; so one template serves every node of that shape::

    images/vm-snapshots/<key>/
      disk.qcow2    the template's root disk as it was saved (read-only; trial overlays on it)
      state.save    libvirt save image: memory and device state, the template's XML inside
      meta.json     what the key was made of, and how long the build took
      console.log   the template's serial console
    images/vm-snapshots/.failed-<key>.log   why the last build of a key failed

Per node, Terraform defines the domain without starting it and runs `start` here
(`python -m harness.substrates.libvirt.snapshot start ...`). It rebases the node's still
empty overlay on the template disk, writes a copy of the save image that carries the trial
domain's own XML (same devices at the same addresses: that is what the key guarantees),
restores it and fixes the guest up through the QEMU guest agent before anything else runs:
clock (stepped to the host's), the trial's MAC and a fresh DHCP lease, and one tar of the
node's own files made on the host (`node_files`): the seed disk's (root's authorized key,
hostname, /etc/hosts, cluster-info), a new SSH host key and machine-id, and entropy (host
bytes, then an immediate kernel reseed: every clone starts with the template's RNG state).
Anything that fails boots the node cold instead (its overlay back on the base image), with
the reason on stderr and in `<trial>/vm/start-<node>.json`.

`HARNESS_VM_START=cold` (or a node's `vm_start = "cold"` in task.toml) boots cold.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import hashlib
import io
import json
import os
import secrets
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from harness.paths import harness_home
from harness.substrates.common import RESEED_CRNG
from harness.substrates.hypervisor import host

VERSION = 1
MODES = ("snapshot", "cold")
DISK, STATE, META = "disk.qcow2", "state.save", "meta.json"
TEMPLATE_MAC = "52:54:00:00:00:01"
RETRY_FAILED_SEC = 1800  # a key whose build failed boots cold this long before a new try
# libvirt's save image header (src/qemu/qemu_saveimage.h): magic, version, data_len,
# was_running, format, cookieOffset, 14 unused words; then data_len bytes of XML + cookie
HEADER = struct.Struct("<16s5I14I")
SAVE_MAGIC = b"LibvirtQemudSave"
MAKE_DISKS = Path(__file__).resolve().parent / "terraform" / "files" / "make-disks.sh"
FIXUP = r"""set -eu
# every process started costs a first translation on a TCG guest: shell builtins where
# they do, one process per job
mac=$1 ip=$2 now=$3
date -u -s "@$now" >/dev/null  # the clock first: the guest woke with the template's time
step() { read -r up _ < /proc/uptime; echo "$1 $up"; }
step begin
for dev in /sys/class/net/*; do
    name=${dev##*/}
    case $name in en*|eth*) ;; *) continue ;; esac
    printf 'link set dev %s address %s\naddr flush dev %s\n' "$name" "$mac" "$name" | ip -b -
    networkctl reconfigure "$name"
done
step network
# stdin: this node's files (`node_files`): the seed disk's, an ed25519 host key (the
# template's other host keys go), a machine-id and the host's entropy
tar -x -C / -f -
# every clone has the template's RNG state: mix in the host's bytes, then make the kernel
# reseed at once (RNDRESEEDCRNG) before anything draws a key from it
""" + RESEED_CRNG + r""" < /run/harness-fixup/entropy
rm -rf /run/harness-fixup /etc/ssh/ssh_host_rsa_key* /etc/ssh/ssh_host_ecdsa_key* \
    /etc/ssh/ssh_host_dsa_key*
read -r name < /etc/hostname && echo "$name" > /proc/sys/kernel/hostname
blockdev --flushbufs /dev/vdb  # the template's seed disk may still be in the page cache
step identity
i=0
while [ $i -lt 200 ]; do
    if [ -n "$(ip -4 -o addr show to "$ip")" ]; then step lease; exit 0; fi
    sleep 0.1
    i=$((i + 1))
done
echo "no DHCP lease for $ip after the restore" >&2
exit 3
"""


REMOTE_COLD = ("another machine's libvirt: the saved states are files of this one (snapshot "
               "start is not wired there yet)")


class SnapshotError(Exception):
    """Why a snapshot start could not be done (the node then boots cold)."""


def snapshot_root() -> Path:
    return harness_home() / "images" / "vm-snapshots"


def effective_mode(requested: str | None) -> tuple[str, str]:
    """(mode, why): `HARNESS_VM_START=cold` wins, then the node's own setting."""
    env = os.environ.get("HARNESS_VM_START", "").strip().lower()
    if env == "cold":
        return "cold", "HARNESS_VM_START=cold"
    if requested == "cold":
        return "cold", "the task asks for it (vm_start = \"cold\")"
    return "snapshot", ""


def shape(xml: str) -> str:
    """The domain XML without what is one trial's own: what a template must share."""
    root = ET.fromstring(xml)
    for tag in ("name", "uuid", "description", "title", "metadata"):
        for el in root.findall(tag):
            root.remove(el)
    devices = root.find("devices")
    for disk in devices.findall("disk"):
        for el in disk.findall("source"):
            disk.remove(el)
        disk.attrib.pop("type", None)
    for iface in devices.findall("interface"):
        for tag in ("source", "mac", "target", "alias"):
            for el in iface.findall(tag):
                iface.remove(el)
        iface.attrib.pop("type", None)
    for dev in devices.findall("serial") + devices.findall("console") + devices.findall("channel"):
        for tag in ("log", "source", "alias"):
            for el in dev.findall(tag):
                dev.remove(el)
    return ET.tostring(root, encoding="unicode")


def _versions(conn) -> dict[str, int]:
    return {"libvirt": conn.getLibVersion(), "qemu": conn.getVersion()}


def template_key(conn, xml: str, base: Path) -> str:
    stat = base.resolve().stat()
    parts = {"version": VERSION, "shape": shape(xml), **_versions(conn),
             "base": [str(base.resolve()), stat.st_size, stat.st_mtime_ns]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def template_xml(xml: str, key: str, work: Path, owner: str) -> str:
    """The trial domain's XML made into the template's: own name and disks in `work`, an
    unconnected tap for its NIC (the template reaches no network), its own console log."""
    root = ET.fromstring(xml)
    root.find("name").text = f"hx-snap-{key}"
    for el in root.findall("uuid"):
        root.remove(el)
    desc = root.find("description")
    if desc is None:
        desc = ET.SubElement(root, "description")
    desc.text = f"harness trial=snap-{key} campaign= node=template owner={owner}"
    devices = root.find("devices")
    disks = [d for d in devices.findall("disk") if d.get("device", "disk") == "disk"]
    names = [DISK, "seed.img", *(f"data{i}.qcow2" for i in range(len(disks) - 2))]
    for disk, name in zip(disks, names, strict=False):
        disk.set("type", "file")
        for el in disk.findall("source"):
            disk.remove(el)
        ET.SubElement(disk, "source", file=str(work / name))
    for iface in devices.findall("interface"):
        iface.set("type", "ethernet")
        for tag in ("source", "target", "alias"):
            for el in iface.findall(tag):
                iface.remove(el)
        mac = iface.find("mac")
        if mac is None:
            mac = ET.SubElement(iface, "mac")
        mac.set("address", TEMPLATE_MAC)
    for log in devices.iterfind("serial/log"):
        log.set("file", str(work / "console.log"))
    return ET.tostring(root, encoding="unicode")


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _run(cmd: list[str], env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise SnapshotError(f"{' '.join(cmd[:3])} failed: {(proc.stderr or proc.stdout).strip()}")


def _agent(dom, command: str, arguments: dict | None = None, timeout: int = 10):
    import libvirt_qemu

    payload = {"execute": command, **({"arguments": arguments} if arguments else {})}
    answer = libvirt_qemu.qemuAgentCommand(dom, json.dumps(payload), timeout, 0)
    return json.loads(answer).get("return")


def _wait_agent(dom, deadline: float) -> None:
    import libvirt

    last = ""
    while time.monotonic() < deadline:
        try:
            _agent(dom, "guest-ping", timeout=2)
            return
        except libvirt.libvirtError as exc:
            last = str(exc)
            time.sleep(0.2)
    raise SnapshotError(f"the guest agent did not answer ({last})")


def guest_exec(dom, argv: list[str], deadline: float, stdin: bytes | None = None
               ) -> tuple[int, str, str]:
    """Run a command in the guest through its agent; (exit code, stdout, stderr)."""
    args: dict = {"path": argv[0], "arg": argv[1:], "capture-output": True}
    if stdin is not None:
        args["input-data"] = base64.b64encode(stdin).decode()
    pid = _agent(dom, "guest-exec", args)["pid"]
    while time.monotonic() < deadline:
        status = _agent(dom, "guest-exec-status", {"pid": pid})
        if status.get("exited"):
            out, err = (base64.b64decode(status.get(k, "")).decode(errors="replace")
                        for k in ("out-data", "err-data"))
            return status.get("exitcode", -1), out, err
        time.sleep(0.05)
    raise SnapshotError(f"{argv[0]} in the guest did not finish in time")


def build_template(conn, xml: str, base: Path, data_mb: list[int], owner: str,
                   timeout: float, log) -> tuple[Path, bool]:
    """The template directory for this node's shape, and whether this call built it (boots
    and saves one when missing)."""
    key = template_key(conn, xml, base)
    root = snapshot_root()
    final = root / key
    if (final / META).exists():
        return final, False
    with _locked(root / f".{key}.lock"):
        if (final / META).exists():
            return final, False
        failed = root / f".failed-{key}.log"
        if failed.exists() and time.time() - failed.stat().st_mtime < RETRY_FAILED_SEC:
            raise SnapshotError(f"the last build of template {key} failed (see {failed}); "
                                f"the next try is after {RETRY_FAILED_SEC // 60} minutes")
        log(f"snapshot {key}: booting the template guest once")
        for stale in root.glob(f".build-{key}-*"):  # a build killed midway (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        work = root / f".build-{key}-{os.getpid()}"
        work.mkdir(parents=True)
        started = time.monotonic()
        dom = None
        try:
            _run(["sh", str(MAKE_DISKS)], {
                "HX_BASE": str(base.resolve()), "HX_OVERLAY": str(work / DISK),
                "HX_SEED": str(work / "seed.img"), "HX_HOSTNAME": "harness-template",
                "HX_HOSTS": "127.0.0.1\tlocalhost\n", "HX_CLUSTER_INFO": "",
                "HX_AUTHORIZED_KEYS": "", "HX_POOL": "",
                "HX_DATA": "".join(f"{work / f'data{i}.qcow2'} {mb}\n"
                                   for i, mb in enumerate(data_mb))})
            dom = conn.createXML(template_xml(xml, key, work, owner), 0)
            deadline = time.monotonic() + timeout
            _wait_agent(dom, deadline)
            booted = round(time.monotonic() - started, 1)
            rc, out, err = guest_exec(dom, ["/bin/systemctl", "is-system-running", "--wait"],
                                      deadline)
            state = out.strip()
            if state not in ("running", "degraded"):
                raise SnapshotError(f"the template guest is {state or err.strip()!r}")
            settled = round(time.monotonic() - started, 1)
            dom.save(str(work / STATE))
            dom = None
            for extra in ["seed.img", *(f"data{i}.qcow2" for i in range(len(data_mb)))]:
                (work / extra).unlink(missing_ok=True)
            (work / DISK).chmod(0o444)
            meta = {"key": key, "version": VERSION, "base": str(base.resolve()),
                    "shape": shape(xml), **_versions(conn), "system_state": state,
                    "timings": {"agent_sec": booted, "settled_sec": settled,
                                "total_sec": round(time.monotonic() - started, 1)}}
            (work / META).write_text(json.dumps(meta, indent=2) + "\n")
            shutil.rmtree(final, ignore_errors=True)
            work.rename(final)
            failed.unlink(missing_ok=True)
            log(f"snapshot {key}: saved in {meta['timings']['total_sec']}s")
            return final, True
        except BaseException as exc:  # Ctrl-C too: no template guest is left running
            if dom is not None:
                with contextlib.suppress(Exception):
                    dom.destroy()
            console = work / "console.log"
            tail = console.read_text(errors="replace")[-4000:] if console.exists() else ""
            failed.write_text(f"{type(exc).__name__}: {exc}\n\nconsole (tail):\n{tail}")
            shutil.rmtree(work, ignore_errors=True)
            raise


def write_save_image(src: Path, dest: Path, xml: str) -> None:
    """A copy of save image `src` whose domain XML is `xml` (the cookie and state kept)."""
    with open(src, "rb") as fh:
        head = fh.read(HEADER.size)
        magic, version, data_len, was_running, fmt, cookie_at, *unused = HEADER.unpack(head)
        if magic != SAVE_MAGIC or version != 2:
            raise SnapshotError(f"{src} is not a libvirt save image (version 2)")
        data = fh.read(data_len)
        cookie = data[cookie_at:].split(b"\0", 1)[0] + b"\0" if cookie_at else b""
        body = xml.encode() + b"\0"
        payload = body + cookie
        length = data_len if len(payload) <= data_len else len(payload) + 65536
        with open(dest, "wb") as out:
            out.write(HEADER.pack(magic, version, length, was_running, fmt,
                                  len(body) if cookie else 0, *unused))
            out.write(payload + b"\0" * (length - len(payload)))
            out.flush()
            offset = HEADER.size + data_len
            size = os.fstat(fh.fileno()).st_size
            while offset < size:
                sent = os.sendfile(out.fileno(), fh.fileno(), offset, size - offset)
                if sent == 0:
                    break
                offset += sent


def node_files(seed_image: Path) -> bytes:
    """A tar (paths from /) of what makes a restored clone this node: the seed disk's files
    where the image's `harness-seed` puts them at boot (root's authorized_keys, hostname,
    /etc/hosts, /etc/harness/), a new SSH host key and machine-id, and the host's entropy
    for the fix-up to mix in. Made on the host, where a key pair takes no time; the seed
    disk stays the source (a reboot applies it again)."""
    entries: list[tuple[str, bytes | None, int]] = [("root/.ssh", None, 0o700)]
    with tempfile.TemporaryDirectory(prefix="hx-seed-") as tmp:
        seed = Path(tmp) / "seed"
        seed.mkdir()
        _run(["debugfs", "-R", f"rdump / {seed}", str(seed_image)])
        for name, dest, mode in (("authorized_keys", "root/.ssh/authorized_keys", 0o600),
                                 ("hostname", "etc/hostname", 0o644),
                                 ("hosts", "etc/hosts", 0o644)):
            if (seed / name).is_file():
                entries.append((dest, (seed / name).read_bytes(), mode))
        if (seed / "harness").is_dir():
            entries.append(("etc/harness", None, 0o755))
            entries += [(f"etc/harness/{f.name}", f.read_bytes(), 0o644)
                        for f in sorted((seed / "harness").iterdir()) if f.is_file()]
        key = Path(tmp) / "key"
        hostname = (seed / "hostname").read_text().strip() if (seed / "hostname").is_file() \
            else "node"
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{hostname}",
              "-f", str(key)])
        entries += [("etc/ssh/ssh_host_ed25519_key", key.read_bytes(), 0o600),
                    ("etc/ssh/ssh_host_ed25519_key.pub", key.with_suffix(".pub").read_bytes(),
                     0o644)]
    entries += [("etc/machine-id", (secrets.token_hex(16) + "\n").encode(), 0o444),
                ("run/harness-fixup", None, 0o700),
                ("run/harness-fixup/entropy", os.urandom(512), 0o600)]
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode, info.mtime, info.uname, info.gname = mode, now, "root", "root"
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def restore(conn, dom, xml: str, template: Path, overlay: Path, mac: str, ip: str,
            timeout: float) -> dict:
    """Restore `dom` (its domain XML `xml`) from `template` onto a fresh overlay; fix the
    guest up; timings."""
    import libvirt

    t0 = time.monotonic()
    disks = host.disk_paths(conn, xml, device="disk")  # root overlay, seed disk, data disks
    if len(disks) < 2 or not Path(disks[1]).is_file():
        raise SnapshotError(f"no seed disk among the domain's disks {disks}")
    files = node_files(Path(disks[1]))
    _overlay_on(template / DISK, overlay)
    save = overlay.with_suffix(".save")
    try:
        write_save_image(template / STATE, save, xml)
        copied = time.monotonic()
        try:
            conn.restore(str(save))
        except libvirt.libvirtError as exc:
            raise SnapshotError(f"restore: {exc}") from exc
    finally:
        save.unlink(missing_ok=True)
    restored = time.monotonic()
    dom = conn.lookupByName(dom.name())
    deadline = restored + timeout
    _wait_agent(dom, deadline)
    agent = time.monotonic()
    rc, out, err = guest_exec(dom, ["/bin/sh", "-c", FIXUP, "hx-fixup", mac, ip,
                                    f"{time.time():.6f}"], deadline, stdin=files)
    if rc != 0:
        raise SnapshotError(f"guest fix-up exited {rc}: {err.strip()[-500:]}")
    done = time.monotonic()
    marks = [line.split() for line in out.splitlines() if len(line.split()) == 2]
    steps = {b[0]: round(float(b[1]) - float(a[1]), 2)
             for a, b in zip(marks, marks[1:], strict=False)}
    return {"copy_sec": round(copied - t0, 2), "restore_sec": round(restored - copied, 2),
            "agent_sec": round(agent - restored, 2), "fixup_sec": round(done - agent, 2),
            "fixup_steps": steps}


def _overlay_on(backing: Path, overlay: Path) -> None:
    """(Re)make `overlay` as an empty qcow2 on `backing`."""
    _run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
          str(backing.resolve()), str(overlay)])


def start(args: argparse.Namespace, log=None) -> dict:
    """Start one defined domain, from a snapshot when it can; return what was done."""
    import libvirt

    log = log or (lambda msg: print(msg, file=sys.stderr))
    t0 = time.monotonic()
    conn = host.connect(args.uri)
    try:
        dom = conn.lookupByName(args.domain)
        if dom.isActive():
            return {"mode": "running", "reason": "already running"}
        mode, reason = effective_mode(args.mode)
        if mode == "snapshot" and not host.this_machine(args.uri):
            mode, reason = "cold", REMOTE_COLD
        record: dict = {"mode": mode}
        if mode == "snapshot":
            overlay, base = Path(args.overlay), Path(args.base)
            try:
                xml = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_SECURE
                                  | libvirt.VIR_DOMAIN_XML_MIGRATABLE)
                template, built = build_template(conn, xml, base, args.data_mb, args.owner,
                                                 args.timeout, log)
                record.update(template=template.name, built=built,
                              **restore(conn, dom, xml, template, overlay, args.mac, args.ip,
                                        args.timeout))
                record["seconds"] = round(time.monotonic() - t0, 2)
                return record
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                log(f"snapshot start of {args.domain} failed ({reason}); booting it cold")
                dom = conn.lookupByName(args.domain)
                if dom.isActive():
                    dom.destroy()
                _overlay_on(base, overlay)
                record = {"mode": "cold", "fallback": True}
        dom.create()
        record.update(reason=reason, seconds=round(time.monotonic() - t0, 2))
        return record
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.substrates.libvirt.snapshot")
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("start", help="start a defined trial domain (snapshot, else cold)")
    st.add_argument("--uri", required=True)
    st.add_argument("--domain", required=True)
    st.add_argument("--overlay", required=True, help="the node's (still empty) root overlay")
    st.add_argument("--base", required=True, help="the image the overlay is made on")
    st.add_argument("--mac", required=True)
    st.add_argument("--ip", required=True)
    st.add_argument("--mode", choices=MODES, default="snapshot")
    st.add_argument("--owner", default="")
    st.add_argument("--data-mb", default="", type=lambda s: [int(x) for x in s.split(",") if x])
    st.add_argument("--timeout", type=float, default=300.0)
    st.add_argument("--record", help="write what was done (JSON) to this file")
    args = parser.parse_args(argv)
    try:
        record = start(args)
    except Exception as exc:  # the cold boot failed too: Terraform reports it
        print(f"starting {args.domain} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.record:
        path = Path(args.record)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        tmp.replace(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
