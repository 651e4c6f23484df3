#!/bin/bash
# The fourth member is /dev/mapper/burnin-vdf, a dm-delay mapping (1 s per I/O) that the
# vendor's disk-burnin.service re-creates at every boot. Take it out, rebuild its mirror on
# the blank disk, retire the mapping and its unit, and make mdadm.conf describe the array
# by UUID over any disk, so the next assembly finds it.
set -euo pipefail
MD=/dev/md/files
SLOW=/dev/mapper/burnin-vdf
systemctl disable disk-burnin.service
# (out first: every write would wait for it; its mirror vde has the data, and the new
# disk is rebuilt from it)
mdadm "$MD" --fail "$SLOW"
mdadm "$MD" --remove "$SLOW"
echo 100000 > /proc/sys/dev/raid/speed_limit_min  # rebuild at full speed, busy or not
mdadm "$MD" --add /dev/vdg
sleep 1
mdadm --wait "$MD" || true
mdadm --zero-superblock "$SLOW"
udevadm settle
dmsetup remove --retry burnin-vdf
wipefs -a /dev/vdf >/dev/null
uuid=$(mdadm --detail "$MD" | awk '/UUID/ {print $3}')
cat > /etc/mdadm/mdadm.conf <<CONF
HOMEHOST <ignore>
DEVICE partitions
ARRAY /dev/md/files metadata=1.2 UUID=$uuid name=files
MAILADDR root
CONF
mdadm --detail "$MD"
