"""Task packages: load and validate a task directory (DESIGN section 3).

`load_task(path)` returns a `Task` or raises `TaskError` whose `problems` list has one line
per problem: the file, the key and what would be valid. Foreign (Harbor/InfraBench) keys we
do not know are kept and reported through `Task.warnings`, never fatal.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.errors import TaskError
from harness.substrates import names as substrate_names

ENVIRONMENT_TYPES = ("docker", "vm", "vm-cluster", "baremetal", "cloudlab")
LAYERS = ("L1", "L2", "L3", "L4", "L5", "L6")
HOSTNAME_RE = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow")


class TaskSection(_Section):
    name: str | None = None
    version: str | None = None


class Metadata(_Section):
    difficulty: str | None = None
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    layer: Literal["L1", "L2", "L3", "L4", "L5", "L6"] | None = None
    fault_classes: list[str] = Field(default_factory=list)
    lifecycle: Literal["deployment", "management", "decommission"] | None = None
    services: list[str] = Field(default_factory=list)


# bounds that catch typos and absurd values at validate time (inf/nan never pass)
MAX_TIMEOUT_SEC = 7 * 86400
MAX_CPUS, MAX_MEMORY_MB, MAX_STORAGE_MB = 256, 1024 * 1024, 16 * 1024 * 1024


def _timeout(default: float) -> Any:
    return Field(default=default, gt=0, le=MAX_TIMEOUT_SEC, allow_inf_nan=False)


class AgentSection(_Section):
    timeout_sec: float = _timeout(1800.0)


class VerifierSection(_Section):
    timeout_sec: float = _timeout(300.0)
    env: dict[str, str] = Field(default_factory=dict)


class NodeSpec(_Section):
    name: str
    cpus: int | None = Field(default=None, gt=0, le=MAX_CPUS)
    memory_mb: int | None = Field(default=None, gt=0, le=MAX_MEMORY_MB)
    storage_mb: int | None = Field(default=None, gt=0, le=MAX_STORAGE_MB)
    roles: list[str] = Field(default_factory=list)
    bmc: bool = False
    data_disks: list[int] = Field(default_factory=list,
                                  description="Extra blank disks (VM only), sizes in MB; the "
                                              "node sees them as /dev/vdc, /dev/vdd, ...")

    @field_validator("data_disks")
    @classmethod
    def _disk_sizes(cls, v: list[int]) -> list[int]:
        if len(v) > 8 or any(not 1 <= mb <= 65536 for mb in v):
            raise ValueError(f"{v!r}: at most 8 data disks of 1-65536 MB each")
        return v

    @field_validator("name")
    @classmethod
    def _hostname(cls, v: str) -> str:
        if not HOSTNAME_RE.match(v):
            raise ValueError(f"{v!r} is not a valid hostname (lowercase letters, digits and "
                             "'-', starting with a letter, at most 63 characters)")
        return v


class AnsibleSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    setup: list[str] = Field(default_factory=list)
    bootstrap: list[str] = Field(default_factory=list)
    vars: dict[str, Any] = Field(default_factory=dict)


class EnvironmentSection(_Section):
    type: Literal["docker", "vm", "vm-cluster", "baremetal", "cloudlab"] = "docker"
    cpus: int = Field(default=1, gt=0, le=MAX_CPUS)
    memory_mb: int = Field(default=1024, gt=0, le=MAX_MEMORY_MB)
    storage_mb: int = Field(default=10240, gt=0, le=MAX_STORAGE_MB)
    base_image: str | None = None
    network: str | None = None
    build_timeout_sec: float = _timeout(900.0)
    nodes: list[NodeSpec] = Field(default_factory=list)
    ansible: AnsibleSection = Field(default_factory=AnsibleSection)


class LiveGate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    duration_sec: float = Field(gt=0, le=MAX_TIMEOUT_SEC, allow_inf_nan=False)
    interval_sec: float = Field(gt=0, le=MAX_TIMEOUT_SEC, allow_inf_nan=False)


class DurabilityGate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    restart: list[str] = Field(default_factory=list)
    reboot: list[str] = Field(default_factory=list)


class GatesSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    live: LiveGate | None = None
    durability: DurabilityGate | None = None
    decommission: bool = False


class TaskToml(BaseModel):
    """The whole task.toml; top-level sections are ours, foreign keys are kept."""

    model_config = ConfigDict(extra="allow")
    version: str | None = None
    task: TaskSection = Field(default_factory=TaskSection)
    metadata: Metadata = Field(default_factory=Metadata)
    agent: AgentSection = Field(default_factory=AgentSection)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)
    gates: GatesSection = Field(default_factory=GatesSection)


class Task(BaseModel):
    """A validated task package."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    path: Path
    name: str
    config: TaskToml
    instruction: str
    sha256: str
    warnings: list[str] = Field(default_factory=list)

    @property
    def env(self) -> EnvironmentSection:
        return self.config.environment

    @property
    def nodes(self) -> list[NodeSpec]:
        """Declared nodes, or one default node `node0`."""
        return self.env.nodes or [NodeSpec(name="node0")]

    @property
    def total_memory_mb(self) -> int:
        """Memory of all nodes together (what a trial of this task holds on its host)."""
        return sum(n.memory_mb or self.env.memory_mb for n in self.nodes)

    @property
    def total_cpus(self) -> int:
        return sum(n.cpus or self.env.cpus for n in self.nodes)

    @property
    def primary(self) -> NodeSpec:
        return next((n for n in self.nodes if "primary" in n.roles), self.nodes[0])

    @property
    def network(self) -> str | None:
        return self.env.network

    @property
    def dockerfile(self) -> Path | None:
        p = self.path / "environment" / "Dockerfile"
        return p if p.is_file() else None

    def env_file(self, name: str) -> Path | None:
        p = self.path / "environment" / name
        return p if p.exists() else None

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    @property
    def has_solution(self) -> bool:
        return (self.solution_dir / "solve.sh").is_file()


