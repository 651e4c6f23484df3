#!/bin/bash
# The crashed maintenance job ran as root and left the WAL (holding 50 committed orders)
# and its shared-memory index root-owned and 0600, so the ledger user cannot open the
# database. Checkpoint the WAL into the main file (as root, with the service stopped: the
# last connection to close checkpoints and removes the WAL), then give every file back to
# ledger and start the service.
set -euo pipefail
DB=/var/lib/ledger/ledger.db
systemctl stop ledger
sqlite3 "$DB" 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null
[ "$(sqlite3 "$DB" 'PRAGMA integrity_check;')" = ok ]
chown ledger:ledger "$DB"*
chmod 0640 "$DB"*
systemctl reset-failed ledger || true
systemctl start ledger
for _ in $(seq 20); do curl -sf http://localhost:8080/health && exit 0; sleep 0.5; done
exit 1
