"""The local CloudLab portal's behaviour: profiles, experiments and node operations over
real machines (`machines.PoolMachines`), asynchronous the way the portal is.

An experiment is `created` when POSTed, `provisioning` while its machines are leased,
powered on and prepared, then `ready` (or `failed`: too few machines, a machine that does
not boot). DELETE answers 204 at once; the experiment shows `terminating` while its
machines are reset and released, then GET answers 404. A node operation answers with the
node at once (`status: changing`) and acts in the background. Experiments past
`expires_at` are terminated like the portal does. POST /experiments answers 429 (with
Retry-After) while `max_pending` experiments are still being set up.

The HTTP side is `portal_http`; every method here raises ApiError(status, message) for an
error response.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

from harness.errors import HarnessError
from harness.substrates.cloudlab import profile as profiles
from harness.substrates.cloudlab.portal_model import Experiment, PortalNode, Profile, iso

ID_RE = re.compile(r"^[-\w]+,[-\w]+$")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
NAME_RE = re.compile(r"^[-\w]{1,32}$")
NODE_ACTIONS = ("reboot", "powercycle", "reload", "start", "stop")
PENDING = ("created", "provisioning")


class ApiError(Exception):
    def __init__(self, status: int, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


class Portal:
    """Profiles and experiments of one local portal (in memory)."""

    def __init__(self, machines, user: str = "harness", base_url: str = "",
                 settle_sec: float = 1.0, max_pending: int = 4,
                 log: Callable[[str], None] = print):
        self.machines, self.user, self.base_url = machines, user, base_url
        self.settle_sec, self.max_pending, self.log = settle_sec, max_pending, log
        self.profiles: dict[str, Profile] = {}
        self.experiments: dict[str, Experiment] = {}
        self.lock = threading.RLock()
        self.started = time.time()
        self.threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._spawn(self._reaper)

    def _spawn(self, fn, *args) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True)
        self.threads.append(t)
        t.start()

    def close(self) -> None:
        self._stop.set()

    # ---- profiles -------------------------------------------------------------------
    def find_profile(self, ref: str) -> Profile:
        with self.lock:
            for p in self.profiles.values():
                if ref == p.id or ref == f"{p.project},{p.name}":
                    return p
        _check_ref(ref, "profile")
        raise ApiError(404, f"no such profile {ref}")

    def create_profile(self, body: dict) -> Profile:
        name, project = _required(body, "name", "project")
        script = body.get("script")
        if body.get("repository_url"):
            raise ApiError(400, "repository-backed profiles are not supported by this "
                                "portal; send `script`")
        if not isinstance(script, str) or not script.strip():
            raise ApiError(400, "script (geni-lib Python) is required")
        _name(name)
        with self.lock:
            if any(p.name == name and p.project == project for p in self.profiles.values()):
                raise ApiError(400, f"profile {project},{name} already exists")
        built = _run_script(script, {})
        prof = Profile(name=name, project=project, script=script, creator=self.user,
                       public=bool(body.get("public")),
                       project_writable=bool(body.get("project_writable")))
        prof.add_version(script, built["rspec"], built["parameters"])
        with self.lock:
            self.profiles[prof.id] = prof
        return prof

    def update_profile(self, ref: str, body: dict) -> Profile:
        prof = self.find_profile(ref)
        with self.lock:
            if "script" in body:
                built = _run_script(body["script"], {})
                prof.add_version(body["script"], built["rspec"], built["parameters"])
            for key in ("public", "project_writable"):
                if key in body:
                    setattr(prof, key, bool(body[key]))
        return prof

    def delete_profile(self, ref: str) -> None:
        prof = self.find_profile(ref)
        with self.lock:
            if any(e.profile_id == prof.id for e in self.experiments.values()):
                raise ApiError(400, f"profile {prof.project},{prof.name} is in use")
            self.profiles.pop(prof.id, None)

    # ---- experiments ----------------------------------------------------------------
    def find(self, ref: str) -> Experiment:
        with self.lock:
            for e in self.experiments.values():
                if ref == e.id or ref == f"{e.project},{e.name}":
                    return e
        _check_ref(ref, "experiment")
        raise ApiError(404, f"no such experiment {ref}")

    def create(self, body: dict) -> Experiment:
        name, project, pname, pproject = _required(
            body, "name", "project", "profile_name", "profile_project")
        _name(name)
        prof = self.find_profile(f"{pproject},{pname}")
        bindings = body.get("bindings") or {}
        if not isinstance(bindings, dict):
            raise ApiError(400, "bindings must be an object of parameter name to value")
        duration = body.get("duration", 16)
        if not isinstance(duration, int) or duration < 1:
            raise ApiError(400, "duration must be a positive integer (hours)")
        request = _run_script(prof.script, bindings)["nodes"]
        with self.lock:
            if any(e.name == name and e.project == project for e in self.experiments.values()):
                raise ApiError(400, f"experiment {project},{name} already exists")
            pending = sum(e.status in PENDING for e in self.experiments.values())
            if pending >= self.max_pending:
                raise ApiError(429, f"too many experiments being set up ({pending}); try "
                                    "again later", retry_after=max(1, int(self.settle_sec)))
            exp = Experiment(name=name, project=project, profile_id=prof.id,
                             profile_name=prof.name, profile_project=prof.project,
                             creator=self.user, base_url=self.base_url,
                             group=body.get("group") or "", bindings=bindings,
                             sshpubkey=body.get("sshpubkey"), duration_h=duration,
                             request=request)
            self.experiments[exp.id] = exp
        self._spawn(self._provision, exp)
        return exp

    def _provision(self, exp: Experiment) -> None:
        time.sleep(self.settle_sec)
        exp.status = "provisioning"
        try:
            machines = self.machines.acquire(exp.id, len(exp.request))
            exp.nodes = [PortalNode(client_id=r["client_id"], machine=m.name, ipv4=m.ssh.host,
                                    ssh_port=m.ssh.port, hardware_type=r["hardware_type"],
                                    disk_image=r["disk_image"])
                         for r, m in zip(exp.request, machines, strict=True)]
            for node in exp.nodes:
                self.machines.power(node.machine, "on")
            for node in exp.nodes:
                self.machines.wait_up(node.machine)
                self.machines.prepare(node.machine, node.hostname(exp), exp.sshpubkey)
                node.status, node.state = "ready", "ISUP"
        except Exception as exc:  # noqa: BLE001 - any failure fails it; the log says why
            self.log(f"portal: experiment {exp.project},{exp.name} failed: {exc}")
            exp.status = "failed"
            return
        exp.started = time.time()
        exp.status = "ready"
        self.log(f"portal: experiment {exp.project},{exp.name} ready on "
                 f"{', '.join(n.machine for n in exp.nodes)}")

    def extend(self, ref: str, body: dict) -> Experiment:
        exp = self.find(ref)
        if "extend_by" in body:
            hours = body["extend_by"]
            if not isinstance(hours, int) or hours < 1:
                raise ApiError(400, "extend_by must be a positive integer (hours)")
            exp.expires += 3600 * hours
        elif "expires_at" in body:
            raise ApiError(400, "this portal takes extend_by (hours), not expires_at")
        else:
            raise ApiError(400, "send extend_by (hours) or expires_at")
        return exp

    def rebind(self, ref: str, body: dict) -> Experiment:
        exp = self.find(ref)
        if not isinstance(body.get("bindings"), dict):
            raise ApiError(400, "bindings (object) is required")
        exp.bindings = body["bindings"]
        return exp

    def terminate(self, ref: str) -> None:
        exp = self.find(ref)
        with self.lock:
            if exp.status == "terminating":
                return
            exp.status = "terminating"
        self._spawn(self._terminate, exp)

    def _terminate(self, exp: Experiment) -> None:
        for node in exp.nodes:
            try:
                self.machines.forget_keys(node.machine)
            except HarnessError:
                pass  # the reset below makes the machine clean anyway
        try:
            self.machines.release(exp.id, log=self.log)
        except (HarnessError, OSError) as exc:  # its leases stay: `harness gc` reclaims them
            self.log(f"portal: releasing the machines of {exp.name} failed: {exc}")
        with self.lock:
            self.experiments.pop(exp.id, None)
        self.log(f"portal: experiment {exp.project},{exp.name} terminated")

    def _reaper(self) -> None:
        while not self._stop.wait(2.0):
            now = time.time()
            with self.lock:
                due = [e for e in self.experiments.values()
                       if e.expires <= now and e.status != "terminating"]
            for e in due:
                self.log(f"portal: experiment {e.project},{e.name} expired at {iso(e.expires)}")
                self.terminate(e.id)

    # ---- nodes ----------------------------------------------------------------------
    def node(self, ref: str, client_id: str) -> tuple[Experiment, PortalNode]:
        exp = self.find(ref)
        for n in exp.nodes:
            if n.client_id == client_id:
                return exp, n
        raise ApiError(404, f"experiment {exp.project},{exp.name} has no node {client_id}")

    def observed(self, ref: str, client_id: str) -> tuple[Experiment, PortalNode]:
        """The node with its power state as its BMC reports it now (a node powered off
        from inside the experiment, e.g. over IPMI, shows POWEROFF as on the portal)."""
        exp, node = self.node(ref, client_id)
        if node.status == "ready":
            try:
                power = self.machines.power(node.machine, "status")
            except Exception as exc:  # noqa: BLE001 - keep the last known state; log why
                self.log(f"portal: power status of {node.machine} failed: {exc}")
            else:
                node.state = "POWEROFF" if power == "off" else "ISUP"
        return exp, node

    def node_action(self, ref: str, client_id: str, action: str) -> tuple[Experiment, PortalNode]:
        if action not in NODE_ACTIONS:
            raise ApiError(404, f"no node operation {action}; valid: {', '.join(NODE_ACTIONS)}")
        exp, node = self.node(ref, client_id)
        if exp.status != "ready":
            raise ApiError(400, f"experiment is {exp.status}, not ready")
        if node.status == "changing":
            raise ApiError(400, f"node {client_id} is busy")
        node.status = "changing"
        node.state = {"stop": "SHUTDOWN", "reload": "RELOADING"}.get(action, "BOOTING")
        self._spawn(self._act, exp, node, action)
        return exp, node

    def _act(self, exp: Experiment, node: PortalNode, action: str) -> None:
        try:
            if action == "stop":
                self.machines.power(node.machine, "off")
                node.status, node.state = "ready", "POWEROFF"
                return
            if action == "reload":
                self.machines.reload(node.machine, log=self.log)
            elif action == "reboot":
                self.machines.power(node.machine, "on")
                self.machines.exec(node.machine, "systemctl reboot", 30)
                time.sleep(3)
            else:
                self.machines.power(node.machine,
                                    "cycle" if action == "powercycle" else "on")
            self.machines.wait_up(node.machine)
            self.machines.prepare(node.machine, node.hostname(exp), exp.sshpubkey)
            node.status, node.state = "ready", "ISUP"
        except Exception as exc:  # noqa: BLE001 - any failure fails the node; logged
            self.log(f"portal: {action} of {exp.name}/{node.client_id} failed: {exc}")
            node.status, node.state = "failed", "TBFAILED"


def _required(body: dict, *keys: str) -> list[str]:
    missing = [k for k in keys if not isinstance(body.get(k), str) or not body[k]]
    if missing:
        raise ApiError(400, f"missing required field(s): {', '.join(missing)}")
    return [body[k] for k in keys]


def _name(name: str) -> None:
    if not NAME_RE.match(name):
        raise ApiError(400, f"name {name!r}: letters, digits, '-' and '_', 1-32 characters")


def _check_ref(ref: str, kind: str) -> None:
    if not (ID_RE.match(ref) or UUID_RE.match(ref)):
        raise ApiError(400, f"{kind} id {ref!r}: a UUID or project,name")


def _run_script(script: str, bindings: dict) -> dict:
    try:
        return profiles.run(script, bindings)
    except HarnessError as exc:
        raise ApiError(400, str(exc)) from None
