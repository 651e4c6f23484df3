#!/bin/bash
# Per trial: a one-node Slurm cluster (slurmctld, slurmd and munge on node0, every job's
# processes in slurmd's cgroup: proctrack/linuxproc) and a "maintenance" drop-in that caps
# slurmd's cgroup at a handful of tasks (TasksMax, the pids controller). The drop-in is
# written again at every boot by slurm-node-prep.service, an enabled oneshot that otherwise
# only prepares directories, from a setting left in /etc/default/slurm-node-prep.
set -euo pipefail
[ "$(hostname)" = node0 ]
[ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
mkdir -p /etc/slurm
cat > /etc/slurm/slurm.conf <<'CONF'
# slurm.conf for the lab's one-node batch cluster
ClusterName=lab
SlurmctldHost=node0
SlurmUser=slurm
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/lib/slurm/slurmd
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=node0 CPUs=4 State=UNKNOWN
PartitionName=batch Nodes=ALL Default=YES MaxTime=60 State=UP
CONF
chmod 644 /etc/slurm/slurm.conf
cat > /usr/local/sbin/slurm-node-prep <<'SH'
#!/bin/sh
# slurm-node-prep: gets this node ready for the Slurm daemons at boot (spool and log
# directories, munge key ownership) and applies the site's systemd settings for slurmd
# from /etc/default/slurm-node-prep.
set -e
install -d -o slurm -g slurm -m 755 /var/log/slurm /var/lib/slurm/slurmctld
install -d -m 755 /var/lib/slurm/slurmd
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
if [ -n "${SLURMD_TASKS_MAX:-}" ]; then
  mkdir -p /etc/systemd/system/slurmd.service.d
  printf '# written by slurm-node-prep (site settings, /etc/default/slurm-node-prep)\n[Service]\nTasksMax=%s\n' \
    "$SLURMD_TASKS_MAX" > /etc/systemd/system/slurmd.service.d/50-site.conf
  systemctl daemon-reload
fi
SH
chmod 755 /usr/local/sbin/slurm-node-prep
cat > /etc/default/slurm-node-prep <<'CONF'
# Site settings for slurm-node-prep (applied at every boot).
# MNT-4471 scratch maintenance: keep runaway jobs from forking the node to death while
# /scratch is read-only. Until the end of the maintenance window.
SLURMD_TASKS_MAX=10
CONF
cat > /etc/systemd/system/slurm-node-prep.service <<'UNIT'
[Unit]
Description=Prepare the node for the Slurm daemons
After=local-fs.target
Before=munge.service slurmctld.service slurmd.service

[Service]
Type=oneshot
RemainAfterExit=yes
EnvironmentFile=-/etc/default/slurm-node-prep
ExecStart=/usr/local/sbin/slurm-node-prep

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --quiet slurm-node-prep munge slurmctld slurmd
systemctl start slurm-node-prep
[ -f /etc/systemd/system/slurmd.service.d/50-site.conf ]
systemctl start munge
systemctl start slurmctld slurmd
for _ in $(seq 120); do
  [ "$(sinfo -h -N -o '%t' 2>/dev/null)" = idle ] && break
  sleep 0.5
done
sinfo -N
