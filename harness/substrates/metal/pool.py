"""Pools of bare-metal machines: `$HARNESS_HOME/pools/<name>.yaml`, schema-checked.

A pool file lists machines the harness may lease, one trial at a time each::

    reset: power-cycle            # between trials: reimage | power-cycle | none
    reimage_command: ""           # reset = reimage: run on this host, HX_MACHINE etc. set
    vault_file: lab.vault.yml     # optional: ansible-vault file for `vault:KEY` references
    vault_password_file: ~/.lab-vault-pass
    machines:
      - name: node0
        ssh: {host: 10.0.0.10, port: 22, user: root, key: ~/.ssh/lab_ed25519}
        bmc: {address: 10.0.1.10, port: 623, interface: lanplus,
              # the task-facing account (user id 2): what a trial's primary is given
              user: "${LAB_BMC_USER}", password: "vault:node0_bmc_password",
              # the harness's own account, in another slot: never given to a task
              harness: {user_id: 4, user: "vault:node0_hx_user",
                        password: "secret:lab/node0.harness-password"}}
        tags: [x86_64, nvme]
        management_address: 10.0.1.110   # the node's own address on the BMC network

BMC credentials are references, never literal: `${VAR}` (from the environment of the
harness process), `vault:KEY` (a key of the decrypted vault file) or `secret:PATH` (a file
under `$HARNESS_HOME/secrets/` that only its owner may read). A literal is refused when
the file is loaded, so no credential ever sits in a pool file in the clear; resolved
values are only held in memory and handed to what needs them (IPMI calls, the node's
root-only credentials file), and every trial redacts them from what it writes.

A BMC has two accounts (`accounts.py`): the task-facing one (`user`, `password`, slot
`user_id`, default 2), which a trial's primary gets in /etc/harness/bmc-credentials, and
the harness's own (`harness`), which power, resets and the portal use and no task or agent
is ever given. Without `harness` the harness uses the task-facing account (as pools made
before it did): then a task that changes that password in-band locks the harness out,
and `harness doctor` says so.
"""

from __future__ import annotations

import os
import re
import stat
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from harness.errors import ConfigError, InputError
from harness.paths import harness_home
from harness.validation import describe

REF = re.compile(r"^(?:\$\{([A-Za-z_][A-Za-z0-9_]*)\}|vault:([A-Za-z0-9_.-]+)"
                 r"|secret:((?:[A-Za-z0-9_-][A-Za-z0-9_.-]*/)*[A-Za-z0-9_-][A-Za-z0-9_.-]*))$")
NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
RESETS = ("reimage", "power-cycle", "none")


def pools_dir() -> Path:
    return harness_home() / "pools"


def pool_path(name: str) -> Path:
    return pools_dir() / f"{name}.yaml"


