"""Virtual BMCs: an IPMI (lanplus) endpoint per `bmc = true` node, in front of its domain.

Terraform owns their life cycle (`terraform_data.bmc` in the libvirt_trial module runs
`python -m harness.substrates.libvirt.bmc start|stop`); Python writes the per-trial
random credentials and talks to them. A BMC is a detached process bound to the trial
network's host-side address (`.1` on the trial bridge, reachable from the nodes) on a
per-trial UDP port::

    $HARNESS_HOME/secrets/bmc/<key>/<node>.json   address, port, user, password, domain
                                                  (0600; never in the run directory)
    <trial>/vm/bmc/<node>.pid    pid of the BMC process
    <trial>/vm/bmc/<node>.log    its output

On another machine's libvirt (`$HX_SSH`: the host's SSH login, from Terraform) the BMC
listens on 127.0.0.1 here and its port on the bridge address is the host's, relayed over
SSH (`bmc_relay`); the config then also holds `local_port`, which the harness's own IPMI
client (`harness.substrates.ipmi.client_power`) uses.

Its command line carries `--name hx-<trial>-<node>-bmc --campaign C --owner TAG`, so
`leftovers`/`sweep` find it after a crash. A BMC also exits on its own once its domain has
been gone for a few seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness import owner
from harness.errors import PreflightError, SubstrateError
from harness.paths import harness_home
from harness.substrates.firewall import BMC_PORTS
from harness.substrates.hypervisor import host
from harness.substrates.hypervisor.naming import PREFIX, resource_prefix
from harness.substrates.libvirt.bmc_relay import Relay
from harness.substrates.libvirt.remote import SSH_ENV, RemoteHost

MODULE = "harness.substrates.libvirt.bmc"


def state_dir(trial_root: Path) -> Path:
    """`<trial>/vm/bmc`: pid files and logs (no credentials)."""
    return trial_root / "vm" / "bmc"


def config_path(trial_root: Path, node: str) -> Path:
    """A node's BMC config with its credentials: outside the run directory (nothing of a
    run dir may hold a credential), in `$HARNESS_HOME/secrets/bmc/<hash of the trial
    dir>/`, mode 0600 in a 0700 directory; removed when the BMC stops."""
    key = hashlib.sha256(str(trial_root.resolve()).encode()).hexdigest()[:20]
    return harness_home() / "secrets" / "bmc" / key / f"{node}.json"


def free_udp_port(address: str) -> int:
    """A free UDP port on `address` in the range the trial firewall opens for BMCs."""
    start = BMC_PORTS[0] + secrets.randbelow(BMC_PORTS[1] - BMC_PORTS[0])
    for i in range(BMC_PORTS[1] - BMC_PORTS[0] + 1):
        port = BMC_PORTS[0] + (start - BMC_PORTS[0] + i) % (BMC_PORTS[1] - BMC_PORTS[0] + 1)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                sock.bind((address, port))
            except OSError:
                continue
            return port
    raise SubstrateError("vm", f"no free UDP port for a BMC on {address} in {BMC_PORTS}")


def write_config(trial_root: Path, node: str, domain: str, address: str) -> dict:
    """Per-trial random credentials and a port for one node's BMC (kept if present)."""
    path = config_path(trial_root, node)
    if path.exists():
        return json.loads(path.read_text())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.parent.chmod(0o700)
    cfg = {"node": node, "domain": domain, "address": address, "port": 0,
           "owner": owner.tag(), "trial": domain.removeprefix("hx-").removesuffix(f"-{node}"),
           "user": "hx" + secrets.token_hex(3), "password": secrets.token_urlsafe(12),
           "interface": "lanplus", "cipher_suite": 3}  # (pyghmi's BMC: IPMI 2.0 only)
    _save(path, cfg)
    return cfg


