#!/bin/sh
# Apply the per-node seed disk (/dev/vdb, ext4 labelled HXSEED) made by the harness:
# root's authorized_keys, hostname, /etc/hosts, /etc/harness/*; a fresh ed25519 host key
# (RSA key generation alone takes seconds under TCG).
set -eu
SEED=/run/harness-seed
dev=""
# the seed is the second disk; a full `blkid -L` scan at early boot can take seconds
for _ in $(seq 1 50); do
    if [ -b /dev/vdb ] && [ "$(blkid -o value -s LABEL /dev/vdb 2>/dev/null)" = HXSEED ]; then
        dev=/dev/vdb
        break
    fi
    sleep 0.2
done
[ -n "$dev" ] || dev=$(blkid -L HXSEED 2>/dev/null || true)
if [ -n "$dev" ]; then
    mkdir -p "$SEED"
    mountpoint -q "$SEED" || mount -o ro "$dev" "$SEED"
    if [ -f "$SEED/authorized_keys" ]; then
        install -d -m 700 /root/.ssh
        install -m 600 "$SEED/authorized_keys" /root/.ssh/authorized_keys
    fi
    if [ -s "$SEED/hostname" ]; then
        name=$(cat "$SEED/hostname")
        echo "$name" > /etc/hostname
        hostname "$name"
    fi
    [ -f "$SEED/hosts" ] && install -m 644 "$SEED/hosts" /etc/hosts
    if [ -d "$SEED/harness" ]; then
        mkdir -p /etc/harness
        cp -a "$SEED/harness/." /etc/harness/
    fi
    umount "$SEED" || true
else
    echo "harness-seed: no seed disk found" >&2
fi
[ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key
