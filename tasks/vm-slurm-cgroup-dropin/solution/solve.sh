#!/bin/bash
# Jobs with several tasks die with "fork: Resource temporarily unavailable" (slurmd.log; the
# kernel logs "fork rejected by pids controller in /system.slice/slurmd.service"): every
# job's processes live in slurmd's cgroup (proctrack/linuxproc), and a maintenance drop-in
# caps it at TasksMax=10. The drop-in is written again at every boot by the enabled
# slurm-node-prep.service from SLURMD_TASKS_MAX in /etc/default/slurm-node-prep. Retire the
# setting (the unit's other duties stay), remove the drop-in, reload, restart slurmd.
set -euo pipefail
systemctl cat slurmd | grep -n TasksMax
sed -i '/^# MNT-4471/,/^SLURMD_TASKS_MAX=/d' /etc/default/slurm-node-prep
! grep -q SLURMD_TASKS_MAX /etc/default/slurm-node-prep
rm -f /etc/systemd/system/slurmd.service.d/50-site.conf
rmdir /etc/systemd/system/slurmd.service.d 2>/dev/null || true
systemctl daemon-reload
systemctl restart slurm-node-prep
[ ! -e /etc/systemd/system/slurmd.service.d/50-site.conf ]
systemctl restart slurmd
[ "$(systemctl show -p TasksMax --value slurmd)" = infinity ]
for _ in $(seq 60); do
  [ "$(sinfo -h -N -n node0 -o '%t')" = idle ] && break
  sleep 1
done
timeout 90 srun -n4 -t2 sh -c 'sleep 1; hostname'
