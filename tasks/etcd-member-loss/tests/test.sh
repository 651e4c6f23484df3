#!/bin/bash
# Verifier for etcd-member-loss; runs on node0. node2 is retired: the cluster must
# be node0 + node1 only, with the 40 shop keys written before node2 went dark. Then node2's
# machine is powered on through its BMC (if it is still off): it must not come back as a
# member, and its etcd must stay down.
export ETCDCTL_API=3
EPS=http://node0:2379,http://node1:2379
ctl() { etcdctl --dial-timeout=2s --command-timeout=4s "$@"; }
healthy() { ctl --endpoints=$EPS endpoint health --cluster >/dev/null 2>&1; }
wait_healthy() { local end=$((SECONDS + 30)); while [ $SECONDS -lt $end ]; do healthy && return 0; sleep 1; done; return 1; }
writes() { ctl --endpoints=http://node0:2379 put /verify/node0 "$1" >/dev/null 2>&1 &&
           ctl --endpoints=http://node1:2379 put /verify/node1 "$1" >/dev/null 2>&1; }
data() { ctl --endpoints=$EPS get --prefix /shop/config/ 2>/dev/null | python3 -c "
import sys
lines = sys.stdin.read().split('\n')
kv = dict(zip(lines[0::2], lines[1::2]))
want = {f'/shop/config/item{i:02d}': f'value-{i:02d}' for i in range(1, 41)}
sys.exit(0 if kv == want else 1)"; }
members_ok() {
  local list names
  list=$(ctl --endpoints=$EPS member list 2>/dev/null) || return 1
  names=$(echo "$list" | awk -F', ' 'NF >= 4 {print $3}' | sort | tr '\n' ' ')
  [ "$names" = "node0 node1 " ] && ! echo "$list" | grep -q node2
}
[ -r /etc/harness/bmc-credentials ] && . /etc/harness/bmc-credentials
bmc() {
  IPMI_PASSWORD="$node2_bmc_password" ipmitool -I "${node2_bmc_interface:-lanplus}" \
    ${node2_bmc_cipher:+-C "$node2_bmc_cipher"} -H "${node2_bmc%:*}" \
    -p "${node2_bmc##*:}" -U "$node2_bmc_user" -E "$@"
}
node2() { ssh -o BatchMode=yes -o ConnectTimeout=5 root@node2 "$@"; }

write=false; members=false; health=false; intact=false; durable=false
peers=false; clients=false; retired=false
writes a && write=true
members_ok && members=true
healthy && health=true
data && intact=true
if $health; then  # (restarts prove nothing about a cluster that is not healthy now)
  ssh node1 systemctl restart etcd >/dev/null 2>&1
  wait_healthy && systemctl restart etcd >/dev/null 2>&1 && wait_healthy && writes b && data \
    && durable=true
fi
! grep -q node2 /etc/default/etcd && ssh node1 '! grep -q node2 /etc/default/etcd' && \
  grep -q '^ETCD_NAME=' /etc/default/etcd && peers=true
! grep -q node2 /etc/default/shop-app && ssh node1 '! grep -q node2 /etc/default/shop-app' && \
  grep -q '^SHOP_ETCD_ENDPOINTS=' /etc/default/shop-app && clients=true

# the hardware team powers node2 on: give its etcd (if it would start) time to try to rejoin
# (while node2 is still a member, it cannot count as retired: no need to power it on)
$members && { bmc chassis power status 2>/dev/null | grep -q 'is on' ||
              bmc chassis power on >/dev/null 2>&1; }
$members && for _ in $(seq 240); do node2 true 2>/dev/null && break; sleep 1; done
if $members && node2 true 2>/dev/null; then
  sleep 10
  node2 '! systemctl is-active --quiet etcd && ! systemctl is-enabled --quiet etcd &&
         ! test -e /var/lib/etcd/default/member' && members_ok && healthy && retired=true
fi

PYTHONPATH="$(dirname "$0")" python3 - \
  "$write" "$members" "$health" "$intact" "$durable" "$peers" "$clients" "$retired" <<'PY'
import sys

import score
write, members, health, intact, durable, peers, clients, retired = (
    v == "true" for v in sys.argv[1:])
checks = [
    {"name": "cluster accepts writes through node0 and node1", "passed": write,
     "phase": "functional"},
    {"name": "dead member node2 removed from the membership (node0 and node1 only)",
     "passed": members, "phase": "functional"},
    {"name": "every listed member is healthy", "passed": health, "phase": "functional"},
    {"name": "all 40 shop keys written before node2 went dark are intact", "passed": intact,
     "phase": "functional"},
    {"name": "cluster healthy, writable and intact after etcd restarts on node1 then node0",
     "passed": durable, "phase": "durability"},
    {"name": "no node2 peer URL left in the etcd configs of node0 and node1", "passed": peers,
     "phase": "cleanup"},
    {"name": "no shop client endpoint left pointing at node2 on node0 and node1",
     "passed": clients, "phase": "cleanup"},
    {"name": "node2 powered on stays retired: etcd not running or enabled, no member data, "
             "membership and health unchanged", "passed": retired, "phase": "cleanup"},
]
score.write(checks)
PY
