"""Role faults: the scripts of `roles/fi_<layer>_<fault>/` run through the generic play of
`playbooks/faults.yml` (roles/fi_common, `tasks_from: fault`).

One ansible-runner run per step, and each step proves itself: inject runs the actions
`[inject, verify]` with `fi_expect=injected`, heal runs `[heal, verify]` with
`fi_expect=healed`. The scripts report back on lines `HX {json}` that are read from the
run's job events (`ansible/fault-<id>-<step>-<n>/artifacts/*/job_events/`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from harness.errors import AnsibleError
from harness.faults.base import STATES, Fault, FaultError, FaultRecord
from harness.faults.power import wait_up
from harness.paths import PLAYBOOKS, TrialPaths
from harness.tools.ansible import run_playbook

FAULTS_PLAYBOOK = PLAYBOOKS / "faults.yml"
REACH_SEC = 20.0


class RoleFault(Fault):
    """A fault implemented by an Ansible role with inject/heal/verify task files."""

    timeout = 300

    async def inject(self, env, rec: FaultRecord) -> dict[str, Any]:
        out = await self.run(env, rec, ["inject", "verify"], expect="injected")
        rec.states = await self._states(env, rec, out)
        return {h: r.get("detail", {}) for h, r in out.items()}

    async def heal(self, env, rec: FaultRecord) -> dict[str, bool]:
        revived = await self.revive(env, rec) if self.spec.heal_unreachable else set()
        out = await self.run(env, rec, ["heal", "verify"], expect="healed")
        rec.states = await self._states(env, rec, out)
        return {h: bool(r.get("changed")) or h in revived for h, r in out.items()}

    async def _states(self, env, rec: FaultRecord, out: dict[str, dict[str, Any]]
                      ) -> dict[str, str]:
        """Each host's state from its verify report. A host whose step succeeded but whose
        report did not reach the harness (its command's output lost on the way, as a
        loaded engine can lose it) is verified once more, alone: verify only reads."""
        missing = [h for h in rec.hosts if "state" not in out.get(h, {})]
        if missing:
            again = await self.run(env, rec, ["verify"], hosts=missing)
            for h in missing:
                if "state" in again.get(h, {}):
                    out.setdefault(h, {})["state"] = again[h]["state"]
        return {h: r.get("state", "partial") for h, r in out.items()}

    async def revive(self, env, rec: FaultRecord) -> set[str]:
        """`heal_unreachable: power_cycle`: power-cycle the hosts that do not answer a
        command within REACH_SEC, through the substrate (the BMC on bare metal), and wait
        for their boot; the hosts cycled."""
        if "power" not in env.substrate.capabilities:
            return set()

        async def one(host: str) -> str | None:
            node = env.node(host)
            try:
                if (await env.exec("true", timeout=REACH_SEC, node=node, record=False)).ok:
                    return None
            except Exception:  # noqa: BLE001 - unreachable is what we test for
                pass
            await env.substrate.power(node, "cycle")
            await wait_up(env, node)
            return host

        return {h for h in await asyncio.gather(*(one(h) for h in rec.hosts)) if h}

    async def verify(self, env, rec: FaultRecord) -> dict[str, tuple[str, str]]:
        out = await self.run(env, rec, ["verify"])
        return {h: (r.get("state", "partial"), r.get("why", "")) for h, r in out.items()}

    def extravars(self, rec: FaultRecord, actions: list[str], expect: str,
                  hosts: list[str] | None = None) -> dict[str, Any]:
        role = self.spec.role
        ledger = {k: v for k, v in rec.to_dict().items() if k not in ("detail", "states",
                                                                        "status", "error")}
        return {"fi_hosts": ",".join(hosts or rec.hosts), "fi_actions": actions,
                "fi_id": rec.id,
                "fi_role_dir": str(self.spec.folder),
                "fi_fault": rec.fault, "fi_record": ledger, "fi_detail": rec.detail,
                "fi_expect": expect, "fi_deadman_sec": int(rec.deadman_sec or 0),
                **{f"{role}_{k}": v for k, v in rec.params.items()}}

    async def run(self, env, rec: FaultRecord, actions: list[str], expect: str = "",
                  hosts: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Run the fault's play on its hosts (or `hosts` of them); per host, the merged
        `HX` reports."""
        paths: TrialPaths = env.paths
        stage = _stage(paths, f"fault-{rec.id}-{actions[0]}")
        extra = self.extravars(rec, actions, expect, hosts)
        try:
            await asyncio.to_thread(run_playbook, paths, stage, ["fault"], extra,
                                    None, FAULTS_PLAYBOOK, self.timeout)
        except AnsibleError as exc:
            raise FaultError(f"{rec.fault} {'+'.join(actions)} ({rec.id}) failed: "
                             f"{_node_error(paths, stage) or exc.message}") from exc
        return reports(paths, stage)


