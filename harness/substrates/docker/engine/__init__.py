"""The harness's own Docker engine: trial containers never run on the user's dockerd.

A second dockerd with its own socket, data root, exec root and configuration (the user's
Docker configuration is never read or changed), set up for hostile tenants:

- user-namespace remapping: root in a container is an unprivileged host user (`dockremap`),
  so a capability it holds (SYS_ADMIN for tmpfs mounts, NET_ADMIN) acts only on its own
  namespaces; new cgroup v1 hierarchies, `release_agent`, host devices are out of reach;
- private cgroup namespaces: a container sees its own cgroup subtree only;
- `no-new-privileges`; a default bridge of its own (`hxe0`, unused by trials); no iptables
  rules of its own (the harness's nftables table, `harness.substrates.firewall`, isolates
  every `hx*` bridge);
- `hx-runc` as its OCI runtime (runc, then: the container's own name=systemd cgroup handed
  to its root so systemd can be PID 1 on a cgroup v1 host, and a pids limit).

`start()` needs root (scripts/setup.sh runs it); everything else talks to the socket, which
belongs to the `docker` group like the stock one. Image builds use the `hx-build` network
(bridge `hxb0`), the only harness network with a route out (NAT by the firewall).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import PreflightError
from harness.substrates.docker.engine import tls
from harness.substrates.docker.engine.lite import EngineClient
from harness.substrates.docker.settings import docker_settings

HERE = Path(__file__).resolve().parent
RUNTIME = Path("/usr/local/libexec/harness/hx-runc")
BUILD_NETWORK, BUILD_BRIDGE, BUILD_SUBNET = "hx-build", "hxb0", "10.212.255.0/24"


@dataclass(frozen=True)
class Engine:
    """Where one harness engine keeps its socket, state, configuration and default bridge.
    `DEFAULT` is the harness's engine; another layout (`Engine.named`) runs a second engine
    beside it on one machine, e.g. to stand in for a remote host in tests. Only the default
    engine gets the build network (`build=True`): other engines receive images by load."""

    socket: Path = Path("/run/harness/docker.sock")
    data_root: Path = Path("/var/lib/harness/docker")
    exec_root: Path = Path("/run/harness/docker")
    pidfile: Path = Path("/run/harness/docker.pid")
    config: Path = Path("/etc/harness/docker-engine.json")
    log: Path = Path("/var/log/harness-docker.log")
    unit: str = "harness-docker"
    # its default bridge, made by `start`: its own (dockerd with `bridge: none` deletes the
    # host's docker0, i.e. the user's engine's bridge); isolated like every `hx*` bridge
    bridge: str = "hxe0"
    bridge_addr: str = "10.212.254.1/24"
    build: bool = True
    # `ip:port` of a TLS listener besides the socket (clients need a cert of `tls_dir`'s CA)
    tcp: str = ""
    tls_dir: Path | None = None

    @classmethod
    def named(cls, name: str, bridge: str, bridge_addr: str, tcp: str = "") -> Engine:
        """A second engine `name` with its own paths under /run/harness, /var/lib/harness,
        /etc/harness and /var/log; `bridge` must start with `hx` (the trial firewall).
        `tcp` (`ip:port`): it listens there too, TLS with client certificates only (made
        under /etc/harness/N-tls by `start`)."""
        if not bridge.startswith("hx") or len(bridge) > 15:
            raise PreflightError(f"engine bridge {bridge!r}: must start with 'hx' (the trial "
                                 "firewall isolates hx* bridges), at most 15 characters")
        return cls(socket=Path(f"/run/harness/{name}/docker.sock"),
                   data_root=Path(f"/var/lib/harness/{name}"),
                   exec_root=Path(f"/run/harness/{name}/exec"),
                   pidfile=Path(f"/run/harness/{name}/docker.pid"),
                   config=Path(f"/etc/harness/{name}.json"),
                   log=Path(f"/var/log/harness-{name}.log"), unit=f"harness-{name}",
                   bridge=bridge, bridge_addr=bridge_addr, build=False, tcp=tcp,
                   tls_dir=Path(f"/etc/harness/{name}-tls") if tcp else None)

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"


DEFAULT = Engine()
SOCKET = DEFAULT.socket
DEFAULT_HOST = DEFAULT.host
DATA_ROOT = DEFAULT.data_root
SETUP_HINT = "run `sudo scripts/setup.sh` (it starts the harness's Docker engine)"


def docker_host(configured: str | None = None) -> str:
    """The engine endpoint: HARNESS_DOCKER_HOST, else `configured` (a substrate's
    `substrates.docker.host`, read from config.yaml when not given), else the local harness
    engine's socket."""
    env = os.environ.get("HARNESS_DOCKER_HOST")
    if env:
        return env
    if configured is None:
        configured = docker_settings().host
    return configured or DEFAULT_HOST


_CLIENTS: dict[tuple[str, int], Any] = {}


