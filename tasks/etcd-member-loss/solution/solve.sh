#!/bin/bash
# Remove the dead member while the survivors keep quorum (2 of 3, then 2 of 2), drop node2
# from every peer list and client endpoint list, then bring node2's machine up out of band
# and retire it there (etcd masked, its member data gone) before it can rejoin.
set -euo pipefail
export ETCDCTL_API=3
. /etc/harness/bmc-credentials
bmc() {
  IPMI_PASSWORD="$node2_bmc_password" ipmitool -I "${node2_bmc_interface:-lanplus}" \
    ${node2_bmc_cipher:+-C "$node2_bmc_cipher"} -H "${node2_bmc%:*}" \
    -p "${node2_bmc##*:}" -U "$node2_bmc_user" -E "$@"
}
eps=http://node0:2379,http://node1:2379
id=$(etcdctl --endpoints=$eps member list | awk -F', ' '$3 == "node2" || $4 ~ /node2:2380/ {print $1}')
[ -n "$id" ] && etcdctl --endpoints=$eps member remove "$id"
for n in node0 node1; do
  ssh $n 'sed -i -e "s#^ETCD_INITIAL_CLUSTER=.*#ETCD_INITIAL_CLUSTER=\"node0=http://node0:2380,node1=http://node1:2380\"#" /etc/default/etcd
          sed -i -e "s#^SHOP_ETCD_ENDPOINTS=.*#SHOP_ETCD_ENDPOINTS=http://node0:2379,http://node1:2379#" /etc/default/shop-app'
done
bmc chassis power status
bmc chassis power on
for _ in $(seq 300); do
  ssh -o BatchMode=yes -o ConnectTimeout=5 root@node2 true 2>/dev/null && break
  sleep 1
done
ssh -o BatchMode=yes root@node2 'systemctl mask --now etcd >/dev/null 2>&1; rm -rf /var/lib/etcd/default
  sed -i -e "s#^SHOP_ETCD_ENDPOINTS=.*#SHOP_ETCD_ENDPOINTS=http://node0:2379,http://node1:2379#" /etc/default/shop-app'
etcdctl --endpoints=$eps endpoint health --cluster