def content_sha256(root: Path) -> str:
    """A stable hash of every file in the task directory (relative path + bytes)."""
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file() and "__pycache__" not in q.parts):
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()


def _loc(loc: tuple) -> str:
    return ".".join(str(x) for x in loc if not str(x).startswith(("function-", "literal")))


def _format_error(err: dict) -> str:
    msg = err["msg"]
    if err["type"] == "literal_error":
        msg = f"got {err.get('input')!r}; {msg[0].lower()}{msg[1:]}"
    elif err["type"] == "missing":
        msg = "required key is missing"
    elif err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "value_error":
        msg = msg.removeprefix("Value error, ")
    else:
        msg = f"{msg} (got {err.get('input')!r})"
    return msg


def _unknown_keys(model: BaseModel, prefix: str = "") -> list[str]:
    found = [f"{prefix}{k}" for k in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            if isinstance(item, BaseModel):
                sub = f"{prefix}{name}[{i}]." if isinstance(value, list) else f"{prefix}{name}."
                found += _unknown_keys(item, sub)
    return found


def read_text(path: Path) -> str:
    """A task file as UTF-8 text; TaskError naming the file and the first bad byte."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError([f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                         f"{exc.start}); save it as UTF-8"]) from None


def load_task(path: str | Path) -> Task:
    """Load and validate a task directory; raise TaskError listing every problem."""
    root = Path(path).resolve()
    toml_path = root / "task.toml"
    problems: list[str] = []
    if not root.is_dir():
        raise TaskError([f"{root}: not a directory (a task is a directory with task.toml)"])
    if not toml_path.is_file():
        raise TaskError([f"{toml_path}: missing (every task needs a task.toml)"])
    text = read_text(toml_path)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskError([f"{toml_path}: invalid TOML: {exc}"]) from exc
    config = None
    try:
        config = TaskToml.model_validate(raw)
    except ValidationError as exc:
        problems += [f"{toml_path}: {_loc(e['loc'])}: {_format_error(e)}" for e in exc.errors()]
    instruction_path = root / "instruction.md"
    instruction = ""
    if instruction_path.is_file():
        try:
            instruction = read_text(instruction_path)
        except TaskError as exc:
            problems += exc.problems
            instruction = "?"
    if not instruction.strip():
        problems.append(f"{instruction_path}: missing or empty (the agent's instruction)")
    test_sh = root / "tests" / "test.sh"
    if not test_sh.is_file():
        problems.append(f"{test_sh}: missing (the verifier writes /logs/verifier/reward.txt "
                        "or reward.json)")
    if config is not None:
        problems += _check_environment(root, config)
    if problems:
        raise TaskError(problems)
    assert config is not None
    warnings = [f"{toml_path}: unknown key {k!r} kept" for k in _unknown_keys(config)]
    name = config.task.name or root.name
    return Task(path=root, name=name, config=config, instruction=instruction,
                sha256=content_sha256(root), warnings=warnings)


def _check_environment(root: Path, config: TaskToml) -> list[str]:
    env = config.environment
    toml_path = root / "task.toml"
    problems = []
    names = [n.name for n in env.nodes]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        problems.append(f"{toml_path}: environment.nodes: duplicate node names {dupes}")
    if env.type == "vm-cluster" and len(env.nodes) < 2:
        problems.append(f"{toml_path}: environment.nodes: a vm-cluster needs at least 2 "
                        "[[environment.nodes]] entries")
    if env.type == "docker" and not (root / "environment" / "Dockerfile").is_file() \
            and not env.base_image:
        problems.append(f"{root / 'environment' / 'Dockerfile'}: missing (a docker task needs "
                        "environment/Dockerfile or environment.base_image)")
    disks = [n.name for n in env.nodes if n.data_disks]
    if disks and env.type not in ("vm", "vm-cluster"):
        problems.append(f"{toml_path}: environment.nodes.data_disks: set on {disks}, but only "
                        "the vm and vm-cluster types have block devices (type is "
                        f"{env.type!r})")
    if env.network:
        why = network_problem(env.network)
        if why:
            problems.append(f"{toml_path}: environment.network: {why}")
    if env.type not in substrate_names():
        problems.append(f"{toml_path}: environment.type: {env.type!r} has no substrate in "
                        f"this harness yet (runnable: {', '.join(substrate_names())}); a "
                        "multi-node task written for bare metal runs on vm-cluster")
    gates = config.gates
    if gates.durability:
        unknown = [n for n in gates.durability.reboot if n not in (names or ["node0"])]
        if unknown:
            problems.append(f"{toml_path}: gates.durability.reboot: unknown nodes {unknown}; "
                            f"valid: {names or ['node0']}")
    return problems


def network_problem(cidr: str) -> str | None:
    """Why `cidr` cannot be a trial network (None when it can): an IPv4 private subnet with
    room for the nodes (prefix /16 to /28), not loopback, link-local or multicast."""
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return f"{cidr!r} is not a CIDR such as 10.77.0.0/24"
    if net.version != 4:
        return f"{cidr!r} is IPv6; trial networks are IPv4 (e.g. 10.77.0.0/24)"
    if net.is_loopback or net.is_link_local or net.is_multicast or net.is_reserved \
            or not net.is_private:
        return (f"{cidr!r} is not a private range; use 10.0.0.0/8, 172.16.0.0/12 or "
                "192.168.0.0/16 (e.g. 10.77.0.0/24)")
    if not 16 <= net.prefixlen <= 28:
        return f"{cidr!r}: the prefix must be /16 to /28 (room for the nodes), e.g. /24"
    return None


def discover_tasks(root: str | Path) -> list[Path]:
    """Every directory under `root` (or `root` itself) that holds a task.toml."""
    base = Path(root)
    if (base / "task.toml").is_file():
        return [base]
    return sorted(p.parent for p in base.glob("**/task.toml"))
