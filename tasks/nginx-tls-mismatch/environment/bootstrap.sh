#!/bin/bash
# Per trial: a fresh certificate, then a botched rotation that swapped the key only.
set -euo pipefail
cd /etc/nginx/tls
openssl req -x509 -newkey rsa:2048 -nodes -keyout server.key -out server.crt -days 30 \
  -subj "/CN=shop.internal" 2>/dev/null
systemctl restart nginx
cp server.key "server.key.bak-$(date +%Y%m%d)"
openssl genrsa -out server.key 2048 2>/dev/null
chmod 600 server.key server.key.bak-*
systemctl restart nginx || true
