"""The `cloudlab` substrate: one CloudLab experiment per trial, through the Terraform
provider of this folder (`provider/`, harness/cloudlab), its nodes then used as bare metal.

The trial's Terraform root renders the provider (portal URL, project; the token from
`CLOUDLAB_TOKEN` in the environment only), a profile (the geni-lib script `profile.py`
renders from the task's nodes, or a configured `project,name`) and the experiment (named
from the trial id, `experiments.experiment_name`; `sshpubkey` the harness's CloudLab key;
`duration` covering build, agent and verifier timeouts, extended while the trial runs).
Before apply, the experiment is recorded (`experiments.reserve`: the quota ledger, waiting
while other live trials hold the quota); after destroy the record goes. At the nodes'
first answer, a per-trial BMC account is made in-band (`inband.py`) so tasks get BMC
credentials as on a pool. Power goes through the portal's node operations (`api.py`).
`harness gc` terminates experiments whose trial is gone (the records, also after kill -9).

Task types run here when a campaign maps them (`substrate: {cloudlab: cloudlab}`) or with
`harness run --substrate cloudlab`; by default `type = "cloudlab"` tasks run on a bare-metal
pool. `harness cloudlab serve` is a local portal over an emulated pool (README).
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from harness.config import Settings
from harness.errors import PreflightError, SubstrateError
from harness.substrates import ssh
from harness.substrates.base import Check, Node, TrialSpec
from harness.substrates.cloudlab import api, experiments, inband, profile
from harness.substrates.metal.substrate import MachineSubstrate

HERE = Path(__file__).resolve().parent


class CloudlabSettings(BaseModel):
    """config.yaml `substrates.cloudlab`: the portal, the project, the profile (empty:
    one rendered per trial from the task's nodes, of `hardware_type` and `image`), the
    quota (`max_experiments` live at once, `max_nodes` in all, 0 = no limit) and how long
    a trial waits for it; `token_file` (else $CLOUDLAB_TOKEN, else a local portal's own
    token file)."""

    model_config = ConfigDict(extra="forbid")
    portal_url: str = "https://boss.emulab.net:43794"
    project: str = "harness"
    token_file: str = ""
    profile: str = Field(default="", pattern=r"^([-\w]+,[-\w]+)?$")
    hardware_type: str = ""
    image: str = ""
    max_experiments: int = Field(default=1, ge=1)
    max_nodes: int = Field(default=0, ge=0)
    quota_wait_sec: int = Field(default=3600, ge=0)
    poll_interval: str = "15s"
    insecure: bool = False


class CloudlabSubstrate(MachineSubstrate):
    """A CloudLab experiment per trial (the real portal, or `harness cloudlab serve`)."""

    name: ClassVar[str] = "cloudlab"
    settings_model: ClassVar[type[BaseModel]] = CloudlabSettings

    def __init__(self, name: str | None = None, settings: Settings | None = None, **kwargs):
        super().__init__(name, settings)
        self.portal_url = self.config.portal_url.rstrip("/")

    # -- the portal -------------------------------------------------------------------

    def token(self) -> str:
        """The API token (`api.resolve_token`: token_file, $CLOUDLAB_TOKEN, a local
        portal's token file), also exported as CLOUDLAB_TOKEN for the provider."""
        return api.resolve_token(self.portal_url, self.config.token_file)

    def client(self) -> api.Portal:
        return api.Portal(self.portal_url, self.token())

    def provider_config(self) -> dict[str, dict]:
        return {"cloudlab": {"portal_url": self.portal_url, "project": self.config.project,
                             "poll_interval": self.config.poll_interval,
                             "insecure": self.config.insecure}}

    def terraform_module(self) -> Path:
        return HERE / "terraform"

    def prepare(self, spec: TrialSpec, log=print) -> str:
        self.token()
        return f"cloudlab:{self.portal_url}/{self.config.project}"

    # -- render -----------------------------------------------------------------------

    def _vars(self, spec: TrialSpec) -> dict[str, Any]:
        name = experiments.experiment_name(spec.trial_id)
        names = [n.name for n in spec.task.nodes]
        cfg = spec.task.config
        hours = math.ceil((cfg.environment.build_timeout_sec + spec.window_sec
                           + cfg.verifier.timeout_sec + 1800) / 3600)
        if self.config.profile:  # the user's own: its parameters are not ours to guess
            pproject, pname = self.config.profile.split(",")
            script, bindings = "", {}
        else:
            pproject, pname = self.config.project, name
            script = profile.render(
                names, self.config.hardware_type, self.config.image,
                f"harness trial {spec.trial_id}",
                {n.name: (getattr(n, "hardware_type", None) or "", getattr(n, "image", None)
                          or "") for n in spec.task.nodes})
            bindings = {"n": str(len(names))}
        return {"trial_id": spec.trial_id, "experiment": name, "project": self.config.project,
                "profile_script": script, "profile_name": pname, "profile_project": pproject,
                "bindings": bindings, "duration": max(1, hours), "python": sys.executable,
                "sshpubkey": Path(f"{inband.key_path()}.pub").read_text().strip()}

    def terraform_vars(self, spec: TrialSpec) -> dict[str, Any]:
        """Records the experiment against the quota (waiting while live trials hold it),
        then the module's variables; the extension thread runs while the record does."""
        tf_vars = self._vars(spec)
        name = tf_vars["experiment"]
        experiments.reserve(name, spec.trial_id, spec.campaign, self.portal_url,
                            self.config.project, len(spec.task.nodes), self.config.max_experiments,
                            self.config.max_nodes, self.config.quota_wait_sec, str(spec.root),
                            tf_vars["duration"])
        path = spec.root / "cloudlab" / "experiment.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"experiment": name, "project": self.config.project,
                                    "portal": self.portal_url}, indent=2) + "\n")
        experiments.keep_alive(name, self.client())
        return tf_vars

    def plan_vars(self, spec: TrialSpec) -> dict[str, Any]:
        return self._vars(spec)

    def nodes(self, spec: TrialSpec, tf_outputs: dict[str, Any]) -> list[Node]:
        got = {n["client_id"]: n for n in tf_outputs.get("nodes") or []}
        exp = tf_outputs.get("network") or {}
        missing = [n.name for n in spec.task.nodes if n.name not in got]
        if missing:
            raise SubstrateError(self.name, f"experiment {exp.get('name')} has no node(s) "
                                 f"{missing} (it has {sorted(got)})")
        primary = spec.task.primary.name
        return [Node(name=n.name, host=got[n.name]["ssh_host"],
                     cluster_ip=got[n.name]["ipv4"] or got[n.name]["ssh_host"],
                     primary=n.name == primary,
                     extra={"ssh_key": str(inband.key_path()),
                            "ssh_user": got[n.name]["ssh_user"] or "root",
                            "ssh_port": int(got[n.name]["ssh_port"] or 22),
                            "machine": n.name, "pool": f"{self.config.project},{exp.get('name')}",
                            "bmc": None}) for n in spec.task.nodes]

    def secrets(self, spec: TrialSpec) -> list[str]:
        return [self.token(), *(inband.password(spec.trial_id, n.name)
                                for n in spec.task.nodes)]

    def login_hint(self, node: Node) -> str:
        port = node.extra.get("ssh_port", 22)
        return (f"ssh -i {node.extra['ssh_key']}{f' -p {port}' if port != 22 else ''} "
                f"{node.extra.get('ssh_user', 'root')}@{node.host}  (experiment "
                f"{node.extra['pool']}, node {node.extra['machine']})")

    def image_warnings(self, task) -> list[str]:
        return []

    # -- runtime ----------------------------------------------------------------------

    async def wait_ready(self, nodes: list[Node], timeout: float | None = None) -> None:
        """Every node answers SSH; each gets the trial's in-band BMC account (its
        credentials then go to the primary as on a pool)."""
        await asyncio.gather(*(ssh.wait_ready(n.host, Path(n.extra["ssh_key"]), timeout or 600,
                                              user=n.extra["ssh_user"],
                                              port=n.extra["ssh_port"]) for n in nodes))
        trial = self._trial_of(nodes)

        async def account(n: Node) -> None:
            n.extra["bmc"] = await inband.make_account(
                lambda cmd, t, stdin, n=n: self.exec(n, cmd, t, stdin=stdin), trial, n.name)

        await asyncio.gather(*(account(n) for n in nodes))
        await super().wait_ready(nodes, timeout)

    async def check_bmcs(self, nodes: list[Node]) -> None:
        """(An experiment's nodes are no pool's: their BMCs are the portal's business and
        the trial's in-band accounts.)"""

    def _trial_of(self, nodes: list[Node]) -> str:
        name = nodes[0].extra["pool"].split(",", 1)[1]
        record = experiments.read().get(name)
        if record is None:
            raise SubstrateError(self.name, f"experiment {name} has no record in "
                                 f"{experiments.records_dir()}")
        return record["trial"]

    async def power(self, node: Node, action: str) -> str:
        """Through the portal's node operations (start, stop, powercycle, reboot)."""
        if action != "status":  # (a status asks nothing of the node's connection)
            ssh.close_master(node.host, Path(node.extra["ssh_key"]))
        return await asyncio.to_thread(self.client().power, node.extra["pool"],
                                       node.extra["machine"], action)

    # -- gc ---------------------------------------------------------------------------

    def _orphans(self, force: bool) -> dict[str, dict]:
        """With `force`: experiments of the configured project named like the harness's
        (`hx-`) that no record here knows (another controller's, or records lost)."""
        if not force:
            return {}
        try:
            known = experiments.read()
            return {e["name"]: {"project": e["project"], "portal": self.portal_url,
                                "trial": "?"}
                    for e in self.client().experiments(self.config.project)
                    if e.get("name", "").startswith(experiments.PREFIX)
                    and e["name"] not in known}
        except (SubstrateError, PreflightError):
            return {}

    def _gone(self, campaign, trial, force) -> dict[str, dict]:
        found = experiments.stale(trial, campaign, force)
        return {**found, **(self._orphans(force) if trial is None and campaign is None
                            else {})}

    def leftovers(self, campaign: str | None = None, trial: str | None = None,
                  force: bool = False) -> list[str]:
        return [f"experiment {r['project']},{n} at {r['portal']} (trial {r.get('trial')})"
                for n, r in self._gone(campaign, trial, force).items()]

    def live_nodes(self, campaign: str | None = None, trial: str | None = None,
                   force: bool = False) -> dict[str, list[Node]]:
        return {}

    def sweep(self, campaign: str | None = None, trial: str | None = None,
              force: bool = False) -> list[str]:
        """Experiments whose trial is gone: their BMC accounts removed where the nodes
        still answer, then terminated (waiting until the portal says they are gone)."""
        done = []
        for name, r in self._gone(campaign, trial, force).items():
            ref = f"{r['project']},{name}"
            try:
                client = api.Portal(r["portal"], self.token())
                try:
                    exp = client.experiment(ref)
                    inband.forget([{"host": n["ipv4"]} for agg in exp.get("aggregates", {})
                                   .values() for n in agg.get("nodes", []) if n.get("ipv4")])
                except api.NotFound:
                    pass
                client.terminate(ref)
            except (SubstrateError, PreflightError) as exc:
                if experiments.expired(r):  # the portal ended it itself; it may be gone too
                    experiments.forget(name)
                    done.append(f"experiment {ref} (trial {r.get('trial')}; record dropped: "
                                f"expired and its portal does not answer: {exc})")
                    continue
                done.append(f"experiment {ref} (trial {r.get('trial')}; terminate failed: "
                            f"{exc})")
                continue
            experiments.forget(name)
            done.append(f"experiment {ref} (trial {r.get('trial')}; terminated)")
        return done

    # -- host -------------------------------------------------------------------------

    def preflight(self) -> None:
        try:
            api.Portal(self.portal_url, self.token(), timeout=10).call("GET", "/version")
        except SubstrateError as exc:
            raise PreflightError(f"CloudLab portal {self.portal_url}: {exc} (a local one: "
                                 "`harness cloudlab serve --pool NAME`)") from None

    @classmethod
    def doctor(cls) -> list[Check]:
        sub = cls()
        try:
            sub.preflight()
        except PreflightError as exc:
            return [Check("cloudlab portal", "WARN", str(exc),
                          "set substrates.cloudlab.portal_url and CLOUDLAB_TOKEN")]
        return [Check("cloudlab portal", "PASS", f"{sub.portal_url} answers")]


__all__ = ["CloudlabSettings", "CloudlabSubstrate"]
