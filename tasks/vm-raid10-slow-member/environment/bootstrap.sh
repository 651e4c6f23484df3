#!/bin/bash
# Per trial: an md RAID10 on vdc..vdf whose fourth member is the vendor's "burn-in"
# device-mapper mapping over vdf (dm-delay: every I/O waits 1 s), re-created at every
# boot by disk-burnin.service before the array is assembled; mdadm.conf's DEVICE line lists
# the members by their current names (the mapping included), so an array whose members
# change and a mdadm.conf that does not follow only show at the next boot.
set -euo pipefail
for d in vdc vdd vde vdf vdg; do [ -b /dev/$d ] || { echo "no /dev/$d" >&2; exit 1; }; done
modprobe dm-delay 2>/dev/null || modprobe dm_delay
mkdir -p /usr/local/sbin /srv/files
cat > /usr/local/sbin/disk-burnin <<'SH'
#!/bin/sh
# Vendor burn-in: route the replacement disk through a throttled mapping while it is tested.
set -e
modprobe dm-delay 2>/dev/null || modprobe dm_delay
# (the disk's first MiB is the burn-in log; the system sees the disk past it)
dev=/dev/vdf
[ -e /dev/mapper/burnin-vdf ] && exit 0
size=$(( $(blockdev --getsz $dev) - 2048 ))
dmsetup create burnin-vdf --table "0 $size delay $dev 2048 ${BURNIN_DELAY_MS:-1000}"
SH
chmod 755 /usr/local/sbin/disk-burnin
cat > /etc/systemd/system/disk-burnin.service <<'UNIT'
[Unit]
Description=Vendor disk burn-in (replacement disk, slot 4)
DefaultDependencies=no
Before=local-fs-pre.target
Wants=local-fs-pre.target
After=systemd-udevd.service systemd-modules-load.service
ConditionPathExists=/dev/vdf

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/disk-burnin

[Install]
WantedBy=local-fs-pre.target
UNIT
systemctl daemon-reload
systemctl enable disk-burnin.service
BURNIN_DELAY_MS=0 /usr/local/sbin/disk-burnin  # built unthrottled, throttled at the end
mdadm --create /dev/md/files --run --quiet --level=10 --raid-devices=4 --metadata=1.2 \
  --name=files --homehost=any --assume-clean /dev/vdc /dev/vdd /dev/vde /dev/mapper/burnin-vdf
mkfs.ext4 -q -L FILES /dev/md/files
uuid=$(mdadm --detail /dev/md/files | awk '/UUID/ {print $3}')
cat > /etc/mdadm/mdadm.conf <<CONF
# mdadm.conf (vendor maintenance: members pinned to the burn-in slot)
HOMEHOST <ignore>
DEVICE /dev/vdc /dev/vdd /dev/vde /dev/mapper/burnin-vdf
ARRAY /dev/md/files metadata=1.2 UUID=$uuid name=files
MAILADDR root
CONF
sed -i '\#/srv/files#d' /etc/fstab
echo 'LABEL=FILES /srv/files ext4 defaults,nofail,x-systemd.device-timeout=60 0 2' >> /etc/fstab
systemctl daemon-reload
mount /srv/files
mkdir -p /srv/files/projects
for i in 1 2 3 4 5 6; do
  head -c $((200000 + RANDOM)) /dev/urandom > /srv/files/projects/build-$i.tar
done
(cd /srv/files && find projects -type f | sort | xargs sha256sum) > /root/.files-sums
chmod 600 /root/.files-sums
cat > /etc/systemd/system/filesd.service <<'UNIT'
[Unit]
Description=file share (/srv/files over HTTP on :8080)
RequiresMountsFor=/srv/files

[Service]
ExecStart=/usr/bin/python3 -m http.server 8080 --directory /srv/files

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now filesd
sync
dmsetup suspend burnin-vdf
dmsetup reload burnin-vdf --table "$(dmsetup table burnin-vdf | awk '{print $1, $2, $3, $4, $5}') 1000"
dmsetup resume burnin-vdf
