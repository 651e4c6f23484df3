#!/bin/bash
# Restore the key that matches the deployed certificate, drop the backups, restart.
set -euo pipefail
cd /etc/nginx/tls
want=$(openssl x509 -noout -pubkey -in server.crt)
for k in server.key server.key.*; do
  [ -f "$k" ] || continue
  if [ "$(openssl pkey -in "$k" -pubout 2>/dev/null)" = "$want" ]; then
    [ "$k" = server.key ] || cp "$k" server.key
    break
  fi
done
find /etc/nginx/tls -maxdepth 1 -name 'server.key.*' -delete
chmod 600 server.key
nginx -t
systemctl enable nginx
systemctl restart nginx
