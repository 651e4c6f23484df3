#!/bin/bash
# Root cause: debug logging fills the small volume. Turn it off, drop the rotated logs,
# truncate the live log and restart the service.
set -euo pipefail
sed -i 's/^LOG_LEVEL=.*/LOG_LEVEL=info/' /etc/appsvc/appsvc.conf
rm -f /var/log/app/app.log.[0-9]*
: > /var/log/app/app.log
systemctl reset-failed appsvc || true
systemctl restart appsvc
for _ in $(seq 20); do curl -sf http://localhost:8080/health >/dev/null && exit 0; sleep 0.5; done
exit 1