def _stage(paths: TrialPaths, prefix: str) -> str:
    n = 1
    while paths.ansible(f"{prefix}-{n}").exists():
        n += 1
    return f"{prefix}-{n}"


EVENT_MAX_BYTES = 16 * 1024 * 1024  # a job event larger than this is not read
REPORT_MAX_BYTES = 16 * 1024  # one `HX` line; and a host's `detail` as JSON
WHY_MAX_CHARS = 500


def _events(paths: TrialPaths, stage: str) -> list[dict]:
    """The run's job events in order; one larger than EVENT_MAX_BYTES (a node that flooded
    its output) is replaced by a stub that says so."""
    out = []
    for f in sorted(paths.ansible(stage).glob("artifacts/*/job_events/*.json"),
                    key=lambda p: int(p.name.split("-", 1)[0])):
        try:
            if f.stat().st_size > EVENT_MAX_BYTES:
                out.append({"event": "oversized", "file": f.name})
                continue
            out.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue
    return out


def report_fields(doc: Any) -> dict[str, Any]:
    """The fields of one `HX` report a fault may give, checked: what a node prints is data
    of a known shape and bounded size (`state` one of STATES, `changed` a boolean, `why`
    text, `detail` a small mapping); anything else is dropped."""
    if not isinstance(doc, dict):
        return {}
    out: dict[str, Any] = {}
    if doc.get("state") in STATES:
        out["state"] = doc["state"]
    if isinstance(doc.get("changed"), bool):
        out["changed"] = doc["changed"]
    if isinstance(doc.get("why"), str):
        out["why"] = doc["why"][:WHY_MAX_CHARS]
    detail = doc.get("detail")
    if isinstance(detail, dict) and len(json.dumps(detail)) <= REPORT_MAX_BYTES:
        out["detail"] = {str(k)[:100]: v for k, v in detail.items()}
    elif detail is not None:
        out["detail"] = {"dropped": f"not a mapping of at most {REPORT_MAX_BYTES} bytes"}
    return out


def reports(paths: TrialPaths, stage: str) -> dict[str, dict[str, Any]]:
    """Per host of the run's inventory, every `HX {json}` line its scripts printed, checked
    (`report_fields`) and merged in order. Node text: never a template (extra vars are
    `!unsafe`), never larger than REPORT_MAX_BYTES a line."""
    out: dict[str, dict[str, Any]] = {}
    for ev in _events(paths, stage):
        if ev.get("event") not in ("runner_on_ok", "runner_item_on_ok"):
            continue
        data = ev.get("event_data", {})
        for line in str((data.get("res") or {}).get("stdout", "")).splitlines():
            if line.startswith("HX ") and len(line) <= REPORT_MAX_BYTES:
                try:
                    fields = report_fields(json.loads(line[3:]))
                except ValueError:
                    continue
                out.setdefault(str(data.get("host", "")), {}).update(fields)
    return out


def _node_error(paths: TrialPaths, stage: str) -> str:
    """The first failure in the node's own words (the script's last stderr line)."""
    for ev in _events(paths, stage):
        if ev.get("event") not in ("runner_on_failed", "runner_item_on_failed",
                                   "runner_on_unreachable"):
            continue
        data = ev.get("event_data", {})
        res = data.get("res") or {}
        stderr = [x for x in str(res.get("stderr", "")).splitlines() if x.strip()]
        msg = stderr[-1] if stderr else str(res.get("msg", ""))
        return f"{data.get('host')}: {' '.join(msg.split())[:500]}"
    return ""
