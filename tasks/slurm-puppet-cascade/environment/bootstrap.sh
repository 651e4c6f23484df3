#!/bin/bash
# Per trial: munge everywhere, slurmctld on node0, slurmd on node1/node2, all on the
# Puppet-rendered slurm.conf (MaxJobCount=2 from the change freeze still in Hiera), a
# half-finished package upgrade's *.dpkg-dist files in /etc/slurm, and a finished job that
# already fills the controller's job table (finished jobs stay in it for MinJobAge, 300 s).
set -euo pipefail
me=$(hostname)
cat > /etc/slurm/slurm.conf.dpkg-dist <<'CONF'
# Example slurm.conf shipped by the package upgrade (not in use)
ClusterName=cluster
SlurmctldHost=localhost
ProctrackType=proctrack/cgroup
TaskPlugin=task/affinity,task/cgroup
MaxJobCount=10000
NodeName=localhost CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
printf 'CgroupPlugin=autodetect\nConstrainCores=yes\n' > /etc/slurm/cgroup.conf.dpkg-dist
systemctl start munge
if [ "$me" != node0 ]; then
  systemctl enable --quiet slurmd
  systemctl start slurmd
  exit 0
fi
systemctl enable --quiet slurmctld
systemctl start slurmctld
for _ in $(seq 120); do
  [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$')" = 2 ] && break
  sleep 0.5
done
[ "$(sinfo -h -N -o '%N %t' | grep -c ' idle$')" = 2 ]
timeout 30 srun -N1 -n1 true
