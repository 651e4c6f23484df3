"""Another machine's libvirt: what a trial needs on that host besides libvirt's own objects.

A hosts-file `libvirt: qemu+ssh://user@host/system` whose host is not this machine
(`host.this_machine`) is driven over SSH with the URI's own login (its `keyfile`, port and
`known_hosts`; host keys are checked as libvirt's ssh checks them). On that host, under
`REMOTE_DIR` (made on first use, root's; a user other than root runs through `sudo -n`)::

    images/<image dir>/disk.qcow2, vmlinuz, initrd.img   the trial's image, copied once
    trials/hx-<trial>/vm/disks/...                       the trial's disks (its pool)
    trials/hx-<trial>/vm/hx-<trial>-<node>-console.log   serial consoles (fetched at the end)

`stage` copies an image chain (a task image and the base it overlays) once per host: each
file under a per-directory lock, written beside its final name and renamed, its backing
path rebased onto the host's copy, then marked with the local file's signature (a changed
cache entry is copied again). The trial's disks are made there by the same
`make-disks.sh`, run as `python -m harness.substrates.libvirt.remote script FILE` from
Terraform (the `HX_*` variables travel as exports). SSH to the nodes jumps through the host
(`ssh_config`: the trial's `ssh/config`, read by every ssh of `ssh.py` and by Ansible).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from harness.errors import PreflightError, SubstrateError
from harness.paths import harness_home
from harness.substrates import firewall
from harness.substrates.base import Check
from harness.substrates.hypervisor import image
from harness.substrates.hypervisor.naming import PREFIX
from harness.substrates.ssh import as_root

REMOTE_DIR = "/var/lib/harness"
TOOLS = {"qemu-img": "qemu-utils", "mkfs.ext4": "e2fsprogs", "flock": "util-linux",
         "virsh": "libvirt-clients", "nft": "nftables", "python3": "python3-minimal"}
SSH_ENV = "HX_SSH"


@dataclass(frozen=True)
class RemoteHost:
    """The SSH login of a libvirt host that is another machine."""

    host: str
    user: str = "root"
    port: int = 22
    keyfile: str = ""
    known_hosts: str = ""
    path: str = "/system"

    @classmethod
    def from_uri(cls, uri: str) -> RemoteHost:
        parts = urlsplit(uri)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        return cls(host=parts.hostname or "", user=parts.username or os.environ.get(
            "USER", "root"), port=parts.port or 22, keyfile=query.get("keyfile", ""),
            known_hosts=query.get("known_hosts", ""), path=parts.path or "/system")

    @classmethod
    def from_json(cls, text: str) -> RemoteHost:
        return cls(**json.loads(text))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @property
    def local_uri(self) -> str:
        """The same daemon as seen on the host itself (for commands run there)."""
        return f"qemu://{self.path}"

    def ssh_options(self) -> list[str]:
        key = ["-i", self.keyfile] if self.keyfile else []
        known = ["-o", f"UserKnownHostsFile={self.known_hosts}"] if self.known_hosts else []
        return [*key, *known, "-p", str(self.port), "-o", "BatchMode=yes",
                "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=15",
                "-o", "ServerAliveCountMax=4", "-o", "LogLevel=ERROR"]

    def argv(self) -> list[str]:
        return ["ssh", *self.ssh_options(), f"{self.user}@{self.host}"]

    def proxy_command(self) -> str:
        """An ssh_config `ProxyCommand` that reaches a node through this host."""
        line = " ".join(shlex.quote(a) for a in ["ssh", *self.ssh_options(), "-W",
                                                 "HXTARGET", f"{self.user}@{self.host}"])
        return line.replace("%", "%%").replace("HXTARGET", "%h:%p")

    def run(self, script: str, stdin=None, timeout: float = 900) -> subprocess.CompletedProcess:
        """`script` (sh) on the host as root; `stdin` a file object or bytes."""
        kwargs = {"stdin": stdin} if stdin is not None and not isinstance(stdin, bytes) \
            else {"input": stdin}
        try:
            return subprocess.run([*self.argv(), as_root(script, self.user)],
                                  capture_output=True, timeout=timeout, **kwargs)
        except subprocess.TimeoutExpired as exc:
            raise SubstrateError("vm", f"{self.user}@{self.host}: no answer in {timeout:.0f}s "
                                 f"to: {script[:80]}") from exc

    def command(self, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
        """`argv` on the host as root, text in and out (`egress`'s runner)."""
        proc = self.run(shlex.join(argv), stdin.encode() if stdin is not None else None,
                        timeout=120)
        return subprocess.CompletedProcess(proc.args, proc.returncode,
                                           proc.stdout.decode(errors="replace"),
                                           proc.stderr.decode(errors="replace"))

    def check(self, script: str, what: str, stdin=None, timeout: float = 900) -> str:
        proc = self.run(script, stdin, timeout)
        if proc.returncode != 0:
            raise SubstrateError("vm", f"{what} on libvirt host {self.host} failed (exit "
                                 f"{proc.returncode})", proc.stderr.decode(errors="replace"))
        return proc.stdout.decode(errors="replace")

    def trial_dir(self, prefix: str) -> str:
        """The directory of the trial whose resources are named `prefix` (`hx-<trial>`)."""
        return f"{REMOTE_DIR}/trials/{prefix}"

    def stage(self, disk: Path, extra: tuple[Path, ...] = (), copy: bool = True
              ) -> dict[str, str]:
        """The host's copies of `disk`'s backing chain and of `extra` (kernel, initrd):
        local path -> remote path, each copied once (see the module docstring); without
        `copy`, only where they go. Which files need a copy is read in one login
        (`unstaged`); each copy checks its marker again under the directory's lock."""
        todo = set(self.unstaged(disk, extra)) if copy else set()
        chain = backing_chain(disk)
        out: dict[str, str] = {}
        for path in [*reversed(chain), *extra]:
            real = path.resolve()
            dest = f"{REMOTE_DIR}/images/{real.parent.name}/{real.name}"
            backing = chain[chain.index(path) + 1] if path in chain[:-1] else None
            rebase = (f"qemu-img rebase -q -u -f qcow2 -F qcow2 -b "
                      f"{shlex.quote(out[str(backing)])} \"$part\"\n" if backing else "")
            if path in todo:
                self._copy_once(real, dest, rebase)
            out[str(path)] = dest
        return out

    def _copy_once(self, src: Path, dest: str, rebase: str) -> None:
        st = src.stat()
        sig = _signature(src)
        d, name = shlex.quote(str(Path(dest).parent)), shlex.quote(Path(dest).name)
        marker = f"{d}/.{name}.staged"
        script = (f"set -eu; mkdir -p {d}; exec 9>{d}/.lock; flock 9; "
                  f"if [ \"$(cat {marker} 2>/dev/null)\" = {sig} ]; then "
                  "cat >/dev/null; exit 0; fi; "
                  f"part={d}/.{name}.part; cat > \"$part\"\n{rebase}"
                  f"mv -f \"$part\" {d}/{name}; echo {sig} > {marker}")
        with src.open("rb") as f:
            self.check(script, f"copying {src.name} ({st.st_size >> 20} MiB)", stdin=f,
                       timeout=3600)

    def unstaged(self, disk: Path, extra: tuple[Path, ...] = ()) -> list[Path]:
        """The files of `stage(disk, extra)` whose copy on the host is missing or old
        (one login; copies nothing)."""
        where = self.stage(disk, extra, copy=False)
        markers = " ".join(shlex.quote(str(Path(d).parent / f".{Path(d).name}.staged"))
                           for d in where.values())
        out = self.check(f"for m in {markers}; do cat \"$m\" 2>/dev/null || echo -; done",
                         "reading the staged images' markers", timeout=60).split()
        return [Path(p) for p, sig in zip(where, out, strict=False)
                if sig != _signature(Path(p).resolve())]

    def versions(self) -> str:
        """The host's libvirt and QEMU, as its daemon reports them."""
        out = self.check(f"virsh -c {self.local_uri} version --daemon",
                         "asking libvirtd its version", timeout=60)
        fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        daemon, qemu = fields.get("Running against daemon"), fields.get("Running hypervisor")
        return ", ".join(([f"libvirt {daemon.strip()}"] if daemon else [])
                         + ([qemu.strip()] if qemu else []))

    def fetch(self, remote: str, local: Path) -> bool:
        """Copy one file from the host (a missing one is skipped: False)."""
        proc = self.run(f"cat {shlex.quote(remote)}", timeout=120)
        if proc.returncode != 0:
            return False
        local.write_bytes(proc.stdout)
        return True

    def trial_dirs(self) -> list[str]:
        """The trial directories on the host, by name (`hx-<trial>`)."""
        out = self.check(f"ls -1 {REMOTE_DIR}/trials 2>/dev/null || true", "listing trials",
                         timeout=60)
        return [line for line in out.split() if line.startswith(PREFIX)]

    def files_in(self, names: list[str]) -> list[str]:
        """The files under these trial directories."""
        if not names:
            return []
        paths = " ".join(shlex.quote(self.trial_dir(n)) for n in names)
        return self.check(f"find {paths} -type f 2>/dev/null || true", "listing trial files",
                          timeout=60).split()

    def remove_trials(self, prefixes: list[str]) -> None:
        if prefixes:
            paths = " ".join(shlex.quote(self.trial_dir(p)) for p in prefixes)
            self.check(f"rm -rf {paths}", "removing trial directories", timeout=300)


    def missing_tools(self) -> str | None:
        """None when the host has what the trial needs there, else what to install."""
        missing = self.check("for t in " + " ".join(TOOLS) + "; do command -v $t >/dev/null"
                             " || echo $t; done", "looking for tools", timeout=60).split()
        if not missing:
            return None
        return (f"libvirt host {self.host} lacks {', '.join(missing)}: apt-get install "
                f"{' '.join(sorted({TOOLS[t] for t in missing}))} there")

    def firewall_loaded(self) -> tuple[bool, str]:
        listing = self.run(f"nft list table inet {firewall.TABLE}", timeout=60)
        return firewall.listing_ok(listing.stdout.decode() if listing.returncode == 0
                                   else None)

    def doctor(self, name: str) -> list:
        """`harness doctor --hosts` for this host: its tools, libvirt and QEMU versions,
        trial firewall, and whether this machine's base image is staged there."""
        try:
            missing = self.missing_tools()
            loaded, how = self.firewall_loaded()
        except SubstrateError as exc:
            return [Check(f"{name}: ssh {self.user}@{self.host}", "FAIL", exc.message[:200],
                          "the URI's login (user, keyfile, known host key) must work")]
        out = [Check(f"{name}: host tools", "FAIL" if missing else "PASS",
                     missing or ", ".join(TOOLS), missing or ""),
               self._versions_check(name),
               Check(f"{name}: trial firewall", "PASS" if loaded else "WARN", how,
                     "" if loaded else "loaded there by the first trial's preflight")]
        return out + [self._base_image_check(name)]

    def _versions_check(self, name: str) -> Check:
        try:
            return Check(f"{name}: versions", "PASS", self.versions() or "reported nothing")
        except SubstrateError as exc:
            return Check(f"{name}: versions", "FAIL", exc.message[:200],
                         "start libvirtd there: systemctl start libvirtd")

    def _base_image_check(self, name: str) -> Check:
        disk = image.image_dir() / "disk.qcow2"
        what = f"{name}: base image {disk.parent.name}"
        if not disk.exists():
            return Check(what, "WARN", "not built on this machine yet",
                         "harness image build --kind vm")
        try:
            todo = self.unstaged(disk, image.kernel_paths(disk))
        except (SubstrateError, OSError) as exc:
            return Check(what, "FAIL", str(exc)[:200], "check the chain under "
                         f"{image.image_dir()}: harness image build --kind vm --force")
        if not todo:
            return Check(what, "PASS", f"staged in {REMOTE_DIR}/images")
        mib = sum(p.resolve().stat().st_size for p in todo) >> 20
        return Check(what, "WARN", f"not staged: {len(todo)} file(s), {mib} MiB",
                     "copied there by the first trial (once)")

    def prepare(self) -> None:
        """The host's tools, and the trial firewall (`harness.substrates.firewall`: the same
        table isolates that host's `hx*` bridges), loaded there when missing or old."""
        missing = self.missing_tools()
        if missing:
            raise PreflightError(missing)
        ok, _ = self.firewall_loaded()
        if not ok:
            docker_user = "".join(
                f"iptables -C DOCKER-USER {' '.join(r)} 2>/dev/null || "
                f"iptables -I DOCKER-USER {' '.join(r)}; " for r in firewall.DOCKER_USER_RULES)
            self.check(f"nft -f - && if iptables -n -L DOCKER-USER >/dev/null 2>&1; then "
                       f"{docker_user}fi", "loading the trial firewall",
                       stdin=firewall.load_script().encode(), timeout=60)

    def domain_type(self, kernel: str) -> str:
        """kvm when `kernel` (the host's copy) boots under KVM there, else qemu (TCG): the
        probe of `host.kvm_works` run on the host, cached per host and boot."""
        forced = os.environ.get("HARNESS_VM_DOMAIN_TYPE")
        if forced in ("kvm", "qemu"):
            return forced
        boot = self.check("cat /proc/sys/kernel/random/boot_id", "reading the boot id",
                          timeout=60).strip()
        cache = harness_home() / "kvm-probe-hosts.json"
        try:
            known = json.loads(cache.read_text())
        except (OSError, ValueError):
            known = {}
        key = f"{self.user}@{self.host}:{self.port}"
        if known.get(key, {}).get("boot") != boot:
            k = shlex.quote(kernel)
            out = self.check(
                "log=$(mktemp); [ -r /dev/kvm ] && [ -w /dev/kvm ] && timeout 20 "
                "qemu-system-x86_64 -accel kvm -M pc -m 256 -display none -nodefaults "
                f"-no-user-config -no-reboot -serial file:$log -kernel {k} -append "
                "'console=ttyS0 panic=-1 root=/dev/hx-none' >/dev/null 2>&1; "
                "grep -q 'Kernel panic' $log && echo kvm || echo qemu; rm -f $log",
                "probing KVM", timeout=90)
            known[key] = {"boot": boot, "type": out.strip() or "qemu"}
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(known))
        return known[key]["type"]


