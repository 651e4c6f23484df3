#!/bin/bash
# The BMC says node1's chassis is off: power it on out of band, wait for the API and SSH.
set -euo pipefail
. /etc/harness/bmc-credentials
bmc() {
  IPMI_PASSWORD="$node1_bmc_password" ipmitool -I lan -H "${node1_bmc%:*}" \
    -p "${node1_bmc##*:}" -U "$node1_bmc_user" -E "$@"
}
bmc chassis power status
bmc chassis power on
for _ in $(seq 300); do
  curl -sf --max-time 2 http://node1:8080/ >/dev/null \
    && ssh -o BatchMode=yes -o ConnectTimeout=5 root@node1 true && exit 0
  sleep 1
done
exit 1
