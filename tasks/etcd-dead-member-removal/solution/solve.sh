#!/bin/bash
# Remove the dead member from the membership (the survivors keep quorum: 2 of 3, then 2 of
# 2), then drop node2 from every peer list and client endpoint list, and clear node2.
set -euo pipefail
export ETCDCTL_API=3
eps=http://node0:2379,http://node1:2379
id=$(etcdctl --endpoints=$eps member list | awk -F', ' '$3 == "node2" || $4 ~ /node2:2380/ {print $1}')
[ -n "$id" ] && etcdctl --endpoints=$eps member remove "$id"
for n in node0 node1; do
  ssh $n 'sed -i -e "s#^ETCD_INITIAL_CLUSTER=.*#ETCD_INITIAL_CLUSTER=\"node0=http://node0:2380,node1=http://node1:2380\"#" /etc/default/etcd
          sed -i -e "s#^SHOP_ETCD_ENDPOINTS=.*#SHOP_ETCD_ENDPOINTS=http://node0:2379,http://node1:2379#" /etc/default/shop-app'
done
ssh node2 'systemctl mask --now etcd >/dev/null 2>&1; rm -rf /var/lib/etcd/default
           sed -i -e "s#^SHOP_ETCD_ENDPOINTS=.*#SHOP_ETCD_ENDPOINTS=http://node0:2379,http://node1:2379#" /etc/default/shop-app'
etcdctl --endpoints=$eps endpoint health --cluster
