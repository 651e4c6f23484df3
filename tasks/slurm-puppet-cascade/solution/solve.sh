#!/bin/bash
# MaxJobCount=2 comes from Hiera (the change freeze's slurm::max_job_count), rendered into
# slurm.conf by Puppet at every boot. Fix the source of truth (the same code is on every
# node), apply it everywhere (Puppet restarts the daemons), and drop the dpkg residue.
set -euo pipefail
for n in node0 node1 node2; do
  ssh -n $n 'set -e
    sed -i -e "/^# CHG-5120/,/^slurm::max_job_count:/d" /etc/puppet/code/environments/production/data/common.yaml
    ! grep -q max_job_count /etc/puppet/code/environments/production/data/common.yaml
    rm -f /etc/slurm/*.dpkg-dist /etc/slurm/*.dpkg-old
    puppet apply --logdest /dev/null /etc/puppet/code/environments/production/manifests/site.pp
    ! grep -qi "^MaxJobCount" /etc/slurm/slurm.conf' &
done
wait
for _ in $(seq 60); do
  [ "$(sinfo -h -N -o '%N %t' | grep -cE ' (idle|mix)$')" = 2 ] && break
  sleep 1
done
scontrol show config | grep -i MaxJobCount
timeout 60 srun -N1 -n1 hostname
