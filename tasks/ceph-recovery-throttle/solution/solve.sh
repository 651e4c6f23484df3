#!/bin/bash
# The PGs wait in recovery_wait for a reservation on osd.1 that is never granted: Pacific's
# recovery reservations are bounded by osd_max_backfills, and the config database gives
# osd.1 (and only osd.1) an override of 0. Remove every such per-OSD override, then wait for
# the pool to recover.
set -euo pipefail
ceph config dump -f json | python3 -c '
import json, sys
for e in json.load(sys.stdin):
    if e["name"] == "osd_max_backfills" and e["section"].startswith("osd.") and int(e["value"]) < 1:
        print(e["section"])' | while read -r who; do
  ceph config rm "$who" osd_max_backfills
done
for _ in $(seq 90); do
  ceph pg stat -f json | python3 -c '
import json, sys
s = json.load(sys.stdin)["pg_summary"]
states = {x["name"]: x["num"] for x in s["num_pg_by_state"]}
sys.exit(0 if states.get("active+clean") == s["num_pgs"] else 1)' && break
  sleep 2
done
ceph -s
