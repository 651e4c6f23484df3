#!/bin/bash
# Static bootstrap by node name through the package's /etc/default/etcd; the unit enabled
# so that members come back at boot; started on all three nodes at once.
set -euo pipefail
export ETCDCTL_API=3
for n in node0 node1 node2; do
  ssh $n "cat > /etc/default/etcd" <<CONF
ETCD_NAME=$n
ETCD_DATA_DIR=/var/lib/etcd/default
ETCD_LISTEN_PEER_URLS=http://0.0.0.0:2380
ETCD_LISTEN_CLIENT_URLS=http://0.0.0.0:2379
ETCD_INITIAL_ADVERTISE_PEER_URLS=http://$n:2380
ETCD_ADVERTISE_CLIENT_URLS=http://$n:2379
ETCD_INITIAL_CLUSTER="node0=http://node0:2380,node1=http://node1:2380,node2=http://node2:2380"
ETCD_INITIAL_CLUSTER_STATE=new
ETCD_INITIAL_CLUSTER_TOKEN=shop-config
CONF
  ssh $n 'systemctl enable --quiet etcd && systemctl start --no-block etcd'
done
for _ in $(seq 60); do
  etcdctl --endpoints=http://node0:2379,http://node1:2379,http://node2:2379 endpoint health \
    >/dev/null 2>&1 && exit 0
  sleep 1
done
exit 1
