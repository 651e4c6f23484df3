#!/bin/bash
# Power node1 on through its BMC and wait for the inventory API.
set -euo pipefail
. /etc/harness/bmc-credentials
bmc() { ipmitool -I lanplus -C 3 -H "${node1_bmc%:*}" -p "${node1_bmc#*:}" \
          -U "$node1_bmc_user" -P "$node1_bmc_password" "$@"; }
bmc chassis power status
bmc chassis power on
for _ in $(seq 180); do
  curl -sf --max-time 2 http://node1:8080/ >/dev/null && exit 0
  sleep 1
done
exit 1
