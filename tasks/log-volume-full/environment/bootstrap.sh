#!/bin/bash
# Per trial: a small dedicated log volume, debug logging left on after an incident,
# and old rotated logs that filled the volume; the service then dies on ENOSPC.
set -euo pipefail
systemctl stop appsvc
mountpoint -q /var/log/app || mount -t tmpfs -o size=8m,mode=0755 applogs /var/log/app
sed -i 's/^LOG_LEVEL=.*/LOG_LEVEL=debug/' /etc/appsvc/appsvc.conf
for i in 1 2 3 4 5 6 7; do
  head -c 1200000 /dev/urandom | base64 > "/var/log/app/app.log.$i" 2>/dev/null || true
done
dd if=/dev/zero of=/var/log/app/app.log bs=64k 2>/dev/null || true
systemctl reset-failed appsvc || true
systemctl start appsvc || true
