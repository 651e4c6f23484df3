#!/bin/bash
# Root cause: net-maintenance.service blackholes node2 at every boot. Drain nobody, stop
# and disable the unit, drop the route.
set -euo pipefail
node2=$(getent hosts node2 | awk '{print $1; exit}')
sed -i 's/^DRAIN_HOSTS=.*/DRAIN_HOSTS=""/' /etc/default/net-maintenance
systemctl disable --now net-maintenance
ip route del blackhole "$node2/32" 2>/dev/null || true
for _ in $(seq 20); do curl -sf --max-time 2 http://node2:8080/ >/dev/null && exit 0; sleep 1; done
exit 1
