"""The scoring rule: how a verifier's reward follows from its checks (tests/score.py).

Every task ships this file, byte for byte, beside its tests/test.sh (`harness task new` puts
it there; a unit test compares every copy). It runs on the task's node with only the node's
python3 (3.6 or later, standard library only). A reward.json with checks but no reward (a
task that does not score through this file) is the weighted fraction of its scored checks:
there unscored checks are observations (`harness.trial.verifier.parse_reward`).

A check is `{"name", "passed", "scored" (default true), "phase", "weight" (default 1)}`:

- the reward is the weighted fraction of scored checks that passed,
  `sum(weight of passed scored checks) / sum(weight of scored checks)`;
- an unscored check is a precondition (an anti-bypass gate): it adds no credit, and when one
  fails the reward is 0 and every scored functional check (a check without a phase counts
  as functional) is recorded as failed, voided: its evidence came from an environment that
  does not count; durability and cleanup checks keep what they found;
- `phase` (functional | durability | cleanup) does not weigh a check otherwise.

In test.sh, from the Python that builds the checks (with PYTHONPATH="$(dirname "$0")"):
`import score; score.write(checks)`; from shell: print the checks as JSON into
`python3 "$(dirname "$0")/score.py"`. Either writes /logs/verifier/reward.json as
`{"reward": r, "checks": [...]}`, which InfraBench and Harbor read too.
"""

import json
import sys

OUT = "/logs/verifier/reward.json"


def score(checks):
    """(reward, checks): the rule above over `checks` (a list of check dicts or the legacy
    mapping name -> passed); the returned checks are copies, `scored` set, voided where the
    rule voids them. ValueError when no scored check carries weight."""
    if isinstance(checks, dict):
        checks = [dict(v, name=k) if isinstance(v, dict) else {"name": k, "passed": v}
                  for k, v in checks.items()]
    out = [dict(c, scored=bool(c.get("scored", True))) for c in checks]
    scored = [c for c in out if c["scored"]]
    met = all(c["passed"] for c in out if not c["scored"])
    if not met:
        for c in scored:
            if c.get("phase") in (None, "functional"):
                c["passed"] = False
    total = sum(_weight(c) for c in scored)
    if not total:
        raise ValueError("no scored check with a positive weight")
    if not met:
        return 0.0, out
    return sum(_weight(c) for c in scored if c["passed"]) / total, out


def _weight(check):
    return 1.0 if check.get("weight") is None else float(check["weight"])


def write(checks, path=None):
    """Score `checks` and write `{"reward", "checks"}` to `path` (default OUT); the reward."""
    reward, out = score(checks)
    with open(path or OUT, "w") as f:
        json.dump({"reward": reward, "checks": out}, f)
    return reward


if __name__ == "__main__":  # checks as JSON on stdin (a list, a mapping, or {"checks": ...})
    doc = json.load(sys.stdin)
    write(doc["checks"] if isinstance(doc, dict) and "checks" in doc else doc,
          sys.argv[1] if len(sys.argv) > 1 else None)
