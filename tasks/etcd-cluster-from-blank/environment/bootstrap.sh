#!/bin/bash
# Per trial: etcd-server is installed on every node but was never configured: the package's
# default /etc/default/etcd, the unit disabled and stopped, no data directory.
set -euo pipefail
systemctl disable --now --quiet etcd 2>/dev/null || true
rm -rf /var/lib/etcd/default
