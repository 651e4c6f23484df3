#!/bin/bash
# Drain first (take node2 out of the read-only pool in HAProxy's config and reload), then
# stop node2 for good (start.conf so Debian's generator does not bring the cluster back at
# boot, and the unit disabled), then drop its slot and its pg_hba entry on the primary.
set -euo pipefail
HBA=/etc/postgresql/15/main/pg_hba.conf
IP2=$(getent hosts node2 | awk '{print $1; exit}')
sed -i -E '/^[[:space:]]*server[[:space:]]+node2[[:space:]]/d' /etc/haproxy/haproxy.cfg
systemctl reload haproxy
ssh -n node2 'echo disabled > /etc/postgresql/15/main/start.conf
  systemctl disable --now --quiet postgresql@15-main 2>/dev/null || systemctl stop postgresql@15-main
  systemctl daemon-reload'
for _ in $(seq 20); do
  [ "$(runuser -u postgres -- psql -qAtX -c "select count(*) from pg_stat_replication where client_addr = '$IP2'")" = 0 ] && break
  sleep 0.5
done
runuser -u postgres -- psql -qAtX -c "select pg_drop_replication_slot('node2_slot')" >/dev/null
sed -i -E "/^host[[:space:]]+replication[[:space:]]+replicator[[:space:]]+${IP2//./\\.}\/32/d" $HBA
runuser -u postgres -- psql -qAtX -c "select pg_reload_conf()" >/dev/null
runuser -u postgres -- psql -qAtX -c "select slot_name, active from pg_replication_slots"