class SshAccess(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: str = Field(min_length=1)
    port: int = Field(default=22, ge=1, le=65535)
    user: str = "root"
    key: str = Field(min_length=1, description="Private key file (~ expanded)")

    @property
    def key_path(self) -> Path:
        return Path(os.path.expanduser(self.key))


def _reference(v: str) -> str:
    if not REF.match(v):
        raise ValueError("a literal credential; write a reference: \"${ENV_VAR}\", "
                         "\"vault:KEY\" (a key of the pool's vault_file) or \"secret:PATH\" (a "
                         "file under $HARNESS_HOME/secrets/ only its owner reads)")
    return v


class BmcAccount(BaseModel):
    """The harness's own BMC account: a user slot of its own, never given to a task."""

    model_config = ConfigDict(extra="forbid")
    user_id: int = Field(ge=2, le=63, description="Its IPMI user slot (not the task's)")
    user: str
    password: str

    @field_validator("user", "password")
    @classmethod
    def _ref(cls, v: str) -> str:
        return _reference(v)


class BmcAccess(BaseModel):
    model_config = ConfigDict(extra="forbid")
    address: str = Field(min_length=1)
    port: int = Field(default=623, ge=1, le=65535)
    user: str = Field(description="The task-facing account (given to the primary)")
    password: str
    user_id: int | None = Field(default=None, ge=2, le=63, description="The task-facing "
                                "account's slot (unset: 2 where the harness restores it)")
    interface: Literal["lan", "lanplus"] = "lanplus"
    channel: int = Field(default=1, ge=1, le=15, description="The BMC's LAN channel")
    cipher_suite: int | None = Field(default=None, ge=0, le=17, description="lanplus: the "
                                     "cipher suite ipmitool uses (default: it asks the BMC)")
    harness: BmcAccount | None = Field(default=None, description="The harness's own account")

    @field_validator("user", "password")
    @classmethod
    def _ref(cls, v: str) -> str:
        return _reference(v)

    @model_validator(mode="after")
    def _slots(self) -> BmcAccess:
        if self.harness is not None and self.harness.user_id == (self.user_id or 2):
            raise ValueError(f"harness.user_id {self.harness.user_id} is the task-facing "
                             "account's slot (user_id, default 2): the harness needs a slot "
                             "of its own")
        return self


class Machine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    ssh: SshAccess
    bmc: BmcAccess | None = None
    tags: list[str] = Field(default_factory=list)
    management_address: str | None = Field(
        default=None, description="The machine's own address on the BMC network")
    domain: str | None = Field(default=None, description="Emulated pools: the libvirt "
                               "domain standing in for the machine")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError(f"{v!r}: lowercase letters, digits and '-', starting with a "
                             "letter, at most 31 characters")
        return v


class Pool(BaseModel):
    """One pool file, validated; `name` is the file's stem."""

    model_config = ConfigDict(extra="forbid")
    name: str = ""
    reset: Literal["reimage", "power-cycle", "none"] = "power-cycle"
    reimage_command: str | None = None
    vault_file: str | None = None
    vault_password_file: str | None = None
    emulated: bool = False
    emulation: dict[str, Any] = Field(default_factory=dict, description="An emulated "
                                      "pool's own settings (networks, memory), its maker's")
    machines: list[Machine] = Field(min_length=1)

    @field_validator("machines")
    @classmethod
    def _unique(cls, v: list[Machine]) -> list[Machine]:
        names = [m.name for m in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate machine names {dupes}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Pool:
        if self.reset == "reimage" and not self.reimage_command and not self.emulated:
            raise ValueError("reset = reimage needs reimage_command (or reset = power-cycle "
                             "/ none)")
        refs = [r for m in self.machines if m.bmc for a in (m.bmc, m.bmc.harness) if a
                for r in (a.user, a.password)]
        if any(r.startswith("vault:") for r in refs) and not (
                self.vault_file and self.vault_password_file):
            raise ValueError("vault: references need vault_file and vault_password_file")
        return self

    def machine(self, name: str) -> Machine:
        for m in self.machines:
            if m.name == name:
                return m
        raise InputError(f"pool {self.name} has no machine {name!r} (valid: "
                         f"{', '.join(m.name for m in self.machines)})")

    def with_tags(self, tags: list[str]) -> list[Machine]:
        return [m for m in self.machines if set(tags) <= set(m.tags)]

    @cached_property
    def _vault(self) -> dict:
        from ansible.constants import DEFAULT_VAULT_ID_MATCH
        from ansible.errors import AnsibleError
        from ansible.parsing.vault import VaultLib, VaultSecret

        base = pool_path(self.name).parent
        vault = base / os.path.expanduser(self.vault_file or "")
        secret = base / os.path.expanduser(self.vault_password_file or "")
        try:
            lib = VaultLib([(DEFAULT_VAULT_ID_MATCH,
                             VaultSecret(secret.read_bytes().strip()))])
            data = yaml.safe_load(lib.decrypt(vault.read_bytes())) or {}
        except (OSError, AnsibleError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot open the vault: {type(exc).__name__}",
                              file=str(vault), key="vault_file") from None
        if not isinstance(data, dict):
            raise ConfigError("the vault must hold a mapping of KEY: value", file=str(vault))
        return data

    def resolve(self, ref: str, where: str) -> str:
        """The value behind a `${VAR}`, `vault:KEY` or `secret:PATH` reference (an error
        names `where`)."""
        m = REF.match(ref)
        if m is None:
            raise ConfigError("not a credential reference", file=str(pool_path(self.name)),
                              key=where)
        if m.group(1):
            if m.group(1) not in os.environ:
                raise ConfigError(f"environment variable {m.group(1)} is not set",
                                  file=str(pool_path(self.name)), key=where)
            return os.environ[m.group(1)]
        if m.group(3):
            return read_secret(m.group(3), file=str(pool_path(self.name)), key=where)
        if m.group(2) not in self._vault:
            raise ConfigError(f"the vault has no key {m.group(2)!r}",
                              file=str(pool_path(self.name)), key=where)
        return str(self._vault[m.group(2)])

    def _account(self, machine: Machine, harness: bool) -> dict[str, str | int]:
        if machine.bmc is None:
            raise InputError(f"machine {machine.name} of pool {self.name} has no BMC")
        i = self.machines.index(machine)
        bmc = machine.bmc
        acc, where = ((bmc.harness, f"machines.{i}.bmc.harness") if harness and bmc.harness
                      else (bmc, f"machines.{i}.bmc"))
        creds: dict[str, str | int] = {
            "address": bmc.address, "port": bmc.port, "interface": bmc.interface,
            # (the task-facing slot is 2 unless said, where the harness restores it; a pool
            # without a harness account that does not say it: unknown, not checked by slot)
            "channel": bmc.channel,
            "user_id": acc.user_id or (2 if bmc.harness else None),
            "user": self.resolve(acc.user, f"{where}.user"),
            "password": self.resolve(acc.password, f"{where}.password")}
        if bmc.cipher_suite is not None:
            creds["cipher_suite"] = bmc.cipher_suite
        return creds

    def bmc_credentials(self, machine: Machine) -> dict[str, str | int]:
        """How the harness itself reaches a machine's BMC (resolved: address, port,
        interface, channel, user_id, user, password): its own account, or the task-facing
        one on a pool that declares none. Never given to a task."""
        return self._account(machine, harness=True)

    def task_credentials(self, machine: Machine) -> dict[str, str | int]:
        """The task-facing account of a machine's BMC (what a trial's primary is given)."""
        return self._account(machine, harness=False)

    def has_harness_account(self, machine: Machine) -> bool:
        return machine.bmc is not None and machine.bmc.harness is not None

    def secrets(self) -> list[str]:
        """Every resolvable credential of the pool, both accounts (for redaction)."""
        out = []
        for m in self.machines:
            if m.bmc is None:
                continue
            for get in (self.task_credentials, self.bmc_credentials):
                try:
                    creds = get(m)
                except (ConfigError, InputError):
                    continue
                out += [str(creds["user"]), str(creds["password"])]
        return list(dict.fromkeys(s for s in out if s))


def secrets_root() -> Path:
    return harness_home() / "secrets"


def read_secret(path: str, file: str = "", key: str = "") -> str:
    """The content of `$HARNESS_HOME/secrets/<path>` (its last newline removed). Refused
    unless it is a regular file no one but its owner may read or write."""
    full = secrets_root() / path
    try:
        st = full.lstat()
    except OSError:
        raise ConfigError(f"secret file {full} does not exist", file=file, key=key) from None
    if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077:
        raise ConfigError(f"secret file {full} must be a regular file of mode 0600 (it is "
                          f"{stat.filemode(st.st_mode)})", file=file, key=key)
    return full.read_text().rstrip("\n")


def write_secret(path: Path, data: bytes | str) -> None:
    """Write a file only its owner reads (0600 from its creation on; replaced atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    tmp.replace(path)


def load_pool(name: str) -> Pool:
    """The pool `name` from `$HARNESS_HOME/pools/<name>.yaml`; errors name file and key."""
    path = pool_path(name)
    if not NAME.match(name):
        raise InputError(f"pool name {name!r}: lowercase letters, digits and '-'", key="pool")
    if not path.is_file():
        known = sorted(p.stem for p in pools_dir().glob("*.yaml")) if pools_dir().is_dir() \
            else []
        raise InputError(f"no pool {name!r}: {path} does not exist (pools here: "
                         f"{', '.join(known) or 'none'}; `harness pool emulate {name}` makes "
                         "an emulated one)", key="pool")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", file=str(path)) from None
    if not isinstance(raw, dict):
        raise ConfigError("a pool file is a mapping (reset, machines, ...)", file=str(path))
    raw.setdefault("name", name)
    if raw["name"] != name:
        raise ConfigError(f"name {raw['name']!r} differs from the file's name {name!r}",
                          file=str(path), key="name")
    try:
        return Pool.model_validate(raw)
    except ValidationError as exc:
        key, msg = describe(exc, Pool)
        raise ConfigError(msg, file=str(path), key=key) from None


def pool_names() -> list[str]:
    return sorted(p.stem for p in pools_dir().glob("*.yaml")) if pools_dir().is_dir() else []
