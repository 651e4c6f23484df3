#!/bin/bash
# InfraBench style: runs once, on the primary; reaches the other nodes as root over SSH.
set -euo pipefail
. /opt/syscraft/cloudlab-cluster-info.sh
bmc="$(syscraft_discover_bmc_ip)"          # no argument, no BMC: an empty answer, no error
remote_bmc="$(syscraft_remote_discover_bmc_ip)"
peer="$(syscraft_node_host node1)"
echo "$(hostname) bmc=[${bmc}] remote=[${remote_bmc}]" >> /root/bootstrap-ran
ssh -o BatchMode=yes "root@${peer}" "echo $(hostname) > /root/from-primary"