def _signature(path: Path) -> str:
    """What a staged copy's marker holds: the local file's size and mtime."""
    st = path.stat()
    return f"{st.st_size}-{st.st_mtime_ns}"


def backing_chain(disk: Path) -> list[Path]:
    """`disk` and the images under it, top first (`qemu-img info --backing-chain`)."""
    proc = subprocess.run(["qemu-img", "info", "-U", "--backing-chain", "--output=json",
                           str(disk)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SubstrateError("vm", f"qemu-img info {disk} failed", proc.stderr)
    return [Path(i["filename"]) for i in json.loads(proc.stdout)]


def main(argv: list[str] | None = None) -> int:
    """Terraform's local-exec on the host named by $HX_SSH: `script FILE` runs the sh script
    FILE there with every other `HX_*` variable exported; `clean` copies each console log
    of $HX_FETCH ("remote local" lines) back, then removes it and the files of $HX_FILES
    (one per line) there."""
    args = sys.argv[1:] if argv is None else argv
    if not (args[:1] == ["clean"] and len(args) == 1 or args[:1] == ["script"] and len(args) == 2):
        print("usage: python -m harness.substrates.libvirt.remote script FILE | clean",
              file=sys.stderr)
        return 2
    remote = RemoteHost.from_json(os.environ[SSH_ENV])
    if args[0] == "clean":
        gone = [line for line in os.environ.get("HX_FILES", "").splitlines() if line]
        for line in os.environ.get("HX_FETCH", "").splitlines():
            if line.strip():
                src, dest = line.split(" ", 1)
                remote.fetch(src, Path(dest))
                gone.append(src)
        proc = remote.run("rm -f -- " + " ".join(shlex.quote(g) for g in gone), timeout=300)
    else:
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in
                          sorted({**os.environ, "HX_URI": remote.local_uri}.items())
                          if k.startswith("HX_") and k != SSH_ENV)
        body = exports + Path(args[1]).read_text()
        proc = remote.run(f"sh -c {shlex.quote(body)}", timeout=1800)
    sys.stdout.buffer.write(proc.stdout)
    sys.stderr.buffer.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
