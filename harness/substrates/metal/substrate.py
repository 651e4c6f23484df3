"""What bare-metal substrates share: machines reached over SSH with a key, root or a
sudoer (`ssh_login`), each node with a BMC the harness powers through; before a trial the
machines answer, are clean (nothing of an earlier trial, `reset.DIRTY`) and the primary gets
the task-facing BMC credentials (`common.BMC_CREDENTIALS`).

`baremetal` (leased pool machines) and `cloudlab` (an experiment's nodes) subclass it;
they say where machines come from, how their BMCs are checked and powered, and what gc
finds.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from harness.config import Settings, load_settings
from harness.errors import SubstrateError
from harness.substrates import ssh
from harness.substrates.base import ExecResult, Node, Substrate, TrialSpec
from harness.substrates.common import give_bmc_credentials
from harness.substrates.metal import reset


def machine_access(machine) -> dict[str, Any]:
    """How the harness logs in to a pool machine (kept in its nodes' `extra`)."""
    return {"ssh_key": str(machine.ssh.key_path), "ssh_user": machine.ssh.user,
            "ssh_port": machine.ssh.port}


def ssh_login(node: Node) -> dict[str, Any]:
    """The user and port of a node's SSH login (root on 22 unless its machine says)."""
    return {"user": node.extra.get("ssh_user", "root"), "port": node.extra.get("ssh_port", 22)}


class MachineSubstrate(Substrate):
    """Machines with BMCs, reached over SSH (a node's `extra`: `ssh_key`, `ssh_user`,
    `ssh_port`, `machine`, `pool`, `bmc`)."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"power", "own_kernel", "own_clock",
                                                        "root_ssh"})
    default_concurrency: ClassVar[int] = 1
    settings_model: ClassVar[type[BaseModel]]

    def __init__(self, name: str | None = None, settings: Settings | None = None, **kwargs):
        """`config`: config.yaml's `substrates.<name>`, read with the class's
        `settings_model`."""
        self.check_name(name)
        self.settings = settings or load_settings()
        self.config = self.settings.substrate(self.name, self.settings_model)

    def inventory(self, spec: TrialSpec, nodes: list[Node]) -> dict[str, Any]:
        def bmc(n: Node) -> str:
            c = n.extra.get("bmc")
            return "" if not c else c["address"] if int(c["port"]) == 623 else \
                f"{c['address']}:{c['port']}"

        hosts = {n.name: {"ansible_host": n.host, "ansible_user": ssh_login(n)["user"],
                          "ansible_port": ssh_login(n)["port"],
                          **({"ansible_become": True} if ssh_login(n)["user"] != "root" else {}),
                          "ansible_ssh_private_key_file": n.extra["ssh_key"],
                          "ansible_ssh_common_args": ssh.ANSIBLE_SSH_ARGS,
                          "ansible_python_interpreter": "/usr/bin/python3",
                          "harness_cluster_ip": n.cluster_ip, "harness_primary": n.primary,
                          "harness_machine": n.extra["machine"],
                          "harness_pool": n.extra["pool"],
                          **({"harness_bmc": bmc(n)} if bmc(n) else {})} for n in nodes}
        return {"all": {
            "hosts": hosts,
            "vars": {"harness_trial": spec.trial_id, "harness_trial_id": spec.trial_id,
                     "harness_campaign": spec.campaign, "harness_substrate": self.name,
                     "harness_control_path": "network"},
            "children": {"primary": {"hosts": {n.name: {} for n in nodes if n.primary}}},
        }}

    def login_hint(self, node: Node) -> str:
        port = ssh_login(node)["port"]
        return f"ssh -i {node.extra['ssh_key']}{f' -p {port}' if port != 22 else ''} " \
               f"{ssh_login(node)['user']}@{node.host}  (machine " \
               f"{node.extra['machine']})"

    # -- runtime ----------------------------------------------------------------------

    async def exec(self, node: Node, cmd: str, timeout: float,
                   env: dict[str, str] | None = None, stdin: bytes | None = None,
                   toolbox: str | None = None) -> ExecResult:
        return await ssh.exec_on(node.host, Path(node.extra["ssh_key"]), cmd, timeout, env,
                                 stdin, toolbox, **ssh_login(node))

    async def put(self, node: Node, src: Path, dest: str) -> None:
        await ssh.put(node.host, Path(node.extra["ssh_key"]), src, dest, **ssh_login(node))

    async def wait_ready(self, nodes: list[Node], timeout: float | None = None) -> None:
        """Every machine answers SSH and is clean (nothing of an earlier trial on it), and
        its BMC accepts the harness account (a machine whose BMC refuses it is quarantined
        and the trial stops before its window); then the primary gets the task-facing BMC
        credentials (/etc/harness/bmc-credentials, 0600)."""
        await self.check_bmcs(nodes)
        await asyncio.gather(*(ssh.wait_ready(n.host, Path(n.extra["ssh_key"]), timeout or 300,
                                              **ssh_login(n)) for n in nodes))
        for n in nodes:
            res = await self.exec(n, reset.DIRTY, 60)
            if not res.ok or res.stdout.split():
                raise SubstrateError(self.name, f"machine {n.extra['machine']} is not clean "
                                     f"(left by an earlier trial: {res.stdout.split()}); "
                                     "`harness gc` resets it", res.stderr)
        await give_bmc_credentials(self, nodes)

    @abstractmethod
    async def check_bmcs(self, nodes: list[Node]) -> None:
        """Each node's BMC accepts the harness account; SubstrateError naming the machine
        (and how it comes back) when one refuses it."""

    async def reboot(self, node: Node) -> None:
        """`systemctl reboot` on the machine; back when it answers with a new boot id."""
        key = Path(node.extra["ssh_key"])
        boot_id = "cat /proc/sys/kernel/random/boot_id"
        before = (await ssh.probe(node.host, key, boot_id, **ssh_login(node))).stdout
        await self.exec(node, "systemctl reboot", 30)
        ssh.close_master(node.host, key)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 300
        while loop.time() < deadline:
            now = await ssh.probe(node.host, key, boot_id, **ssh_login(node))
            if now.ok and now.stdout.strip() and now.stdout != before:
                await self.wait_booted(node)
                return
            await asyncio.sleep(1)
        raise SubstrateError(self.name, f"{node.name} did not come back from a reboot in 300s")
