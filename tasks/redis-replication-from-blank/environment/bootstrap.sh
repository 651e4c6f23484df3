#!/bin/bash
# Per trial: nothing is configured. redis-server and redis-sentinel run with the packaged
# defaults on every node (loopback only, the default sentinel watching 127.0.0.1). node0's
# standalone Redis already holds the shop's 100 sessions, saved to its RDB file.
set -euo pipefail
systemctl start redis-server redis-sentinel
for _ in $(seq 20); do redis-cli ping 2>/dev/null | grep -q PONG && break; sleep 0.3; done
if [ "$(hostname)" = node0 ]; then
  for i in $(seq -w 1 100); do echo "SET session:$i user-$i"; done | redis-cli >/dev/null
  redis-cli save >/dev/null
fi