def _save(path: Path, cfg: dict) -> None:
    """A BMC config, created 0600 (it holds the credentials)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(cfg, fh)


def read_config(trial_root: Path, node: str) -> dict | None:
    path = config_path(trial_root, node)
    return json.loads(path.read_text()) if path.exists() else None


def bmc_class(power):
    """A pyghmi Bmc whose chassis commands call `power(action)` (on/off/cycle/reset/status,
    returning "on"/"off") and `power("shutdown")` for a soft off."""
    from pyghmi.ipmi import bmc as pybmc
    from pyghmi.ipmi.private import serversession

    # pyghmi hands a sessionless packet (a client's retransmitted Get Channel Auth
    # Capabilities) queued on a client session that has since ended to that session, which
    # has no handler: the BMC process died of the AttributeError. Its server handles it.
    serversession.ServerSession.sessionless_data = (
        lambda self, data, sockaddr: self.bmc.sessionless_data(data, sockaddr))

    class DomainBmc(pybmc.Bmc):
        def get_power_state(self):
            return power("status")

        def power_off(self):
            power("off")

        def power_on(self):
            power("on")

        def power_cycle(self):
            power("cycle")

        def power_reset(self):
            power("reset")

        def power_shutdown(self):
            power("shutdown")

        def cold_reset(self):
            return 0

    return DomainBmc


def _relay(cfg: dict, local: int, preferred: int):
    """The BMC's port on the libvirt host's bridge address, relayed to `local` here."""
    return Relay(RemoteHost.from_json(os.environ[SSH_ENV]), cfg["address"], local,
                 preferred, sys.stdout)


def serve(cfg: dict, uri: str, path: Path | None = None) -> None:
    """Run the BMC in this process until its domain disappears. One libvirt connection,
    kept (made again when it dies), serves its power commands and the liveness check: a
    new one every 2 s is an SSH login each over qemu+ssh, and a BMC busy logging in
    answers late. Behind a relay (another machine's libvirt) the ports go into the config
    at `path` once known; a relay that dies is started again on the same port."""
    import libvirt  # the vm extra's SDKs: imported by the BMC process only
    from pyghmi.ipmi.private import session as ipmisession

    domain = cfg["domain"]
    kept: list = []

    def conn():
        if kept and kept[0].isAlive():
            return kept[0]
        if kept:
            with contextlib.suppress(libvirt.libvirtError):
                kept.pop().close()
        kept.append(host.connect(uri))
        return kept[0]

    def power(action: str) -> str:
        if action != "shutdown":
            return host.power_with(conn(), domain, action)
        conn().lookupByName(domain).shutdown()
        return "on"

    relay = None
    if os.environ.get(SSH_ENV):
        cfg["local_port"] = free_udp_port("127.0.0.1")
        preferred = BMC_PORTS[0] + secrets.randbelow(BMC_PORTS[1] - BMC_PORTS[0] + 1)
        relay = _relay(cfg, cfg["local_port"], preferred)
        cfg["port"] = relay.port
        _save(path, cfg)
    bmc_class(power)({cfg["user"]: cfg["password"]},
                     port=int(cfg.get("local_port") or cfg["port"]),
                     address="127.0.0.1" if relay else cfg["address"])
    print(f"bmc for {domain} listening on {cfg['address']}:{cfg['port']}"
          + (f" (relayed to 127.0.0.1:{cfg['local_port']})" if relay else ""), flush=True)
    missing = 0
    while missing < 3:
        ipmisession.Session.wait_for_rsp(2)
        if relay is not None and not relay.alive():
            print("bmc relay ended; starting it again", flush=True)
            relay = _relay(cfg, cfg["local_port"], cfg["port"])
        try:
            conn().lookupByName(domain)
            missing = 0
        except (libvirt.libvirtError, PreflightError):
            missing += 1
    print(f"domain {domain} is gone; bmc exits", flush=True)


def start(trial_root: Path, node: str, name: str, campaign: str, owner_tag: str, uri: str,
          timeout: float = 20.0) -> dict:
    """Start one node's BMC (detached) and wait until its UDP port answers to binding."""
    cfg = read_config(trial_root, node)
    if cfg is None:
        raise SubstrateError("vm", f"no BMC config for {node} in {trial_root}/vm/bmc")
    state_dir(trial_root).mkdir(parents=True, exist_ok=True)
    base = state_dir(trial_root) / node
    pidfile = base.with_suffix(".pid")
    if pidfile.exists() and _alive(int(pidfile.read_text() or 0)):
        return cfg
    relayed = bool(os.environ.get(SSH_ENV))  # the port is the libvirt host's: serve picks it
    if not relayed:
        cfg["port"] = free_udp_port(cfg["address"])
        config_path(trial_root, node).write_text(json.dumps(cfg))
    log = base.with_suffix(".log").open("a")
    proc = subprocess.Popen(
        [sys.executable, "-W", "ignore::RuntimeWarning", "-m", MODULE, "serve", "--name", name,
         "--campaign", campaign or "-", "--owner", owner_tag or "-", "--uri", uri,
         "--trial", cfg.get("trial") or "-", "--config", str(config_path(trial_root, node))],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    pidfile.write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SubstrateError("vm", f"BMC for {node} exited (code {proc.returncode})",
                                 base.with_suffix(".log").read_text()[-1500:])
        if "listening" in base.with_suffix(".log").read_text():
            return read_config(trial_root, node) if relayed else cfg
        time.sleep(0.2)
    stop_pid(proc.pid)
    raise SubstrateError("vm", f"BMC for {node} did not start in {timeout:.0f}s")


def _alive(pid: int) -> bool:
    return pid > 0 and Path(f"/proc/{pid}").exists()


def stop_pid(pid: int, grace: float = 3.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def processes() -> list[dict]:
    """Running BMC processes: pid, name, campaign, owner (from their command lines)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            state = (proc / "stat").read_text().split()[2]
        except OSError:
            continue
        if MODULE not in argv or "serve" not in argv or state == "Z":
            continue
        opts = dict(zip(argv[::1], argv[1::1], strict=False))
        found.append({"pid": int(proc.name), "name": opts.get("--name", ""),
                      "campaign": opts.get("--campaign", ""), "owner": opts.get("--owner", ""),
                      "config": opts.get("--config", ""),
                      "trial": opts.get("--trial", "").strip("-")})
    return found


def leftovers(campaign: str | None = None, trial: str | None = None,
              remove: bool = False, force: bool = False) -> list[str]:
    """BMC processes of one trial, of a campaign, or all (sparing those whose owner is
    another live harness process, unless `force`)."""
    found = []
    for p in processes():
        name = p["name"]
        if not force and owner.foreign_live(p["owner"], p["trial"] or None):
            continue
        if trial:
            hit = name.startswith(resource_prefix(trial) + "-")
        elif campaign:
            hit = p["campaign"] == campaign
        else:
            hit = name.startswith(PREFIX)
        if hit:
            found.append(f"bmc {name} (pid {p['pid']})")
            if remove:
                stop_pid(p["pid"])
                if p["config"]:
                    Path(p["config"]).unlink(missing_ok=True)
                    with contextlib.suppress(OSError):  # (its directory, once empty)
                        Path(p["config"]).parent.rmdir()
    if not trial and not campaign:
        found += _stale_credentials(remove, force)
    return found


def _stale_credentials(remove: bool, force: bool = False) -> list[str]:
    """Credential directories no running BMC uses (a trial killed before its teardown)."""
    root = harness_home() / "secrets" / "bmc"
    used = {str(Path(p["config"]).parent) for p in processes() if p["config"]}
    found = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        owners = []
        for f in d.glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                cfg = json.loads(f.read_text())
                owners.append((str(cfg.get("owner", "")), cfg.get("trial")))
        if str(d) not in used and (force or not any(owner.foreign_live(o, t) or o == owner.tag()
                                                    for o, t in owners)):
            found.append(f"bmc credentials {d.name}")
            if remove:
                for f in d.iterdir():
                    f.unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    d.rmdir()
    return found


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog=MODULE)
    ap.add_argument("command", choices=["serve", "start", "stop"])
    ap.add_argument("--name", default="")
    ap.add_argument("--campaign", default="-")
    ap.add_argument("--owner", default="-", help="owner tag of the harness process")
    ap.add_argument("--trial", default="-", help="serve: the trial (gc's liveness check)")
    ap.add_argument("--uri", default="qemu:///system")
    ap.add_argument("--config", help="serve: the node's <trial>/vm/bmc/<node>.json")
    ap.add_argument("--trial-root", help="start/stop: the trial directory")
    ap.add_argument("--node")
    args = ap.parse_args(argv)
    if args.command == "serve":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        serve(json.loads(Path(args.config).read_text()), args.uri, Path(args.config))
    elif args.command == "start":
        cfg = start(Path(args.trial_root), args.node, args.name, args.campaign,
                    args.owner, args.uri)
        print(f"{cfg['address']}:{cfg['port']}")
    else:
        root = Path(args.trial_root)
        pidfile = state_dir(root) / f"{args.node}.pid"
        if pidfile.exists():
            pid = int(pidfile.read_text() or 0)
            if any(p["pid"] == pid for p in processes()):  # never a recycled pid
                stop_pid(pid)
            pidfile.unlink()
        forget(root, args.node)


def forget(trial_root: Path, node: str) -> None:
    """Remove a node's credentials (and their directory once empty)."""
    path = config_path(trial_root, node)
    path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        path.parent.rmdir()


if __name__ == "__main__":
    main()
