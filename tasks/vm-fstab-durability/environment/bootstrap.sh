#!/bin/bash
# Per trial: a loop-mounted data volume for reportd whose fstab line points at a file that
# does not exist (a typo from the last maintenance) and a service that was disabled. The
# runtime-only fix (mount by hand, start the service) does not survive a reboot.
set -euo pipefail
mkdir -p /var/lib/reportd /srv
if [ ! -e /srv/reportd.img ]; then
  truncate -s 64M /srv/reportd.img
  mkfs.ext4 -q -L REPORTD /srv/reportd.img
  mount -o loop /srv/reportd.img /var/lib/reportd
  mkdir -p /var/lib/reportd/reports
  for m in 08 09 10; do
    printf 'month,requests\n2026-%s,%d\n' "$m" "$((RANDOM + 1000))" \
      > "/var/lib/reportd/reports/2026-$m.csv"
  done
  sha256sum /var/lib/reportd/reports/*.csv | awk '{print $1}' > /root/.reportd-sums
  chmod 600 /root/.reportd-sums
  umount /var/lib/reportd
fi
cat > /usr/local/bin/reportd <<'SH'
#!/bin/bash
# Refuses to run unless its data volume is mounted; writes a heartbeat every 2 s.
mountpoint -q /var/lib/reportd || { echo "reportd: /var/lib/reportd is not mounted" >&2; exit 1; }
while true; do date +%s > /var/lib/reportd/heartbeat; sleep 2; done
SH
chmod 755 /usr/local/bin/reportd
cat > /etc/systemd/system/reportd.service <<'UNIT'
[Unit]
Description=report daemon (data on /var/lib/reportd)
RequiresMountsFor=/var/lib/reportd

[Service]
ExecStart=/usr/local/bin/reportd

[Install]
WantedBy=multi-user.target
UNIT
sed -i '\#/var/lib/reportd#d' /etc/fstab
echo '/srv/report.img /var/lib/reportd ext4 loop,nofail 0 0' >> /etc/fstab
systemctl daemon-reload
systemctl disable reportd 2>/dev/null || true
systemctl start reportd 2>/dev/null || true
