#!/bin/bash
# Per trial: Redis Cluster with one master on each node (slots split in three), the shop's
# 3000 cached orders spread over them, and the clients' seed list on node0.
set -euo pipefail
ip() { getent hosts "$1" | awk '{print $1; exit}'; }
systemctl restart redis-server
for _ in $(seq 40); do redis-cli ping 2>/dev/null | grep -q PONG && break; sleep 0.25; done
[ "$(hostname)" = node0 ] || exit 0
for n in node1 node2; do
  for _ in $(seq 120); do
    redis-cli -h "$n" info cluster 2>/dev/null | grep -q '^cluster_enabled:1' && break
    sleep 0.5
  done
done
redis-cli --cluster create "$(ip node0):6379" "$(ip node1):6379" "$(ip node2):6379" \
  --cluster-replicas 0 --cluster-yes >/dev/null
for _ in $(seq 60); do
  redis-cli cluster info | grep -q '^cluster_state:ok' \
    && [ "$(redis-cli -h node2 cluster info | grep -c '^cluster_state:ok')" = 1 ] && break
  sleep 0.5
done
python3 /usr/local/lib/shop/load-orders.py node0 >/dev/null
mkdir -p /etc/shop
cat > /etc/shop/cache.conf <<'CONF'
# shop web tier: Redis Cluster seed nodes (clients discover the slot map from any of them)
seeds = node0:6379,node1:6379,node2:6379
CONF
