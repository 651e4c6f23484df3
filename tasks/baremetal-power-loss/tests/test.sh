#!/bin/bash
# Verifier for baremetal-power-loss (runs on node0): power state through the BMC, SSH,
# a fresh boot since the outage, the service, and the credentials left in place.
ok() { if "$@" >/dev/null 2>&1; then echo true; else echo false; fi; }
remote() { ssh -o BatchMode=yes -o ConnectTimeout=10 root@node1 "$@"; }
# a machine that has just booted may start sshd a little after its other services
ssh_up() { for _ in 1 2 3; do remote true && return 0; sleep 2; done; return 1; }
power_on() {
  IPMI_PASSWORD="$node1_bmc_password" ipmitool -I lan -H "${node1_bmc%:*}" \
    -p "${node1_bmc##*:}" -U "$node1_bmc_user" -E chassis power status | grep -q 'is on'
}
fresh_boot() {
  before=$(cat /var/lib/rack-drill/node1-boot-before) && now=$(remote cat /proc/sys/kernel/random/boot_id) \
    && [ -n "$before" ] && [ -n "$now" ] && [ "$before" != "$now" ]
}
creds_kept() {
  [ "$(stat -c %a /etc/harness/bmc-credentials)" = 600 ] \
    && ! grep -rlsF "${node1_bmc_password:-unset-password}" /root /tmp /home /etc /var/tmp \
         --exclude=bmc-credentials
}
[ -r /etc/harness/bmc-credentials ] && . /etc/harness/bmc-credentials
cat > /logs/verifier/reward.json <<JSON
{"checks": [
  {"name": "node1's BMC reports chassis power on", "passed": $(ok power_on), "phase": "functional"},
  {"name": "node1 answers root SSH from node0", "passed": $(ok ssh_up), "phase": "functional"},
  {"name": "node1 booted afresh since the outage", "passed": $(ok fresh_boot), "phase": "functional"},
  {"name": "inventory API on node1 answers", "passed": $(ok sh -c 'curl -sf --max-time 5 http://node1:8080/ | grep -q node1'), "phase": "functional"},
  {"name": "BMC credentials stay in the root-only file", "passed": $(ok creds_kept), "phase": "cleanup"}
]}
JSON
