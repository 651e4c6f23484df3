#!/bin/bash
# InfraBench style: runs once, on the primary; reaches the other nodes as root over SSH.
set -euo pipefail
. /opt/syscraft/cloudlab-cluster-info.sh
peer="$(syscraft_node_host node1)"
echo "$(hostname) peer_bmc=[$(syscraft_discover_bmc_ip node1)]" >> /root/bootstrap-ran
ssh -o BatchMode=yes "root@${peer}" "echo $(hostname) > /root/from-primary"
