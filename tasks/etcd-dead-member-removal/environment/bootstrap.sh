#!/bin/bash
# Per trial: a 3-member etcd cluster (static bootstrap by node name) holding the shop's
# configuration; then node2's member dies for good: its data directory is wiped (a few
# empty remains of it stay behind) and etcd is masked there. The membership, the peer
# lists in /etc/default/etcd and the shop's client endpoints still name node2.
set -euo pipefail
export ETCDCTL_API=3
me=$(hostname)
cat > /etc/default/etcd <<CONF
# etcd member $me (managed by the cluster config push)
ETCD_NAME=$me
ETCD_DATA_DIR=/var/lib/etcd/default
ETCD_LISTEN_PEER_URLS=http://0.0.0.0:2380
ETCD_LISTEN_CLIENT_URLS=http://0.0.0.0:2379
ETCD_INITIAL_ADVERTISE_PEER_URLS=http://$me:2380
ETCD_ADVERTISE_CLIENT_URLS=http://$me:2379
ETCD_INITIAL_CLUSTER="node0=http://node0:2380,node1=http://node1:2380,node2=http://node2:2380"
ETCD_INITIAL_CLUSTER_STATE=new
ETCD_INITIAL_CLUSTER_TOKEN=shop-etcd
CONF
cat > /etc/default/shop-app <<'CONF'
# shop application: where it finds its configuration store
SHOP_ETCD_ENDPOINTS=http://node0:2379,http://node1:2379,http://node2:2379
CONF
systemctl enable --quiet etcd
systemctl start --no-block etcd
ready() { etcdctl --endpoints="http://$me:2379" --command-timeout=2s get /shop/ready --print-value-only 2>/dev/null | grep -qx yes; }
if [ "$me" = node0 ]; then
  for _ in $(seq 90); do
    etcdctl --endpoints=http://node0:2379 --command-timeout=2s put /shop/probe x >/dev/null 2>&1 && break
    sleep 1
  done
  for i in $(seq -w 1 40); do
    etcdctl --endpoints=http://node0:2379 put "/shop/config/item$i" "value-$i" >/dev/null
  done
  etcdctl --endpoints=http://node0:2379 put /shop/ready yes >/dev/null
  exit 0
fi
for _ in $(seq 120); do ready && break; sleep 1; done
ready
if [ "$me" = node2 ]; then
  sleep 1
  systemctl stop etcd
  systemctl disable --quiet etcd
  systemctl mask --quiet etcd
  rm -rf /var/lib/etcd/default
  mkdir -p /var/lib/etcd/default/member/snap /var/lib/etcd/default/member/wal
  chown -R etcd:etcd /var/lib/etcd/default
fi
