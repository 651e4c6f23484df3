"""Run a task's tests/test.sh after the agent window and parse what it wrote.

Contract (DESIGN section 3): `tests/` is copied in only now, `/logs/verifier` is emptied
first; test.sh writes `/logs/verifier/reward.txt` (a float) or `reward.json`
(`{"reward": r, "checks": [...] | {"name": bool}}`). Missing or malformed output is a
verifier error carrying the file's text, never a silent 0.
"""

from __future__ import annotations

import json
import math
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.substrates.base import ExecResult

PHASES = ("functional", "durability", "cleanup")
_READ_FILES = ("(cd /logs/verifier 2>/dev/null && for f in reward.json reward.txt; do "
               "[ -f $f ] && printf '\\n@@HX@@%s\\n' $f && cat $f; done; true)")


class VerifierOutputError(Exception):
    """test.sh ran but its reward file is missing or malformed."""

    def __init__(self, message: str, text: str = ""):
        super().__init__(message)
        self.text = text[:4000]


@dataclass
class GateResult:
    """What one verification gate produced."""

    gate: str
    reward: float | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    uncovered: bool = False
    exit_code: int | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reward": self.reward, "checks": self.checks}
        if self.error:
            out["error"] = self.error
        return out


def _check(name: str, raw: Any) -> dict[str, Any]:
    if isinstance(raw, bool):
        return {"name": name, "passed": raw, "scored": True, "phase": None, "weight": None}
    if not isinstance(raw, dict) or not isinstance(raw.get("passed"), bool):
        raise VerifierOutputError(f"check {name!r} needs a boolean 'passed'")
    phase = raw.get("phase")
    if phase is not None and phase not in PHASES:
        raise VerifierOutputError(f"check {name!r}: phase {phase!r} is not one of {PHASES}")
    weight = raw.get("weight")
    if weight is not None and (not isinstance(weight, int | float) or weight < 0):
        raise VerifierOutputError(f"check {name!r}: weight must be a non-negative number")
    return {"name": name, "passed": raw["passed"], "scored": bool(raw.get("scored", True)),
            "phase": phase, "weight": weight}


def _reward_value(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise VerifierOutputError(f"{where}: reward must be a number in [0, 1], got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise VerifierOutputError(f"{where}: reward {value} is outside [0, 1]")
    return float(value)


def parse_reward(json_text: str | None, txt_text: str | None) -> tuple[float, list[dict]]:
    """(reward, checks) from reward.json (preferred) or reward.txt; VerifierOutputError else."""
    if json_text is not None:
        try:
            doc = json.loads(json_text)
        except ValueError as exc:
            raise VerifierOutputError(f"reward.json is not JSON: {exc}", json_text) from exc
        if not isinstance(doc, dict):
            raise VerifierOutputError("reward.json must be an object", json_text)
        raw_checks = doc.get("checks") or []
        try:
            if isinstance(raw_checks, dict):
                checks = [_check(k, v) for k, v in raw_checks.items()]
            elif isinstance(raw_checks, list):
                checks = [_check(str(c.get("name", f"check{i}")) if isinstance(c, dict) else
                                 f"check{i}", c) for i, c in enumerate(raw_checks)]
            else:
                raise VerifierOutputError("'checks' must be a list or a mapping")
        except VerifierOutputError as exc:
            raise VerifierOutputError(f"reward.json: {exc}", json_text) from exc
        if "reward" in doc:
            try:
                return _reward_value(doc["reward"], "reward.json"), checks
            except VerifierOutputError as exc:
                raise VerifierOutputError(str(exc), json_text) from exc
        scored = [c for c in checks if c["scored"]]
        if not scored:
            raise VerifierOutputError("reward.json has neither 'reward' nor scored checks",
                                      json_text)
        return sum(c["passed"] for c in scored) / len(scored), checks
    if txt_text is not None:
        try:
            value = float(txt_text.strip())
        except ValueError as exc:
            raise VerifierOutputError(f"reward.txt is not a number: {txt_text.strip()[:80]!r}",
                                      txt_text) from exc
        try:
            return _reward_value(value, "reward.txt"), []
        except VerifierOutputError as exc:
            raise VerifierOutputError(str(exc), txt_text) from exc
    raise VerifierOutputError("test.sh wrote neither /logs/verifier/reward.json nor reward.txt")


async def run_verifier(env, task, out_dir: Path, gate: str = "immediate") -> GateResult:
    """Copy tests/ in, run test.sh on the primary node, parse and keep its output."""
    out_dir.mkdir(parents=True, exist_ok=True)
    result = GateResult(gate=gate)
    try:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in task.config.verifier.env.items())
        # tests/ in (a fresh /tests), /logs/verifier emptied, test.sh, then (after a marker
        # line) the reward files: one round trip; its exit code is test.sh's. A run cut short
        # reads the files separately below.
        mark = f"@@HX-REWARD-FILES-{secrets.token_hex(8)}@@"
        run: ExecResult = await env.exec(
            "{ rm -rf /logs/verifier && mkdir -p /logs/verifier; } || exit 98\n"
            f"cd /tests && {exports + ' ' if exports else ''}bash /tests/test.sh; "
            f"hx_rc=$?; printf '\\n%s\\n' {mark}; {_READ_FILES}; exit $hx_rc",
            timeout=task.config.verifier.timeout_sec, record=False,
            files=(task.tests_dir, "/tests"))
        if run.exit_code in (97, 98) and mark not in run.stdout:
            raise RuntimeError("cannot prepare /tests and /logs/verifier: "
                               f"{run.stderr.strip()[-300:]}")
        stdout, sep, files_out = run.stdout.rpartition(f"\n{mark}\n")
        if not sep:
            stdout, files_out = run.stdout, (await env.exec(
                _READ_FILES, timeout=60, record=False)).stdout
    except Exception as exc:  # environment gone or unreachable: the verifier cannot run
        result.uncovered = True
        result.error = {"type": "VerifierUnavailable", "message": str(exc)[:1000]}
        return result
    result.exit_code, result.seconds = run.exit_code, run.seconds
    text = stdout + ("\n--- stderr ---\n" + run.stderr if run.stderr else "")
    (out_dir / "test-stdout.txt").write_text(env.redact(text) or "")
    texts = _split_files(files_out)
    for name, body in texts.items():
        (out_dir / name).write_text(env.redact(body) or "")
    try:
        result.reward, result.checks = parse_reward(texts.get("reward.json"),
                                                    texts.get("reward.txt"))
    except VerifierOutputError as exc:
        timeout_note = " (test.sh timed out)" if run.timed_out else ""
        result.error = {"type": "VerifierOutputError", "message": f"{exc}{timeout_note}",
                        "text": exc.text}
    return result


def _split_files(stdout: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for chunk in stdout.split("\n@@HX@@")[1:]:
        name, _, body = chunk.partition("\n")
        out[name.strip()] = body
    return out
