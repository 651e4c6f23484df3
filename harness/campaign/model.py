"""Campaigns: a YAML file expands to tasks x agents x attempts; `plan` renders, `apply` runs.

`plan` validates every task and agent, runs each substrate's preflight, gives every trial a
deterministic id, renders its Terraform root and inventory into the run dir and writes
`plan.json`; it creates no resource. `apply` (harness/campaign/queue.py) drives the plan.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness import substrates
from harness.agents import agent_class
from harness.errors import ConfigError, InputError, TaskError
from harness.gateway.models import Budget
from harness.paths import RunPaths, make_trial_id
from harness.placement import load_hosts
from harness.results import write_json_atomic
from harness.task import Task, discover_tasks, load_task
from harness.validation import describe

ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
MAX_ATTEMPTS, MAX_TRIALS = 100, 20000
SECRET_KEY = re.compile(r"key|token|secret|passw|credential|auth", re.IGNORECASE)


class TaskSelector(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    layer: list[str] | None = None
    tags: list[str] | None = None
    difficulty: list[str] | None = None


class AgentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    model: str | None = None
    kwargs: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _refs_only(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not ENV_REF.match(value):
                raise ValueError(f"env.{key} must reference the caller's environment as "
                                 f"${{VAR}}, never hold a value (got a literal)")
        return v

    @field_validator("kwargs")
    @classmethod
    def _no_literal_secrets(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key, value in v.items():
            if SECRET_KEY.search(key) and isinstance(value, str) and not ENV_REF.match(value):
                raise ValueError(f"kwargs.{key} looks like a credential: reference the "
                                 f"caller's environment as ${{VAR}}, never a literal value")
        return v

    @property
    def label(self) -> str:
        return f"{self.name}:{self.model}" if self.model else self.name


class Concurrency(BaseModel):
    model_config = ConfigDict(extra="forbid")
    total: int = Field(default=4, ge=1)
    per_substrate: dict[str, int] = Field(default_factory=substrates.default_concurrency)

    @field_validator("per_substrate")
    @classmethod
    def _positive(cls, v: dict[str, int]) -> dict[str, int]:
        bad = [k for k, n in v.items() if n < 1]
        if bad:
            raise ValueError(f"must be >= 1 for {bad}")
        return v


class Capacity(BaseModel):
    """Host over-commit for VM trials (memory and vCPUs held while a trial runs)."""

    model_config = ConfigDict(extra="forbid")
    memory_overcommit: float = Field(default=1.0, gt=0)
    cpu_overcommit: float = Field(default=4.0, gt=0)


class CampaignFile(BaseModel):
    """The campaign file (ours: unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,40}$")
    tasks: list[str | TaskSelector] = Field(min_length=1)
    agents: list[AgentSpec] = Field(min_length=1)
    attempts: int = Field(default=3, ge=1, le=MAX_ATTEMPTS)
    substrate: dict[str, str] = Field(default_factory=dict)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    timeout_multiplier: float = Field(default=1.0, gt=0, le=100, allow_inf_nan=False)
    retries: int = Field(default=2, ge=0, le=20)
    image_overrides: dict[str, str] = Field(default_factory=dict)
    capacity: Capacity = Field(default_factory=Capacity)
    seed: int = 0
    budget: Budget = Field(default_factory=Budget)
    hosts: list[dict[str, Any]] | None = None

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, v: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """The same checks as a hosts file (`harness.placement.load_hosts`)."""
        if v is not None:
            try:
                load_hosts(v, file="hosts")
            except InputError as exc:
                raise ValueError(exc.message.removeprefix("hosts: ")) from None
        return v

    @field_validator("concurrency", mode="before")
    @classmethod
    def _total_only(cls, v: Any) -> Any:
        """`concurrency: 3` is shorthand for `concurrency: {total: 3}`."""
        return {"total": v} if isinstance(v, int) and not isinstance(v, bool) else v

    @property
    def limits(self) -> Concurrency:
        return self.concurrency


def load_campaign(path: str | Path) -> tuple[CampaignFile, str]:
    """The validated campaign and the file's text; errors name the file and key."""
    path = Path(path)
    if not path.is_file():
        raise InputError("campaign file not found", file=str(path))
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                          f"{exc.start}); save it as UTF-8", file=str(path)) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {' '.join(str(exc).split())}",
                          file=str(path)) from None
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping with name, tasks, agents", file=str(path))
    try:
        return CampaignFile.model_validate(raw), text
    except ValidationError as exc:
        key, msg = describe(exc, CampaignFile)
        raise ConfigError(msg, file=str(path), key=key) from None


def _matches(task: Task, sel: TaskSelector) -> bool:
    meta = task.config.metadata
    return ((sel.layer is None or meta.layer in sel.layer)
            and (sel.tags is None or bool(set(sel.tags) & set(meta.tags)))
            and (sel.difficulty is None or meta.difficulty in sel.difficulty))


def resolve_tasks(camp: CampaignFile, base: Path, settings=None) -> list[Task]:
    """Expand paths, globs and filters into validated tasks (sorted, de-duplicated);
    `settings`: the machine's with the campaign's overrides (image_overrides)."""
    found: dict[Path, Task] = {}
    problems: list[str] = []
    for i, entry in enumerate(camp.tasks):
        sel = entry if isinstance(entry, TaskSelector) else TaskSelector(path=entry)
        pattern = sel.path if os.path.isabs(sel.path) else str(base / sel.path)
        paths = [Path(p) for p in sorted(glob.glob(pattern))]
        dirs = [t for p in paths if p.is_dir() for t in discover_tasks(p)]
        if not dirs:
            raise InputError(f"{sel.path!r} matches no task directory", key=f"tasks[{i}]")
        for d in dirs:
            try:
                task = load_task(d, settings=settings)
            except TaskError as exc:
                problems += exc.problems
                continue
            if _matches(task, sel):
                found[task.path] = task
    if problems:
        raise TaskError(problems)
    if not found:
        raise InputError("the task filters select no task", key="tasks")
    return sorted(found.values(), key=lambda t: t.name)


