#!/bin/bash
# Per trial: node0 is the primary (one physical slot and one pg_hba replication entry per
# standby) with HAProxy in front of the standbys as the read-only endpoint (:5433); node1
# and node2 are streaming standbys cloned with pg_basebackup.
set -euo pipefail
me=$(hostname)
HBA=/etc/postgresql/15/main/pg_hba.conf
ip() { getent hosts "$1" | awk '{print $1; exit}'; }
subnet=$(ip node0 | awk -F. '{print $1"."$2"."$3".0/24"}')
cat >> $HBA <<CONF
# shop: application clients on the cluster network
host    all             app             $subnet          scram-sha-256
CONF
if [ "$me" = node0 ]; then
  cat >> $HBA <<CONF
# streaming standbys
host    replication     replicator      $(ip node1)/32   scram-sha-256   # node1 standby
host    replication     replicator      $(ip node2)/32   scram-sha-256   # node2 standby
CONF
  systemctl restart postgresql@15-main
  runuser -u postgres -- psql -qAt -c "SELECT pg_create_physical_replication_slot('node1_slot')" \
    -c "SELECT pg_create_physical_replication_slot('node2_slot')" >/dev/null
  cat > /etc/haproxy/haproxy.cfg <<'CONF'
global
    log /dev/log local0
    stats socket /run/haproxy/admin.sock mode 660 level admin
    daemon

defaults
    log global
    mode tcp
    timeout connect 3s
    timeout client 1m
    timeout server 1m

# read-only endpoint of the shop database: the streaming standbys
listen shop_ro
    bind *:5433
    balance roundrobin
    option pgsql-check user app
    default-server inter 2s fall 3 rise 2
    server node1 node1:5432 check
    server node2 node2:5432 check
CONF
  systemctl enable --quiet haproxy
  systemctl restart haproxy
  exit 0
fi
systemctl restart postgresql@15-main
for _ in $(seq 60); do pg_isready -q -h node0 && break; sleep 0.5; done
for _ in $(seq 60); do
  runuser -u postgres -- psql -h node0 -U replicator -d "dbname=replication replication=true" \
    -Atc IDENTIFY_SYSTEM >/dev/null 2>&1 && break
  sleep 0.5
done
systemctl stop postgresql@15-main
rm -rf /var/lib/postgresql/15/main
runuser -u postgres -- pg_basebackup -h node0 -U replicator -D /var/lib/postgresql/15/main \
  -S "${me}_slot" -R -X stream -c fast
systemctl start postgresql@15-main
