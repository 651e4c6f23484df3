"""The Substrate interface: where a trial's nodes live and how the harness reaches them.

Terraform owns create/destroy (one root module per trial, rendered from
`terraform_module()` + `terraform_vars()`); the Python side owns runtime operations:
exec for agents, verifiers and probes, file upload, power, reboot, and sweeping leftovers.
"""

from __future__ import annotations

import asyncio
import shlex
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from harness import substrates
from harness.errors import InputError, SubstrateError

# Until systemd (when it is PID 1) has finished booting, at most LIMIT seconds; prints its
# state. Right after a (re)start `systemctl` cannot reach systemd yet ("Failed to connect
# to bus") and returns at once: ask again (as roles/harness_node does).
BOOT_WAIT_SH = """[ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] || exit 0
end=$((SECONDS + LIMIT)); state=""
while [ $((end - SECONDS)) -gt 0 ]; do
  state=$(timeout $((end - SECONDS)) systemctl is-system-running --wait 2>/dev/null) || true
  case "$state" in running|degraded|maintenance|stopping) break ;; esac
  sleep 0.1
done
echo "$state"
"""


SETUP = "run scripts/setup.sh"


@dataclass
class Check:
    """One line of `harness doctor` (PASS, WARN or FAIL, with the fix)."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ExecResult:
    """What one command returned on a node."""

    exit_code: int
    stdout: str
    stderr: str
    seconds: float = 0.0
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class Node:
    """One node of a provisioned trial, as the runtime sees it."""

    name: str
    host: str
    cluster_ip: str
    primary: bool = False
    bmc: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Breach:
    """A node past a limit its substrate watches (`ResourceWatch`): `message` says which
    node, how much and the limit, in one line; `data` holds the numbers for the record."""

    node: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


class ResourceWatch(Protocol):
    """Watches a trial's nodes for the limits its substrate cannot set when it makes them
    (`Substrate.resource_watch`). The trial calls `check()` once when the agent window is
    about to open (a breach then is the set-up's: a pre-window error), runs `watch(event)`
    beside the window, the verifier and the gates (a breach ends them: status
    `resource_exceeded`), and copies `notes` (what is not enforced, and why) into the
    record's warnings."""

    notes: list[str]

    def check(self) -> Breach | None:
        """Measure every node once (blocking); the first breach, or None."""

    async def watch(self, event) -> Breach:
        """Measure until a node is past its limit; contain it (it must not keep growing)
        and return the breach. `event(name, **data)` logs to the trial's events."""


# where a node sees TrialSpec.agent_files when its substrate mounts them (read-only)
AGENT_FILES_MOUNT = "/opt/hx-agent/store"


@dataclass(frozen=True)
class TrialSpec:
    """What a substrate needs to know to render and operate one trial. `task` is the loaded
    `harness.task.Task` (typed loosely: the task layer sits above this one and imports it)."""

    trial_id: str
    campaign: str
    task: Any
    root: Path
    image: str = ""
    agent_memory_mb: int = 0    # what the agent's own program needs on the primary node
    agent_timeout_sec: float | None = None  # the window: task timeout x campaign multiplier
    agent_files: Path | None = None  # Agent.node_files(): at AGENT_FILES_MOUNT, if it can

    @property
    def window_sec(self) -> float:
        """The agent window this trial gets (the task's own timeout when none was set)."""
        return self.agent_timeout_sec or self.task.config.agent.timeout_sec

    def node_memory_mb(self, node: str, memory_mb: int) -> int:
        """A node's memory: the task's, plus the agent's needs on the primary node."""
        if not self.agent_memory_mb:
            return memory_mb
        return memory_mb + (self.agent_memory_mb if node == self.task.primary.name else 0)


class Substrate(ABC):
    """One place trials can run: a folder `harness/substrates/<name>/` holds the class, its
    Terraform module (`terraform/`), image builder, task-field checks, doctor checks and
    gc. The core knows substrates only through this contract and the registry.

    Declarations (class attributes) tell the core what it must not guess: `capabilities`
    (what faults and gates may rely on: power, own_kernel, own_clock, block_devices;
    root_ssh: its nodes get password-less root SSH to each other for every task format,
    as a bare-metal cluster's machines have),
    `holds_capacity` (a trial holds host memory and CPUs while it runs),
    `default_concurrency`, `engine` (the hosts-file key of the endpoint it runs on; empty
    when its nodes live elsewhere) with `endpoint_model` (that key's pydantic model or
    annotated type, from the folder's endpoint.py), `network_modes`
    (the egress modes of task.toml it enforces; others are refused at validate time),
    and `settings_model` (its section of config.yaml, `substrates.<name>`).

    What loading a task needs is declared in `substrate.toml` instead (read without importing
    the folder) and set on the class by the registry: `ansible_connection` (the connection
    plugin its inventories use, "ssh" unless it says otherwise: the playbook server loads
    every substrate's before its first run), `env_types` (the task.toml
    `[environment] type`s it runs by default), `node_fields` (the `[[environment.nodes]]`
    keys it honours beyond name, cpus, memory_mb, storage_mb, roles, host: pydantic field
    definitions, merged into task.toml's node model), `stands_in_for` (task types no
    substrate runs yet whose tasks it can run unchanged when their `type` is set to its own)
    and `backends` (the names a foreign task format may give its backend, e.g. InfraBench's
    `vm_backend`). The folder's `[providers.<local name>]` (Terraform provider pins: source,
    version, `shared` when one provider process may serve every command of a harness
    process, `build` the folder's script that builds it into the mirror) become the class's
    `providers` as it is made (`__init_subclass__`), so that finding which providers are
    shared imports no substrate.
    """

    name: ClassVar[str]
    providers: ClassVar[dict[str, dict[str, Any]]] = {}  # its folder's substrate.toml
    env_types: ClassVar[tuple[str, ...]] = ()
    capabilities: ClassVar[frozenset[str]] = frozenset({"power"})
    holds_capacity: ClassVar[bool] = False
    default_concurrency: ClassVar[int] = 1
    node_fields: ClassVar[dict[str, tuple[Any, Any]]] = {}
    network_modes: ClassVar[tuple[str, ...]] = ("no-network",)
    settings_model: ClassVar[type[BaseModel] | None] = None
    engine: ClassVar[str] = ""
    endpoint_model: ClassVar[Any] = None
    stands_in_for: ClassVar[tuple[str, ...]] = ()
    backends: ClassVar[tuple[str, ...]] = ()
    ansible_connection: ClassVar[str] = "ssh"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        pins = substrates.folder_providers(cls.__module__)
        if pins is not None:
            cls.providers = pins

    @abstractmethod
    def terraform_module(self) -> Path:
        """The Terraform module this substrate instantiates per trial."""

    @abstractmethod
    def terraform_vars(self, spec: TrialSpec) -> dict[str, Any]:
        """Variables for the module, rendered into the trial's main.tf.json."""

    @abstractmethod
    def nodes(self, spec: TrialSpec, tf_outputs: dict[str, Any]) -> list[Node]:
        """The trial's nodes, from the module's outputs."""

    @abstractmethod
    def inventory(self, spec: TrialSpec, nodes: list[Node]) -> dict[str, Any]:
        """The Ansible inventory (YAML-able dict) with connection vars for every node."""

    @abstractmethod
    async def exec(self, node: Node, cmd: str, timeout: float,
                   env: dict[str, str] | None = None, stdin: bytes | None = None,
                   toolbox: str | None = None) -> ExecResult:
        """Run `cmd` with bash on `node` as root, killed after `timeout` seconds; `stdin`
        (when given) is its standard input, then end of file. With `toolbox` (a directory
        made by `harness.trial.integrity`), `cmd` runs under that toolbox's `sh`, with its
        `bin` first on PATH, not through the node's own shell or `timeout` (the harness
        bounds it from outside)."""

    @abstractmethod
    async def put(self, node: Node, src: Path, dest: str) -> None:
        """Copy a local file or directory to `dest` (a directory path) on the node."""

    @abstractmethod
    def sweep(self, campaign: str | None = None, trial: str | None = None,
              force: bool = False) -> list[str]:
        """Find and remove leftovers owned by the harness; return what was removed. What
        another live harness process owns (`harness.owner`) is spared unless `force`."""

    # -- documented defaults ---------------------------------------------------------

    @classmethod
    def check_name(cls, name: str | None) -> None:
        """For a constructor given a registry name: refuse one it is not registered as."""
        if name not in (None, cls.name):
            raise InputError(f"{cls.__name__} is registered as {cls.name!r}, not {name!r}")

    @classmethod
    def validate_task(cls, config, root: Path, settings=None) -> list[str]:
        """Problems of a task.toml for this substrate, one line each (`file: key: why`);
        `settings`: config.yaml's, with a campaign's overrides when it loads the task."""
        return []

    @classmethod
    def scaffold(cls, env_dir: Path) -> str:
        """Write a new task's environment/ files for this substrate (`harness task new`);
        return the rest of its `[environment]` table (and nodes) as TOML."""
        return "memory_mb = 1024\n"

    @classmethod
    def doctor(cls) -> list[Check]:
        """Host checks for this substrate."""
        return []

    @classmethod
    def build_image(cls, force: bool = False, log=print) -> str:
        """Build (or find cached) the base image; `harness image build --kind <name>`."""
        raise NotImplementedError(f"{cls.name} has no base image to build")

    def preflight(self) -> None:
        """Raise PreflightError with the fix when the host cannot run this substrate."""

    @classmethod
    def local_endpoint(cls) -> str:
        """The endpoint of this machine's `engine` (the default single host's)."""
        return ""

    def on_host(self, host) -> Substrate:
        """This substrate bound to a host of the hosts file (`placement.HostSpec`): its
        engine endpoint, cached images, reservations. Substrates whose nodes live elsewhere
        (no `engine`) are the same object on every host."""
        if self.engine:
            raise SubstrateError(self.name, f"{self.name} cannot run on host {host.name} yet")
        return self

    def host_doctor(self, host_name: str) -> list[Check]:
        """`harness doctor --hosts`: this substrate's checks on one host it is bound to
        (reachability, versions, images), each with the fix."""
        why = self.reachable()
        return [Check(f"{host_name}: {self.name}", "FAIL" if why else "PASS",
                      why or "reachable", "check the host's endpoint in the hosts file"
                      if why else "")]

    def reachable(self) -> str | None:
        """None when the engine this object is bound to answers, else why not (one line):
        the campaign drains a host whose engine stops answering."""
        return None

    def prepare(self, spec: TrialSpec, log=print) -> str:
        """Build or find the (cached) image the trial's nodes boot from; return its ref."""
        return ""

    def planned_image(self, task) -> str:
        """The image `prepare` would use, without building it (for plans)."""
        return ""

    def plan_vars(self, spec: TrialSpec) -> dict[str, Any]:
        """`terraform_vars` for a plan: nothing reserved or created on the host."""
        return self.terraform_vars(spec)

    def planned_outputs(self, tf_vars: dict[str, Any]) -> dict[str, Any] | None:
        """The module outputs apply will produce, when known before apply (then Ansible
        starts while Terraform creates the nodes); None when only apply knows them."""
        return None

    def applying(self) -> None:
        """Called once the trial's `terraform apply` has started: the process is then only
        waiting, so what the steps after apply will need may be made ready now."""

    async def wait_ready(self, nodes: list[Node]) -> None:
        """After apply: return once every node answers (VMs boot after their domain
        exists; containers answer as soon as they exist)."""

    def provider_config(self) -> dict[str, dict]:
        """Provider blocks of the trial's root module (connection settings), by provider."""
        return {}

    def secrets(self, spec: TrialSpec) -> list[str]:
        """Credentials this substrate made or holds for the trial (BMC passwords...): the
        trial redacts them from everything it writes."""
        return []

    def login_hint(self, node: Node) -> str:
        """How a person gets a shell on a kept node."""
        return f"node {node.name}: {node.host}"

    def release(self, spec: TrialSpec) -> None:
        """Give back host-side reservations of a trial (after its teardown)."""

    def image_warnings(self, task) -> list[str]:
        """What the trial record should say about the task's base image(s): a mapping
        through image_overrides that changes the distribution."""
        return []

    def image_mappings(self, task) -> dict[str, str]:
        """Each base image the task names that runs as another, local one (the record's
        `images`)."""
        return {}

    async def set_egress(self, trial_id: str, nodes: list[Node], policy) -> dict:
        """Give the trial's network the egress of `policy` (a task NetworkPolicy) from now
        on; return the pinned DNS answers (host -> addresses) of an allowlist. Substrates
        enforce the modes in `network_modes` (validation refuses the others)."""
        if policy.mode != "no-network":
            raise SubstrateError(self.name, f"network mode {policy.mode!r} is not available "
                                 f"on {self.name} (it supports: {', '.join(self.network_modes)})")
        return {}

    def gateway_address(self, trial_id: str, nodes: list[Node]) -> str | None:
        """This machine's own address on the trial's network (the bridge's), where the
        model gateway listens for the nodes (`open_gateway` lets them reach it; they call
        from their `cluster_ip`); None when the nodes cannot reach this machine (agents
        inside the environment then get no gateway; agents whose loop runs on the
        controller still do)."""
        return None

    async def relay_gateway(self, trial_id: str, nodes: list[Node], port: int,
                            target: tuple[str, int]) -> tuple[str, int] | None:
        """Where `gateway_address` is None because the trial's network is on another
        machine: relay an address:port there (on the trial's network, `port` where free)
        to `target` (address, port) on this machine, until `close_gateway`; return the
        relay's (address, port), or None where the substrate has no relay."""
        return None

    async def open_gateway(self, trial_id: str, addr: str, port: int) -> None:
        """Open exactly `addr:port` to the trial's nodes (the firewall), in every network
        mode."""

    async def close_gateway(self, trial_id: str) -> None:
        """Undo `open_gateway` and `relay_gateway` (quiet when there is nothing to
        close)."""

    async def put_archive(self, node: Node, data: bytes | Path, dest: str) -> None:
        """Unpack the tar `data` (bytes, or a tar file on the controller, which a substrate
        may stream) into the existing directory `dest` on the node."""
        if isinstance(data, Path):
            data = await asyncio.to_thread(data.read_bytes)
        res = await self.exec(node, f"tar -x -C {shlex.quote(dest)}", 300, stdin=data)
        if not res.ok:
            raise SubstrateError(self.name, f"unpacking into {node.name}:{dest} failed",
                                 res.stderr)

    async def power(self, node: Node, action: str) -> str:
        """on / off / cycle / reset / status."""
        raise SubstrateError(self.name, f"{self.name} does not support power {action}")

    async def reboot(self, node: Node) -> None:
        await self.power(node, "reset")
        await self.wait_booted(node)

    async def wait_booted(self, node: Node, timeout: float = 90.0) -> str:
        """After a power cycle or reboot: wait until systemd (when it is PID 1) has finished
        booting, so that what is checked next sees the node's services as boot left them;
        returns systemd's state ("running", "degraded", ...; "" when unknown)."""
        limit = max(1, int(timeout))
        res = await self.exec(node, BOOT_WAIT_SH.replace("LIMIT", str(limit)),
                              timeout=timeout + 15)
        return res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""

    def leftovers(self, campaign: str | None = None, trial: str | None = None,
                  force: bool = False) -> list[str]:
        """What `sweep` would remove, without removing it."""
        return []

    def resource_watch(self, spec: TrialSpec, nodes: list[Node]) -> ResourceWatch | None:
        """What watches the trial's nodes for limits this substrate cannot set when it makes
        them (e.g. storage on a filesystem without per-container quotas). None (the
        default): nothing to watch, every limit is the node's own (a VM's disk size)."""
        return None

    def live_nodes(self, campaign: str | None = None, trial: str | None = None,
                   force: bool = False) -> dict[str, list[Node]]:
        """Running nodes of matching trials by trial id, reachable through `exec` (gc uses
        them to heal faults from the node-side ledgers before removing the trials)."""
        return {}