@dataclass
class PlannedTrial:
    """One trial of the plan; `fingerprint` changes when its inputs change."""

    trial_id: str
    task: str
    task_path: str
    task_sha256: str
    agent: str
    model: str | None
    attempt: int
    substrate: str
    fingerprint: str
    cpus: int
    memory_mb: int
    timeout_sec: float = 0.0  # agent + verifier time limits: placement's duration prior


def trial_id_for(campaign: str, task: str, agent: AgentSpec, attempt: int, seed: int) -> str:
    """`make_trial_id` salted with a digest of the trial's identity in the campaign."""
    key = json.dumps([campaign, task, agent.name, agent.model, attempt, seed])
    return make_trial_id(task, agent.name, attempt, hashlib.sha256(key.encode()).hexdigest()[:6],
                         agent.model)


def substrate_for(task: Task, camp: CampaignFile) -> str:
    """The task's environment type, unless the campaign maps that type (or all: `default`)."""
    kind = task.env.type
    return (camp.substrate.get(kind) or camp.substrate.get("default")
            or substrates.for_env_type(kind))


def expand(camp: CampaignFile, tasks: list[Task]) -> list[PlannedTrial]:
    """Every trial of the campaign; refuses more than MAX_TRIALS and duplicate trials (an
    agent listed twice would run each of its trials twice under one id)."""
    total = len(tasks) * len(camp.agents) * camp.attempts
    if total > MAX_TRIALS:
        raise InputError(f"{len(tasks)} task(s) x {len(camp.agents)} agent(s) x "
                         f"{camp.attempts} attempt(s) = {total} trials; at most {MAX_TRIALS} "
                         "per campaign (split it)", key="attempts")
    seen: dict[str, int] = {}
    for i, agent in enumerate(camp.agents):
        key = json.dumps([agent.name, agent.model], sort_keys=True)
        if key in seen:
            raise InputError(f"agents[{i}] ({agent.label}) repeats agents[{seen[key]}]: the "
                             "same agent and model twice would give the same trials; use "
                             "attempts for more runs", key=f"agents[{i}]")
        seen[key] = i
    out = []
    for task in tasks:
        for agent in camp.agents:
            agent_key = json.dumps(agent.model_dump(), sort_keys=True)
            for attempt in range(1, camp.attempts + 1):
                sub = substrate_for(task, camp)
                fp = hashlib.sha256(json.dumps([task.sha256, agent_key, sub,
                                                camp.timeout_multiplier]).encode()).hexdigest()
                out.append(PlannedTrial(
                    trial_id=trial_id_for(camp.name, task.name, agent, attempt, camp.seed),
                    task=task.name, task_path=str(task.path), task_sha256=task.sha256,
                    agent=agent.name, model=agent.model, attempt=attempt, substrate=sub,
                    fingerprint=fp[:16],
                    cpus=task.total_cpus,  # the agent's program runs on a node too
                    memory_mb=task.total_memory_mb + agent_class(agent.name).node_memory_mb,
                    timeout_sec=task.config.agent.timeout_sec * camp.timeout_multiplier
                    + task.config.verifier.timeout_sec))
    return out


def read_plan(run_dir: Path) -> dict[str, Any]:
    path = RunPaths(run_dir).plan
    if not path.is_file():
        raise InputError("not a campaign run dir (no plan.json); run `harness campaign plan`",
                         file=str(run_dir))
    return json.loads(path.read_text())


def write_plan(run_dir: Path, camp: CampaignFile, text: str, source: Path,
               trials: list[PlannedTrial]) -> dict[str, Any]:
    """Write campaign.yaml (as given) and plan.json; refuse a dir of another campaign."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if RunPaths(run_dir).plan.exists():
        other = read_plan(run_dir).get("campaign")
        if other != camp.name:
            raise InputError(f"run dir belongs to campaign {other!r}, not {camp.name!r}; "
                             "choose another --out", file=str(run_dir))
    RunPaths(run_dir).campaign_file.write_text(text)
    plan = {"campaign": camp.name, "source": str(source.resolve()),
            "file_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "config": camp.model_dump(mode="json"), "trials": [asdict(t) for t in trials]}
    write_json_atomic(RunPaths(run_dir).plan, plan)
    return plan


def trial_state(run_dir: Path, t: dict[str, Any]) -> str:
    """done (a final result with the same inputs) | changed | cancelled | pending."""
    result = RunPaths(run_dir).trial(t["trial_id"]).result
    if not result.is_file():
        return "pending"
    try:
        rec = json.loads(result.read_text())
    except ValueError:
        return "pending"
    if rec.get("status") == "cancelled":
        return "cancelled"
    done_fp = rec.get("fingerprint")
    return "done" if done_fp in (None, t["fingerprint"]) else "changed"


def move_aside(run_dir: Path, trial_id: str, why: str) -> Path | None:
    """Keep an unfinished trial's evidence under aborted/ before it is re-run."""
    src = RunPaths(run_dir).trial(trial_id).root
    if not src.exists():
        return None
    n = 1
    while (dest := RunPaths(run_dir).aborted / f"{trial_id}.{why}.{n}").exists():
        n += 1
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src), str(dest))
    return dest
