#!/bin/bash
# pgbouncer.ini is re-rendered at every start from the template plus overrides.d, where the
# incident's load-shedding fragment (max_client_conn 8, pool 2, 2 s wait) still lives.
# Retire the fragment, re-render through a restart and check a parallel burst.
set -euo pipefail
rm -f /etc/pgbouncer/overrides.d/90-incident-4411.ini
systemctl restart pgbouncer
for _ in $(seq 20); do
  PGPASSWORD=app-pass psql -h 127.0.0.1 -p 6432 -U app -d shop -Atqc 'select 1' >/dev/null 2>&1 && break
  sleep 0.5
done
grep -E '^(max_client_conn|default_pool_size)' /etc/pgbouncer/pgbouncer.ini
