#!/bin/bash
# Fix node2's stale peer address, drop the push residue, restart its member, wait for it.
set -euo pipefail
ssh node2 'set -e
  sed -i "s#^ETCD_INITIAL_CLUSTER=.*#ETCD_INITIAL_CLUSTER=\"node0=http://node0:2380,node1=http://node1:2380,node2=http://node2:2380\"#" /etc/default/etcd
  rm -f /etc/default/etcd.dpkg-*
  systemctl reset-failed etcd || true
  systemctl enable --quiet etcd
  systemctl restart etcd'
for _ in $(seq 30); do
  etcdctl --endpoints=http://node2:2379 --command-timeout=2s endpoint health && exit 0
  sleep 1
done
exit 1
