#!/bin/bash
# Runs on the primary (node0).
ok() { if "$@" >/dev/null 2>&1; then echo true; else echo false; fi; }
remote() { ssh -o BatchMode=yes -o ConnectTimeout=10 root@node1 "$@"; }
cat > /logs/verifier/reward.json <<JSON
{"checks": [
  {"name": "bootstrap ran on the primary", "passed": $(ok grep -q '^node0 bmc=\[\] remote=\[\]' /root/bootstrap-ran)},
  {"name": "bootstrap reached node1 over root ssh", "passed": $(ok test "$(remote cat /root/from-primary)" = node0)},
  {"name": "bootstrap did not run on node1", "passed": $(ok remote test ! -e /root/bootstrap-ran)},
  {"name": "node1 is ready", "passed": $(ok remote test -s /root/ready)}
]}
JSON
