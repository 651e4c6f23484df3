"""The Substrate interface: where a trial's nodes live and how the harness reaches them.

Terraform owns create/destroy (one root module per trial, rendered from
`terraform_module()` + `terraform_vars()`); the Python side owns runtime operations:
exec for agents, verifiers and probes, file upload, power, reboot, and sweeping leftovers.
"""

from __future__ import annotations

import io
import shlex
import tarfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from harness.errors import SubstrateError

if TYPE_CHECKING:
    from harness.task import Task


# Until systemd (when it is PID 1) has finished booting, at most LIMIT seconds; prints its
# state. Right after a (re)start `systemctl` cannot reach systemd yet ("Failed to connect
# to bus") and returns at once: ask again (as roles/harness_node_ready does).
BOOT_WAIT_SH = """[ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] || exit 0
end=$((SECONDS + LIMIT)); state=""
while [ $((end - SECONDS)) -gt 0 ]; do
  state=$(timeout $((end - SECONDS)) systemctl is-system-running --wait 2>/dev/null) || true
  case "$state" in running|degraded|maintenance|stopping) break ;; esac
  sleep 0.1
done
echo "$state"
"""


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
class TrialSpec:
    """What a substrate needs to know to render and operate one trial."""

    trial_id: str
    campaign: str
    task: Task
    root: Path
    image: str = ""


class Substrate(ABC):
    """One place trials can run. Subclasses live in a folder under harness/substrates/."""

    name: ClassVar[str]

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
        made by `harness.integrity`), `cmd` runs under that toolbox's `sh`, with its `bin`
        first on PATH, not through the node's own shell or `timeout` (the harness bounds it
        from outside)."""

    @abstractmethod
    async def put(self, node: Node, src: Path, dest: str) -> None:
        """Copy a local file or directory to `dest` (a directory path) on the node."""

    @abstractmethod
    def sweep(self, campaign: str | None = None, trial: str | None = None,
              force: bool = False) -> list[str]:
        """Find and remove leftovers owned by the harness; return what was removed. What
        another live harness process owns (`harness.owner`) is spared unless `force`."""

    async def put_archive(self, node: Node, data: bytes, dest: str) -> None:
        """Unpack the tar `data` into the existing directory `dest` on the node."""
        res = await self.exec(node, f"tar -x -C {shlex.quote(dest)}", 300, stdin=data)
        if not res.ok:
            raise SubstrateError(self.name, f"unpacking into {node.name}:{dest} failed",
                                 res.stderr)

    def secrets(self, spec: TrialSpec) -> list[str]:
        """Credentials this substrate made or holds for the trial (BMC passwords...): the
        trial redacts them from everything it writes."""
        return []

    def provider_config(self) -> dict[str, dict]:
        """Provider blocks of the trial's root module (connection settings), by provider."""
        return {}

    def prepare(self, spec: TrialSpec, log=print) -> str:
        """Build or find the (cached) image the trial's nodes boot from; return its ref."""
        return ""

    def preflight(self) -> None:
        """Raise PreflightError with the fix when the host cannot run this substrate."""

    async def power(self, node: Node, action: str) -> str:
        """on / off / cycle / reset / status."""
        raise NotImplementedError(f"{self.name} does not support power {action}")

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

    def live_nodes(self, campaign: str | None = None, trial: str | None = None
                   ) -> dict[str, list[Node]]:
        """Running nodes of matching trials by trial id, reachable through `exec` (gc uses
        them to heal faults from the node-side ledgers before removing the trials)."""
        return {}


def toolbox_argv(toolbox: str, cmd: str) -> list[str]:
    """`cmd` under the toolbox's sh, its bin first on PATH (the caller bounds the time)."""
    bin_dir = f"{toolbox}/bin"
    return [f"{bin_dir}/sh", "-c", f"export PATH={bin_dir}:/usr/local/sbin:/usr/local/bin:"
                                   f"/usr/sbin:/usr/bin:/sbin:/bin\n{cmd}"]


def tar_bytes(src: Path, top: str = "") -> bytes:
    """`src` (a directory's contents, or the file) as a tar owned by root (as the node should
    see it, whoever runs the harness); under a new directory `top` (mode 0755) when given."""

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if top:
            info = tarfile.TarInfo(top)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
            tar.addfile(as_root(info))
        prefix = f"{top}/" if top else ""
        if src.is_dir():
            for p in sorted(src.rglob("*")):
                tar.add(p, arcname=prefix + p.relative_to(src).as_posix(), recursive=False,
                        filter=as_root)
        else:
            tar.add(src, arcname=prefix + src.name, filter=as_root)
    return buf.getvalue()
