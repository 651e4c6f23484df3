#!/bin/bash
# The origin's rebuilt issuer key is the right one; the registry's namespace approval still
# holds the pre-rebuild public key, so the registry rejects the origin's advertisements and
# the cache its tokens. Re-approve the namespace with the origin's active JWKS (through the
# registry's admin tool), restart the cache, close the incident marker.
set -euo pipefail
ssh node1 'set -e
  fed-registry-admin approve /fed/public --jwks-url http://node0:8444/.well-known/issuer.jwks --force
  systemctl restart fed-registry fed-cache
  rm -f /var/lib/federation/incident/ns-key-mismatch.open'
for _ in $(seq 20); do
  curl -sf -o /dev/null http://node1:8447/fed/public/dataset.csv && exit 0
  sleep 0.5
done
exit 1
