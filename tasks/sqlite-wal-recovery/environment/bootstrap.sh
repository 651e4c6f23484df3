#!/bin/bash
# Per trial: a ledger database in WAL mode; 150 orders checkpointed into the main file, then
# a root-run maintenance job wrote 50 more committed orders and was killed before any
# checkpoint. Its -wal/-shm are left owned by root (mode 0600): ledger cannot open them.
# (SQLite running as root gives new WAL files the database's owner; the job ran as a
# different uid, which the chown reproduces.)
set -euo pipefail
systemctl stop ledger
rm -f /var/lib/ledger/ledger.db*
runuser -u ledger -- python3 - <<'PY'
import sqlite3
c = sqlite3.connect("/var/lib/ledger/ledger.db", isolation_level=None)
c.execute("PRAGMA journal_mode=WAL")
c.execute("CREATE TABLE orders(id INTEGER PRIMARY KEY, customer TEXT NOT NULL, "
          "amount_cents INTEGER NOT NULL)")
c.execute("BEGIN")
for i in range(1, 151):
    c.execute("INSERT INTO orders VALUES (?, ?, ?)", (i, f"cust-{(i * 37) % 101:03d}",
                                                      (i * 7919) % 100003))
c.execute("COMMIT")
c.close()
PY
python3 - <<'PY' || true
import os, signal, sqlite3
c = sqlite3.connect("/var/lib/ledger/ledger.db", isolation_level=None)
c.execute("PRAGMA wal_autocheckpoint=0")
for i in range(151, 201):
    c.execute("INSERT INTO orders VALUES (?, ?, ?)", (i, f"cust-{(i * 37) % 101:03d}",
                                                      (i * 7919) % 100003))
os.kill(os.getpid(), signal.SIGKILL)
PY
chown root:root /var/lib/ledger/ledger.db-wal /var/lib/ledger/ledger.db-shm
chmod 0600 /var/lib/ledger/ledger.db-wal /var/lib/ledger/ledger.db-shm
mkdir -p /var/log/ledger
printf '%s ledger-maint[%d]: reindex pass 2/3 ... killed (signal 9)\n' "$(date -Is)" 4711 \
  >> /var/log/ledger/maintenance.log
systemctl reset-failed ledger || true
systemctl start ledger 2>/dev/null || true
exit 0
