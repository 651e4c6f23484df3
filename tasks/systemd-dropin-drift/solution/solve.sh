#!/bin/bash
# The maintenance profile (LimitNOFILE=48) is re-applied as a drop-in by the enabled
# maint-window oneshot at every boot. Retire the profile, disable the oneshot, remove its
# drop-in, reload and restart the worker.
set -euo pipefail
rm -f /etc/maint-window/profiles/queue-worker.conf
systemctl disable --now maint-window
rm -f /etc/systemd/system/queue-worker.service.d/50-maintenance.conf
rmdir /etc/systemd/system/queue-worker.service.d 2>/dev/null || true
systemctl daemon-reload
systemctl restart queue-worker
for _ in $(seq 20); do curl -sf http://localhost:8090/health && exit 0; sleep 0.5; done
exit 1
