#!/bin/bash
# Drain node2's slots (and their keys) onto node0 and node1, remove it from the cluster
# (every other node forgets it; it is reset), point the clients' seed list away from it,
# then stop it for good and wipe its data.
set -euo pipefail
ID2=$(redis-cli -h node2 cluster myid)
redis-cli --cluster rebalance node0:6379 --cluster-weight "$ID2=0" --cluster-yes
redis-cli --cluster del-node node0:6379 "$ID2"
sed -i -E 's/,?node2:6379//; s/= ,/= /' /etc/shop/cache.conf
ssh -n node2 'systemctl disable --now --quiet redis-server; rm -rf /var/lib/redis/*'
redis-cli cluster info | grep -E '^cluster_(state|known_nodes|slots_ok):'
