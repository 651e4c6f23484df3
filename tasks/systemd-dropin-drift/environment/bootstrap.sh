#!/bin/bash
# Per trial: the maintenance profile was applied at boot (maint-window.service, enabled);
# make sure its drop-in is in force and the worker runs under it, with an old spool.
set -euo pipefail
systemctl start maint-window
[ -f /etc/systemd/system/queue-worker.service.d/50-maintenance.conf ]
systemctl restart queue-worker
for _ in $(seq 20); do curl -sf http://localhost:8090/health >/dev/null && break; sleep 0.3; done
for i in $(seq 1 12); do curl -s -X POST "http://localhost:8090/enqueue?id=boot$i" >/dev/null & done
wait