def client(timeout: int = 120, host: str | None = None, fresh: bool = False, tls=None):
    """A Docker SDK client of the engine at `host` (default: `docker_host()`), pinged when
    made; PreflightError with the fix. `tls` (ca, cert, key paths) for a `tcp://` engine:
    the engine's certificate is verified against `ca`, and it sees ours. One per (host,
    timeout) and process (each costs a version request and a ping), unless `fresh` (the
    caller closes it)."""
    import docker

    host = host or docker_host()
    if not fresh and (host, timeout) in _CLIENTS:
        return _CLIENTS[(host, timeout)]
    try:
        c = (docker.DockerClient(base_url=host, timeout=timeout) if tls is None
             else _tls_client(host, timeout, tls))
        c.ping()
        if not fresh:
            _CLIENTS[(host, timeout)] = c
        return c
    except Exception as exc:  # DockerException, TLS and socket errors, permission denied
        raise unreachable(host, exc) from exc


def unreachable(host: str, exc: BaseException) -> PreflightError:
    """The error for an engine that does not answer, with the fix."""
    hint = (SETUP_HINT if host == DEFAULT_HOST else
            "check substrates.docker.host in config.yaml, or the host's docker: "
            "endpoint (and its tls: files) in the hosts file")
    return PreflightError(f"the harness Docker engine at {host} is not reachable "
                          f"({str(exc)[:160]}); {hint}")


def local_client(host: str | None = None, timeout: int = 120):
    """The client of the engine at `host` for a trial: an `EngineClient` (reads without the
    SDK, `lite`) for a Unix socket, else the SDK's `client`. Not pinged: `ping()` it."""
    host = host or docker_host()
    if not host.startswith("unix://"):
        return client(timeout=timeout, host=host)
    return EngineClient(host, lambda: client(timeout=timeout, host=host), timeout)


def _tls_client(host: str, timeout: int, tls):
    """A client of a `tcp://` engine that trusts `tls.ca` only: requests would let
    REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE from the environment replace the session's CA (so
    the engine's certificate fails to verify), hence no environment, and the API version
    asked once that is so."""
    import docker

    c = docker.DockerClient(base_url=host, timeout=timeout,
                            version=docker.constants.MINIMUM_DOCKER_API_VERSION,
                            tls=docker.tls.TLSConfig(client_cert=(tls.cert, tls.key),
                                                     ca_cert=tls.ca, verify=True))
    c.api.trust_env = False
    c.api._version = c.api.version(api_version=False)["ApiVersion"]
    return c


def daemon_config(eng: Engine = DEFAULT) -> dict:
    """dockerd's configuration (written to `eng.config`)."""
    cfg = {
        "hosts": [eng.host], "data-root": str(eng.data_root), "exec-root": str(eng.exec_root),
        "pidfile": str(eng.pidfile), "userns-remap": "default",
        "default-cgroupns-mode": "private", "no-new-privileges": True,
        "iptables": False, "ip-masq": False, "ip6tables": False, "bridge": eng.bridge,
        "userland-proxy": False, "live-restore": False,
        "default-runtime": "hx-runc", "runtimes": {"hx-runc": {"path": str(RUNTIME)}},
        "log-driver": "json-file", "log-opts": {"max-size": "4m", "max-file": "2"},
    }
    if eng.tcp and eng.tls_dir is not None:
        cfg["hosts"].append(f"tcp://{eng.tcp}")
        cfg.update(tls.daemon_tls(eng.tls_dir))
    if shutil.which("getent") and subprocess.run(["getent", "group", "docker"],
                                                 capture_output=True).returncode == 0:
        cfg["group"] = "docker"
    return cfg


def _pid(eng: Engine) -> int | None:
    try:
        pid = int(eng.pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if Path(f"/proc/{pid}").exists() else None


def running(eng: Engine = DEFAULT) -> bool:
    return _pid(eng) is not None and eng.socket.exists()


def _install(src: Path, dest: Path, mode: int) -> bool:
    """Copy src to dest (root-owned, `mode`) when it differs; True when it changed."""
    if dest.exists() and dest.read_bytes() == src.read_bytes():
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    shutil.copyfile(src, tmp)
    tmp.chmod(mode)
    tmp.replace(dest)
    return True


def _write_config(eng: Engine) -> bool:
    text = json.dumps(daemon_config(eng), indent=2, sort_keys=True) + "\n"
    if eng.config.exists() and eng.config.read_text() == text:
        return False
    eng.config.parent.mkdir(parents=True, exist_ok=True)
    eng.config.write_text(text)
    return True


def _systemd() -> bool:
    return shutil.which("systemctl") is not None and Path("/run/systemd/system").is_dir()


def _unit(eng: Engine) -> Path:
    return Path(f"/etc/systemd/system/{eng.unit}.service")


def stop(eng: Engine = DEFAULT, signal: int = 15) -> None:
    """Stop the engine (root); containers go with it (no live-restore). `signal=9` kills
    it outright, as a crashed host would."""
    if signal == 15 and _systemd() and _unit(eng).exists():
        subprocess.run(["systemctl", "stop", eng.unit], capture_output=True)
        return
    pid = _pid(eng)
    if pid is None:
        return
    try:
        os.kill(pid, signal)
    except OSError:
        return
    for _ in range(300):
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.1)


