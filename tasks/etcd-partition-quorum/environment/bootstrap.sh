#!/bin/bash
# Per trial: a 3-member etcd cluster bootstrapped statically by node name. On node2 a
# botched config push left a stale peer address in ETCD_INITIAL_CLUSTER (etcd refuses to
# start) and the package's default file as /etc/default/etcd.dpkg-dist.
set -euo pipefail
me=$(hostname)
cluster="node0=http://node0:2380,node1=http://node1:2380,node2=http://node2:2380"
[ "$me" = node2 ] && cluster="node0=http://node0:2380,node1=http://node1:2380,node2=http://10.99.0.12:2380"
cat > /etc/default/etcd <<CONF
# etcd member $me (managed by the cluster config push)
ETCD_NAME=$me
ETCD_DATA_DIR=/var/lib/etcd/default
ETCD_LISTEN_PEER_URLS=http://0.0.0.0:2380
ETCD_LISTEN_CLIENT_URLS=http://0.0.0.0:2379
ETCD_INITIAL_ADVERTISE_PEER_URLS=http://$me:2380
ETCD_ADVERTISE_CLIENT_URLS=http://$me:2379
ETCD_INITIAL_CLUSTER="$cluster"
ETCD_INITIAL_CLUSTER_STATE=new
ETCD_INITIAL_CLUSTER_TOKEN=shop-etcd
CONF
if [ "$me" = node2 ]; then
  cp /usr/share/etcd-task/etcd.default /etc/default/etcd.dpkg-dist
  systemctl enable --quiet etcd
  systemctl start etcd 2>/dev/null || true
  exit 0
fi
systemctl enable --quiet etcd
systemctl start --no-block etcd
if [ "$me" = node0 ]; then
  for _ in $(seq 60); do
    etcdctl --endpoints=http://node0:2379 --command-timeout=2s put /shop/config ready \
      >/dev/null 2>&1 && exit 0
    sleep 1
  done
  echo "the etcd cluster did not form" >&2
  exit 1
fi
