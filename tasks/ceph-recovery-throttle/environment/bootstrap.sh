#!/bin/bash
# Per trial, driven from node0 (node1 and node2 only wait): a Ceph cluster made by hand, a
# monitor and a manager on node0 and one bluestore OSD per node on a file in the node's
# data directory (containers have no block devices), the replicated pool `shop` (size 3,
# min_size 2) with the shop's 100 archived invoices. Then the maintenance on node1: osd.1
# goes down and out, invoices 61-100 are written meanwhile, osd.1 comes back in. A per-OSD
# override in the monitors' config database (osd.1 osd_max_backfills = 0; Pacific's
# recovery reservations use that limit as well as backfill's) keeps every placement group
# that has to recover onto osd.1 in recovery_wait for good; two global recovery settings in
# the `osd` section look like the culprit and are not.
set -euo pipefail
[ "$(hostname)" = node0 ] || exit 0
ip() { getent hosts "$1" | awk '{print $1; exit}'; }
for n in node1 node2; do
  for _ in $(seq 60); do ssh -n "$n" true 2>/dev/null && break; sleep 0.5; done
done

fsid=$(uuidgen)
ip0=$(ip node0)
cat > /etc/ceph/ceph.conf <<CONF
[global]
fsid = $fsid
mon_initial_members = node0
mon_host = [v2:$ip0:3300,v1:$ip0:6789]
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
osd_pool_default_size = 3
osd_pool_default_min_size = 2
# small hosts: the monitor's disk is shared, the data directories are small
mon_data_avail_warn = 2
mon_data_avail_crit = 1

[mgr]
mgr_disabled_modules = diskprediction_local iostat nfs restful

[osd]
osd_objectstore = bluestore
bluestore_block_size = 1073741824
CONF
umask 077
ceph-authtool --create-keyring /tmp/mon.keyring --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool --create-keyring /etc/ceph/ceph.client.admin.keyring --gen-key -n client.admin \
  --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
ceph-authtool /tmp/mon.keyring --import-keyring /etc/ceph/ceph.client.admin.keyring >/dev/null
monmaptool --create --addv node0 "[v2:$ip0:3300,v1:$ip0:6789]" --fsid "$fsid" /tmp/monmap >/dev/null
umask 022
ceph-mon --mkfs -i node0 --monmap /tmp/monmap --keyring /tmp/mon.keyring
install -d /var/lib/ceph/mgr/ceph-node0
chown -R ceph:ceph /var/lib/ceph/mon /var/lib/ceph/mgr
rm -f /tmp/mon.keyring /tmp/monmap
systemctl enable --quiet ceph-mon@node0
systemctl start ceph-mon@node0
for _ in $(seq 60); do timeout 5 ceph -s >/dev/null 2>&1 && break; sleep 0.5; done
ceph auth get-or-create mgr.node0 mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
  -o /var/lib/ceph/mgr/ceph-node0/keyring
chown ceph:ceph /var/lib/ceph/mgr/ceph-node0/keyring
systemctl enable --quiet ceph-mgr@node0
systemctl start ceph-mgr@node0
# the cluster's settings live in the monitors' config database
ceph config set global auth_allow_insecure_global_id_reclaim false
ceph config set global osd_pool_default_pg_autoscale_mode off
ceph config set osd bluestore_cache_autotune false
ceph config set osd bluestore_cache_size 67108864
ceph config set osd osd_scrub_begin_hour 1
ceph config set osd osd_scrub_end_hour 6

# one OSD per node, ids in node order (osd.N on nodeN)
mkosd() {
  set -euo pipefail
  local uuid secret id dir
  uuid=$(uuidgen)
  secret=$(ceph-authtool --gen-print-key)
  id=$(echo "{\"cephx_secret\": \"$secret\"}" | ceph osd new "$uuid" -i -)
  dir=/var/lib/ceph/osd/ceph-$id
  install -d -o ceph -g ceph "$dir"
  ceph-authtool --create-keyring "$dir/keyring" --name "osd.$id" --add-key "$secret" >/dev/null
  chown ceph:ceph "$dir/keyring"
  ceph-osd -i "$id" --mkfs --osd-uuid "$uuid" --setuser ceph --setgroup ceph >/dev/null 2>&1
  systemctl enable --quiet "ceph-osd@$id"
  systemctl start "ceph-osd@$id"
}
mkosd
for n in node1 node2; do
  scp -q /etc/ceph/ceph.conf /etc/ceph/ceph.client.admin.keyring "$n:/etc/ceph/"
  ssh -n "$n" "$(declare -f mkosd); mkosd"
done
up() { ceph osd dump -f json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(o["up"] for o in d["osds"]))'; }
for _ in $(seq 120); do [ "$(up)" = 3 ] && break; sleep 0.5; done

ceph osd pool create shop 16 16 replicated >/dev/null 2>&1
ceph osd pool set shop size 3 >/dev/null 2>&1
ceph osd pool set shop min_size 2 >/dev/null 2>&1
ceph osd pool application enable shop archive >/dev/null 2>&1
ceph config set osd osd_recovery_max_active 1
ceph config set osd osd_recovery_sleep_hdd 0.2
put() { python3 - "$1" "$2" <<'PY'
import hashlib, sys
import rados
lo, hi = int(sys.argv[1]), int(sys.argv[2])
with rados.Rados(conffile="/etc/ceph/ceph.conf") as cluster:
    with cluster.open_ioctx("shop") as io:
        for i in range(lo, hi + 1):
            seed = hashlib.sha256(f"shop invoice {i}".encode()).digest()
            io.write_full(f"invoice-{i:04d}", (seed * 600)[: 2048 + i * 97 % 12000])
PY
}
put 1 60

# node1's maintenance
ceph config set osd.1 osd_max_backfills 0
ssh -n node1 systemctl stop ceph-osd@1
for _ in $(seq 60); do [ "$(up)" = 2 ] && break; sleep 0.5; done
ceph osd out 1 >/dev/null 2>&1
put 61 100
ceph osd in 1 >/dev/null 2>&1
ssh -n node1 systemctl start ceph-osd@1
for _ in $(seq 120); do [ "$(up)" = 3 ] && break; sleep 0.5; done
# settled: every PG active, some waiting to recover onto osd.1 (else the fault is not in
# place and the trial is not started)
settled() { ceph pg stat -f json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)["pg_summary"]
states = {s["name"]: s["num"] for s in d["num_pg_by_state"]}
ok = sum(states.values()) == d["num_pgs"] and all("active" in s for s in states)
sys.exit(0 if ok and any("recovery_wait" in s for s in states) else 1)'; }
for _ in $(seq 120); do settled && break; sleep 1; done
sleep 5
settled
# the maintenance's restarts do not count against the units' start limits
for n in node0 node1 node2; do ssh -n "$n" 'systemctl reset-failed "ceph-*"'; done
ceph pg stat
