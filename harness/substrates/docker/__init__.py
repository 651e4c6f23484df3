"""The docker substrate: one internal network and one systemd container per node.

Everything it needs lives in this folder: the Terraform module (`terraform/`, provider
kreuzwerker/docker built by `provider.sh`), the harness's own Docker engine (`engine/`),
the offline base image (`base_image.py`) and task images (`image.py`), subnet
reservations (`network.py`) and its doctor checks (`doctor.py`). Terraform creates and
destroys; the Docker SDK execs, uploads, powers and sweeps. Every object carries the labels
`harness.trial`, `harness.campaign`, `harness.owner` and a name starting with `hx-`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import shlex
import time
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from pydantic import BaseModel

from harness.config import Settings, load_settings
from harness.errors import InputError, PreflightError, SubstrateError
from harness.substrates import egress, firewall
from harness.substrates.base import (
    AGENT_FILES_MOUNT,
    SETUP,
    ExecResult,
    Node,
    Substrate,
    TrialSpec,
)
from harness.substrates.common import tar_bytes, toolbox_argv
from harness.substrates.docker import (
    base_image,
    doctor,
    engine,
    garbage,
    network,
    pid1,
    storage,
)
from harness.substrates.docker.attach import exec_output
from harness.substrates.docker.endpoint import TLSFiles
from harness.substrates.docker.image import base_refs, image_tag, ship, task_image
from harness.substrates.docker.render import bridge_name, render_vars
from harness.substrates.docker.settings import DockerSettings

__all__ = ["DockerSubstrate", "bridge_name", "render_vars"]

HERE = Path(__file__).resolve().parent
EXEC_GRACE = 20.0


class DockerSubstrate(Substrate):
    name = "docker"
    network_modes: ClassVar[tuple[str, ...]] = ("no-network", "public", "allowlist")
    default_concurrency: ClassVar[int] = 4
    settings_model: ClassVar[type[BaseModel]] = DockerSettings

    def __init__(self, name: str = "docker", settings: Settings | None = None,
                 host: str | None = None, pool: str | None = None,
                 builder: DockerSubstrate | None = None, host_name: str = "",
                 tls: TLSFiles | None = None):
        self.settings = settings or load_settings()
        self.config: DockerSettings = self.settings.substrate(self.name, DockerSettings)
        if pool:
            self.config = self.config.model_copy(update={"pool": pool})
        self.host = host or engine.docker_host(self.config.host)
        self.host_name = host_name
        self.tls = tls
        self.builder = builder
        self._client = None
        self._remaps_root: bool | None = None

    @classmethod
    def local_endpoint(cls) -> str:
        return engine.docker_host()

    def on_host(self, host) -> DockerSubstrate:
        """Bound to the host's engine (`docker` in the hosts file); images are built on this
        (the controller's) engine and loaded onto another one on first use. A `tcp://`
        engine is reached with the host's TLS client files by the SDK, the Terraform
        provider (`cert_path`) and Ansible's docker_api connection alike."""
        ep = host.docker
        if ep is None:
            raise InputError(f"host {host.name} has no docker endpoint", key="hosts")
        if ep.tls is not None:
            missing = [p for p in (ep.tls.ca, ep.tls.cert, ep.tls.key) if not Path(p).is_file()]
            if missing:
                raise InputError(f"host {host.name}: TLS file {missing[0]} not found (valid: "
                                 "tls: {ca, cert, key}, the engine CA's certificate and a "
                                 "client certificate and key it signed)",
                                 key=f"hosts[{host.name}].docker.tls")
        builder = None if ep.url == self.host else self
        return DockerSubstrate(self.name, self.settings, host=ep.url, pool=ep.pool,
                               builder=builder, host_name=host.name, tls=ep.tls)

    def host_doctor(self, host_name: str) -> list:
        return doctor.host_checks(host_name, self.host, self.builder is not None, self.tls)

    def reachable(self) -> str | None:
        try:
            engine.client(timeout=10, host=self.host, fresh=True, tls=self.tls).close()
        except PreflightError as exc:
            return exc.message
        return None

    @property
    def client(self):
        """The harness engine's client (never the user's dockerd: see `engine`): for a
        local engine, one that reads without the Docker SDK until something else is asked
        (`engine.lite`)."""
        if self._client is None:
            self._client = (engine.client(host=self.host, tls=self.tls) if self.tls is not None
                            else engine.local_client(self.host))
        return self._client

    def provider_config(self) -> dict[str, dict]:
        if self.tls is None:
            return {"docker": {"host": self.host}}
        return {"docker": {"host": self.host, "cert_path": str(self.tls.cert_dir())}}

    @classmethod
    def validate_task(cls, config, root: Path, settings=None) -> list[str]:
        env = config.environment
        if not (root / "environment" / "Dockerfile").is_file() and not env.base_image:
            return [f"{root / 'environment' / 'Dockerfile'}: missing (a docker task needs "
                    "environment/Dockerfile or environment.base_image)"]
        return []

    @classmethod
    def scaffold(cls, env_dir: Path) -> str:
        (env_dir / "Dockerfile").write_text("FROM debian:bookworm\n")
        return "memory_mb = 512\n"

    @classmethod
    def doctor(cls) -> list:
        return doctor.checks()

    @classmethod
    def build_image(cls, force: bool = False, log=print) -> str:
        return base_image.build_docker_base(force=force, log=log)

    def login_hint(self, node: Node) -> str:
        tls = "" if self.tls is None else " " + self.tls.cli_flags()
        return f"docker -H {self.host}{tls} exec -it {node.host} bash"

    def preflight(self) -> None:
        try:
            ok = self.client.ping()  # (an SDK client has pinged when it was made)
        except PreflightError:
            raise
        except Exception as exc:
            raise engine.unreachable(self.host, exc) from exc
        if not ok:
            raise engine.unreachable(self.host, RuntimeError("_ping did not answer OK"))
        if self.builder is not None:
            return self.builder.preflight()
        firewall.require()
        self._require_hardened()
        ok, desc = base_image.docker_base_status(self.client)
        if not ok:
            raise PreflightError(f"{desc}; run `harness image build --kind docker`")

    def _require_hardened(self) -> None:
        """Refuse an engine without the isolation the threat model relies on (README,
        "Threat model"), unless `substrates.docker.allow_unhardened` says otherwise."""
        missing = [] if self.config.allow_unhardened else engine.hardening_gaps(
            engine.status_of(self.client.info(), self.host))
        if missing:
            raise PreflightError(
                f"the Docker engine at {self.host} runs without {', '.join(missing)}: an agent "
                f"could reach the host from a trial; {SETUP} as root (it starts the harness's "
                "own engine), or set substrates.docker.allow_unhardened: true in config.yaml "
                "to accept that risk")

    def terraform_module(self) -> Path:
        return HERE / "terraform"

    def prepare(self, spec: TrialSpec, log=print) -> str:
        if self.builder is None:
            return task_image(self.client, spec.task, self.settings, log=log)
        image_id = self.builder.prepare(spec, log)
        tag = image_tag(self.builder.client, spec.task, self.settings)[0]
        ship(self.builder.client, self.client, tag, self.host_name or self.host, log=log)
        return image_id

    def terraform_vars(self, spec: TrialSpec) -> dict[str, Any]:
        """Also: a trial without egress starts with none, whatever an earlier trial of the
        same id (same bridge name) left in the firewall's sets after a kill -9."""
        if not spec.task.needs_egress:
            egress.clear(bridge_name(spec.trial_id))
        self._check_storage(spec.task)
        subnet = network.reserve_subnet(self.client, spec.trial_id, self.config.pool,
                                        self.config.prefix, spec.task.network)
        return {**render_vars(spec, subnet), "pids_limit": self.config.pids_limit,
                **self._agent_store(spec)}

    def _agent_store(self, spec: TrialSpec) -> dict[str, str]:
        """The module's `agent_store_*` variables: the agent's files (`spec.agent_files`)
        mounted read-only into the primary node at AGENT_FILES_MOUNT, when this engine
        runs on this machine and remaps root (a remapped root cannot write the host root's
        files, even through a remount); otherwise none, and agent setup copies."""
        src = spec.agent_files
        if src is None or not src.is_dir() or self.builder is not None \
                or not self.host.startswith("unix://"):
            return {}
        if self._remaps_root is None:
            self._remaps_root = engine.status_of(self.client.info(), self.host)["userns"]
        if not self._remaps_root:
            return {}
        return {"agent_store_node": spec.task.primary.name, "agent_store_source": str(src)}

    def _check_storage(self, task) -> None:
        """Free space before a trial (`storage.check_free`), when the engine is on this
        machine (a remote engine's data root is not measured from here)."""
        if getattr(task, "env", None) is None or not self.host.startswith("unix://"):
            return
        root = self.client.info().get("DockerRootDir") or "/"
        storage.check_free(task, root, self.config.min_free_mb)

    def resource_watch(self, spec: TrialSpec, nodes: list[Node]) -> storage.StorageWatch:
        """Each node's writable layer against its storage limit (`storage.node_limits`):
        overlay2 on ext4 has no per-container quota, so the harness measures it."""
        return storage.StorageWatch(
            self.client.api, nodes, storage.node_limits(spec.task, self.config.storage_mb_default),
            self.config.storage_watch_sec, local=self.host.startswith("unix://"))

    def image_warnings(self, task) -> list[str]:
        refs = [task.base_image] if task.base_image and not task.dockerfile else []
        if task.dockerfile:
            refs += base_refs(task.dockerfile.read_text())
        return [n for n in dict.fromkeys(self.settings.mapping_note(r) for r in refs) if n]

    def planned_image(self, task) -> str:
        """The image tag apply would build or reuse (nothing is built)."""
        return image_tag((self.builder or self).client, task, self.settings)[0]

    def plan_vars(self, spec: TrialSpec) -> dict[str, Any]:
        """terraform_vars with a predicted, unreserved subnet (for plans)."""
        subnet = network.reserve_subnet(self.client, spec.trial_id, self.config.pool,
                                        self.config.prefix, spec.task.network,
                                        reserve=False)
        return {**render_vars(spec, subnet), "pids_limit": self.config.pids_limit,
                **self._agent_store(spec)}

    def planned_outputs(self, tf_vars: dict[str, Any]) -> dict[str, Any]:
        """The module outputs apply will produce for these vars (names and IPs are fixed)."""
        return {"nodes": {n["name"]: {"container": f"hx-{tf_vars['trial_id']}-{n['name']}",
                                      "ipv4": n["ipv4"]} for n in tf_vars["nodes"]}}

    def nodes(self, spec: TrialSpec, tf_outputs: dict[str, Any]) -> list[Node]:
        out = tf_outputs.get("nodes") or {}
        primary = spec.task.primary.name
        extra = self._image_facts(spec) if spec.image else {}
        store = {"agent_store": AGENT_FILES_MOUNT} if self._agent_store(spec) else {}
        return [Node(name=n.name, host=out[n.name]["container"], cluster_ip=out[n.name]["ipv4"],
                     primary=n.name == primary,
                     extra={**extra, **(store if n.name == primary else {})})
                for n in spec.task.nodes]

    def _image_facts(self, spec: TrialSpec) -> dict[str, Any]:
        try:
            info = self.client.api.inspect_image(spec.image)
        except Exception:  # the trial fails later, with a clearer cause
            return {"workdir": ""}
        return pid1.image_facts(info.get("Config") or {}, spec.task.dockerfile)

    def applying(self) -> None:
        """The Docker SDK's client, for the execs after apply, made while Terraform runs."""
        warm = getattr(self.client, "warm", None)
        if warm is not None:
            warm()

    async def wait_ready(self, nodes: list[Node]) -> None:
        """A node whose image replaced systemd as PID 1 and whose container stopped, or a
        Harbor task's ENTRYPOINT unit that failed, is an error naming the Dockerfile line
        and what the container said (`pid1.node_ready`), not Ansible's "container is not
        running" later."""
        await asyncio.gather(*(pid1.node_ready(self, n) for n in nodes))

    def image_mappings(self, task) -> dict[str, str]:
        refs = [task.base_image] if task.base_image and not task.dockerfile else []
        if task.dockerfile:
            refs += base_refs(task.dockerfile.read_text())
        return {r: self.settings.map_image(r) for r in dict.fromkeys(refs)
                if self.settings.map_image(r) != r}

    def inventory(self, spec: TrialSpec, nodes: list[Node]) -> dict[str, Any]:
        hosts = {n.name: {"ansible_host": n.host, "harness_cluster_ip": n.cluster_ip,
                          "harness_primary": n.primary} for n in nodes}
        return {"all": {
            "vars": {"ansible_connection": self.ansible_connection,
                     "ansible_docker_docker_host": self.host,
                     **(self.tls.ansible_vars() if self.tls else {}),
                     "ansible_python_interpreter": "/usr/bin/python3",
                     "harness_trial_id": spec.trial_id, "harness_substrate": self.name,
                     # a container is reachable while systemd still boots; its control
                     # path is the engine, not the node's network
                     "harness_node_boot_sec": 120, "harness_control_path": "engine"},
            "hosts": hosts,
            "children": {"primary": {"hosts": {n.name: {} for n in nodes if n.primary}}},
        }}

    def _gone(self, node: Node, exc: Exception) -> SubstrateError:
        return SubstrateError("docker", f"container {node.host} is gone ({exc})")

    def _exec_sync(self, node: Node, cmd: str, timeout: float,
                   env: dict[str, str] | None, stdin: bytes | None = None,
                   toolbox: str | None = None) -> ExecResult:
        """exec create/start/inspect by container name (the SDK's Container object would
        cost an inspect per call). With `stdin`, the exec's attached socket gets it and is
        then half-closed (the command sees end of file); a TLS connection cannot be
        half-closed (Python's ssl has no write-only close_notify), so over `tcp://` the
        command reads its stdin through `head -c LEN` instead. With `toolbox`, no program of
        the node's own runs the command."""
        import docker

        started = time.monotonic()
        secs = max(1, int(timeout))
        api = self.client.api
        if stdin is not None and self.tls is not None:
            cmd = f"head -c {len(stdin)} | {{\n{cmd}\n}}"
        argv = (toolbox_argv(toolbox, cmd) if toolbox else
                ["timeout", "-k", "5", str(secs), "bash", "-c", cmd])
        try:
            # a toolbox run (integrity check, verifier) holds every capability of the
            # container's user namespace, among them CAP_SYS_PTRACE, which no process the
            # agent starts can hold (its bounding set lacks it): Linux then refuses those
            # processes ptrace and /proc/PID/{root,cwd,fd,mem,environ,ns} of this run's
            # processes and their children, so none of them reaches the verifier's namespace
            # (test.sh itself runs within the node's own capabilities plus that one:
            # `integrity.bound_script`)
            exec_id = api.exec_create(node.host, argv, environment=env or {},
                                      stdin=stdin is not None,
                                      privileged=toolbox is not None)["Id"]
        except docker.errors.NotFound as exc:
            raise self._gone(node, exc) from exc
        out, err = exec_output(api, exec_id, stdin, half_close=self.tls is None)
        code = api.exec_inspect(exec_id).get("ExitCode")
        code = code if code is not None else -1
        took = time.monotonic() - started
        # 124/137 from `timeout` only once the time is up: a 137 before it is a process
        # killed otherwise (the node's memory limit, a kill -9), not a timeout
        return ExecResult(exit_code=code, stdout=out, stderr=err, seconds=took,
                          timed_out=code in (124, 137) and took >= secs - 0.5)

    async def exec(self, node: Node, cmd: str, timeout: float,
                   env: dict[str, str] | None = None, stdin: bytes | None = None,
                   toolbox: str | None = None) -> ExecResult:
        """Bounded from outside too: an exec whose output stays open (a background child
        holding stdout, a node out of pids) is given up `EXEC_GRACE` seconds after its
        timeout, as timed out (the engine call ends on its own later)."""
        started = time.monotonic()
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(self._exec_sync, node, cmd, timeout, env, stdin, toolbox),
                timeout + EXEC_GRACE)
        except TimeoutError:
            return ExecResult(-1, "", f"harness: the command did not return within "
                              f"{timeout + EXEC_GRACE:.0f}s (its output stayed open)",
                              time.monotonic() - started, timed_out=True)

    async def put_archive(self, node: Node, data: bytes | Path, dest: str) -> None:
        """The engine unpacks it (no program of the node's own is involved); a tar file is
        streamed from disk, never held in memory whole."""
        def run() -> None:
            if isinstance(data, Path):
                with data.open("rb") as fh:
                    ok = self.client.api.put_archive(node.host, dest, fh)
            else:
                ok = self.client.api.put_archive(node.host, dest, data)
            if not ok:
                raise SubstrateError("docker", f"unpacking into {node.name}:{dest} failed")

        await asyncio.to_thread(run)

    def _put_sync(self, node: Node, src: Path, dest: str) -> None:
        import docker

        api, host = self.client.api, node.host
        dest_path = PurePosixPath(dest)
        try:
            try:  # the destination usually exists (the verifier makes /tests): no mkdir exec
                ok = api.put_archive(host, dest, tar_bytes(src))
            except docker.errors.NotFound:
                if dest_path.parent == PurePosixPath("/") and dest_path.name:
                    # a new top-level directory (e.g. /solution): made by the archive itself
                    ok = api.put_archive(host, "/", tar_bytes(src, dest_path.name))
                else:
                    res = self._exec_sync(node, f"mkdir -p {shlex.quote(dest)}", 60, None)
                    if res.exit_code != 0:
                        raise SubstrateError("docker", f"cannot create {node.name}:{dest}: "
                                             f"{res.stderr.strip() or res.exit_code}"
                                             ) from None
                    ok = api.put_archive(host, dest, tar_bytes(src))
        except docker.errors.APIError as exc:
            raise SubstrateError("docker", f"upload of {src} to {node.name}:{dest} failed "
                                 f"({exc.explanation}); Docker cannot write into tmpfs mounts "
                                 "such as /tmp or /run: choose another destination") from exc
        if not ok:
            raise SubstrateError("docker", f"upload of {src} to {node.name}:{dest} failed")

    async def put(self, node: Node, src: Path, dest: str) -> None:
        await asyncio.to_thread(self._put_sync, node, src, dest)

    async def power(self, node: Node, action: str) -> str:
        def run() -> str:
            import docker

            try:
                c = self.client.containers.get(node.host)
            except docker.errors.NotFound as exc:
                raise self._gone(node, exc) from exc
            if action == "off":
                c.stop(timeout=5)
            elif action == "on":
                c.start()
            elif action in ("cycle", "reset"):
                c.restart(timeout=5)
            elif action != "status":
                raise SubstrateError("docker", f"unknown power action {action!r}; valid: "
                                     "on, off, cycle, reset, status")
            c.reload()
            return "on" if c.status == "running" else "off"

        return await asyncio.to_thread(run)

    async def reboot(self, node: Node) -> None:
        """Container restart; returns once systemd inside has finished booting."""
        await self.power(node, "reset")
        await self.wait_booted(node)

    def live_nodes(self, campaign: str | None = None, trial: str | None = None,
                   force: bool = False) -> dict[str, list[Node]]:
        return garbage.live_nodes(self.client.api, campaign, trial, force)

    def leftovers(self, campaign: str | None = None, trial: str | None = None,
                  force: bool = False) -> list[str]:
        return [f"docker {kind} {name}" for kind, _, name in
                garbage.owned(self.client.api, campaign, trial, force)]

    def sweep(self, campaign: str | None = None, trial: str | None = None,
              force: bool = False) -> list[str]:
        return garbage.sweep(self.client.api, self.config.pool, campaign, trial, force)

    def release(self, spec: TrialSpec) -> None:
        network.release_subnet(spec.trial_id, self.config.pool)

    async def set_egress(self, trial_id: str, nodes: list[Node], policy) -> dict:
        """The firewall's sets for the trial's bridge, an allowlist's answers pinned into
        every node's /etc/hosts (`egress.enforce`; public DNS is the engine's)."""
        return await egress.enforce(self, bridge_name(trial_id), nodes, policy,
                                    egress.uplinks(self.settings, self.config.egress_uplinks))

    def gateway_address(self, trial_id: str, nodes: list[Node]) -> str | None:
        """The trial bridge's own address (its network's gateway), when the engine runs on
        this machine (another machine's bridge is not this one's)."""
        if self.builder is not None or not self.host.startswith("unix://"):
            return None
        try:
            net = self.client.api.inspect_network(f"hx-{trial_id}")
        except Exception:  # no network: no nodes to serve
            return None
        for cfg in (net.get("IPAM") or {}).get("Config") or []:
            if not cfg.get("Subnet"):
                continue
            subnet = ipaddress.ip_network(cfg["Subnet"], strict=False)
            return (cfg.get("Gateway") or "").split("/")[0] or str(subnet.network_address + 1)
        return None

    async def open_gateway(self, trial_id: str, addr: str, port: int) -> None:
        await asyncio.to_thread(egress.open_gateway, bridge_name(trial_id), addr, port)

    async def close_gateway(self, trial_id: str) -> None:
        await asyncio.to_thread(egress.close_gateway, bridge_name(trial_id))