def start(log=print, eng: Engine = DEFAULT) -> None:
    """Install the runtime and configuration, (re)start dockerd when needed, wait for the
    socket, make the build network. Idempotent; needs root."""
    if os.geteuid() != 0:
        raise PreflightError("starting the harness Docker engine needs root: "
                             "sudo scripts/setup.sh")
    if shutil.which("dockerd") is None:
        raise PreflightError("dockerd not found: apt-get install docker.io")
    changed = _install(HERE / "hx-runc", RUNTIME, 0o755)
    if eng.tcp and eng.tls_dir is not None:
        tls.ensure_certs(eng.tls_dir, (eng.tcp.rpartition(":")[0],))
    changed = _write_config(eng) or changed
    if running(eng) and changed:
        log("harness Docker engine: configuration changed, restarting it")
        stop(eng)
    if not running(eng):
        _launch(log, eng)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            c = client(timeout=10, host=eng.host)
            break
        except PreflightError:
            time.sleep(0.5)
    else:
        raise PreflightError(f"the harness Docker engine did not come up; see {eng.log}")
    if eng.build:
        _build_network(c)
    log(f"harness Docker engine ready at {eng.host}")


def _default_bridge(eng: Engine) -> None:
    """Create the engine's default bridge (dockerd needs it to exist)."""
    if Path(f"/sys/class/net/{eng.bridge}").exists():
        return
    for argv in (["ip", "link", "add", eng.bridge, "type", "bridge"],
                 ["ip", "addr", "add", eng.bridge_addr, "dev", eng.bridge],
                 ["ip", "link", "set", eng.bridge, "up"]):
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            raise PreflightError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")


def remove_bridge(eng: Engine) -> None:
    """A stopped second engine's cleanup: the mounts dockerd left under its data root (its
    user-namespace root is a bind mount; a killed dockerd never undoes it) and its default
    bridge."""
    root = str(eng.data_root) + "/"
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for target in sorted((m for m in mounts if m.startswith(root)), reverse=True):
        subprocess.run(["umount", target], capture_output=True)
    if Path(f"/sys/class/net/{eng.bridge}").exists():
        subprocess.run(["ip", "link", "del", eng.bridge], capture_output=True)


def _launch(log, eng: Engine) -> None:
    for d in (eng.exec_root, eng.data_root, eng.socket.parent):
        d.mkdir(parents=True, exist_ok=True)
    _default_bridge(eng)
    argv = [shutil.which("dockerd") or "dockerd", "--config-file", str(eng.config)]
    if _systemd() and eng.build:
        _unit(eng).write_text(
            "[Unit]\nDescription=harness Docker engine (trial containers)\n"
            "After=network-online.target\n\n[Service]\n"
            f"ExecStart={' '.join(argv)}\nDelegate=yes\nKillMode=process\n"
            "LimitNOFILE=1048576\n\n[Install]\nWantedBy=multi-user.target\n")
        subprocess.run(["systemctl", "daemon-reload"], check=True)
        subprocess.run(["systemctl", "enable", "--now", eng.unit], check=True)
        log(f"harness Docker engine started (systemd unit {eng.unit})")
        return
    eng.log.parent.mkdir(parents=True, exist_ok=True)
    with open(eng.log, "ab") as out:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                         start_new_session=True, close_fds=True)
    log(f"harness Docker engine started in the background (log: {eng.log})")


def _build_network(c) -> None:
    """The network image builds run on (the only harness network routed out)."""
    import docker

    try:
        c.networks.get(BUILD_NETWORK)
    except docker.errors.NotFound:
        ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=BUILD_SUBNET)])
        c.networks.create(BUILD_NETWORK, driver="bridge", ipam=ipam,
                          options={"com.docker.network.bridge.name": BUILD_BRIDGE},
                          labels={"harness.engine": "build"})


def hardening_gaps(st: dict) -> list[str]:
    """What of the threat model's hardening an engine's `status` lacks (empty: none)."""
    return [what for what, ok in (
        ("userns-remap", st["userns"]), ("private cgroup namespaces", st["cgroupns"]),
        ("the hx-runc runtime", st["runtime"] == "hx-runc")) if not ok]


def status(host: str | None = None, tls=None) -> dict:
    """What doctor reports: reachable, version, userns and cgroupns in effect."""
    host = host or docker_host()
    return status_of(client(timeout=10, host=host, tls=tls).info(), host)


def status_of(info: dict, host: str) -> dict:
    """`status` from an engine's `info()` already at hand."""
    opts = " ".join(info.get("SecurityOptions") or [])
    return {"host": host, "version": info.get("ServerVersion", "?"),
            "userns": "userns" in opts, "cgroupns": "cgroupns" in opts,
            "runtime": info.get("DefaultRuntime", "?")}
