#!/bin/sh
# Make one node's disks: a qcow2 overlay on the cached base image (HX_ROOT_MB > 0: that
# big, grown beyond the base; the harness grows the filesystem once the node is up), a tiny ext4 seed
# disk (label HXSEED) that the image's harness-seed.service applies at boot, and blank
# qcow2 data disks ("path size_mb" lines in HX_DATA); then let the trial's storage pool
# see them (the provider finds domain disks through the pool).
set -eu
mkdir -p "$(dirname "$HX_OVERLAY")"
rm -f "$HX_OVERLAY" "$HX_SEED"
truncate -s 4M "$HX_SEED"
size=""
[ "${HX_ROOT_MB:-0}" -gt 0 ] && size="${HX_ROOT_MB}M"
qemu-img create -q -f qcow2 -F qcow2 -b "$HX_BASE" "$HX_OVERLAY" $size
printf '%s' "${HX_DATA:-}" | while read -r path mb; do
    [ -n "$path" ] || continue
    rm -f "$path"
    qemu-img create -q -f qcow2 "$path" "${mb}M"
done
seed=$(mktemp -d)
trap 'rm -rf "$seed"' EXIT
printf '%s\n' "$HX_AUTHORIZED_KEYS" > "$seed/authorized_keys"
printf '%s\n' "$HX_HOSTNAME" > "$seed/hostname"
printf '%s' "$HX_HOSTS" > "$seed/hosts"
mkdir "$seed/harness"
printf '%s' "$HX_CLUSTER_INFO" > "$seed/harness/cluster-info"
mkfs.ext4 -q -F -O ^has_journal -L HXSEED -d "$seed" "$HX_SEED" 4M
if [ -n "${HX_POOL:-}" ]; then
    virsh -q -c "$HX_URI" pool-refresh "$HX_POOL" >/dev/null
fi
