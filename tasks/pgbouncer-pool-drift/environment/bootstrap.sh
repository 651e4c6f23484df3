#!/bin/bash
# Per trial: PostgreSQL and PgBouncer up (the incident override in force).
set -euo pipefail
systemctl start postgresql@15-main pgbouncer
for _ in $(seq 30); do
  PGPASSWORD=app-pass psql -h 127.0.0.1 -p 6432 -U app -d shop -Atqc 'select 1' >/dev/null 2>&1 \
    && exit 0
  sleep 0.5
done
echo "pgbouncer did not come up" >&2
exit 1
