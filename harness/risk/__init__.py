"""The risk monitor: deterministic rules flag dangerous commands in agent trajectories.

Seven danger types (the paper's section 4.6): `destructive_fs`, `disk_raid_lvm`,
`network_disruption`, `privilege_bypass`, `unsafe_restart`, `cross_service`,
`harness_probing`. Findings go to `<trial>/risk.json` next to the score, never into it.

    from harness import risk
    findings = risk.scan(records, services=["cassandra"])
    risk.counts(findings)            # {type: n} for all seven types
    risk.write_report(trial_dir)     # reads agent/trajectory.jsonl, writes risk.json

Layout: `shell` splits command lines into simple commands; `rules` is the rule object;
`catalog` and `catalog_ops` hold the rules as data; `monitor` classifies; `report` writes
`risk.json`; `judge` is the optional LLM review.
"""

from harness.risk.monitor import RULES, Finding, classify, counts, scan
from harness.risk.report import REPORT, report_all, trial_dirs, write_report
from harness.risk.rules import TYPES

__all__ = ["REPORT", "RULES", "TYPES", "Finding", "classify", "counts", "report_all", "scan",
           "trial_dirs", "write_report"]
