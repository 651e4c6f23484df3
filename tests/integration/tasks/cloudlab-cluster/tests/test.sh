#!/bin/bash
# Runs on the primary (node0).
ok() { if "$@" >/dev/null 2>&1; then echo true; else echo false; fi; }
remote() { ssh -o BatchMode=yes -o ConnectTimeout=10 root@node1 "$@"; }
. /etc/harness/bmc-credentials
oob() {  # out-of-band, IPMI 1.5, over the management network
    IPMI_PASSWORD="$node1_bmc_password" ipmitool -I lan -H "${node1_bmc%:*}" \
        -U "$node1_bmc_user" -E chassis power status | grep -q 'is on'
}
. /opt/syscraft/cloudlab-cluster-info.sh
inband() {  # each node finds its own BMC in-band (ipmitool lan print), where the BMC is
    [ "$(harness_inband_bmc_ip)" = "${node0_bmc%:*}" ] \
        && [ "$(syscraft_discover_bmc_ip)" = "${node0_bmc%:*}" ] \
        && [ "$(remote 'ipmitool lan print' | harness_lan_print_ip)" = "${node1_bmc%:*}" ] \
        && [ "$(syscraft_remote_discover_bmc_ip node1 '-o ConnectTimeout=10')" = "${node1_bmc%:*}" ]
}
cat > /logs/verifier/reward.json <<JSON
{"checks": [
  {"name": "bootstrap ran on the primary", "passed": $(ok grep -Eq '^node0 peer_bmc=\[[0-9.]+\]' /root/bootstrap-ran)},
  {"name": "bootstrap reached node1 over root ssh", "passed": $(ok test "$(remote cat /root/from-primary)" = node0)},
  {"name": "bootstrap did not run on node1", "passed": $(ok remote test ! -e /root/bootstrap-ran)},
  {"name": "node1 is ready", "passed": $(ok remote test -s /root/ready)},
  {"name": "in-band IPMI on node0", "passed": $(ok ipmitool mc info)},
  {"name": "in-band BMC discovery on node0 and node1", "passed": $(ok inband)},
  {"name": "node1's BMC answers node0 out-of-band", "passed": $(ok oob)}
]}
JSON
