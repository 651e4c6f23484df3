#!/usr/bin/env bash
# sshd on this machine, for libvirt reached as qemu+ssh://root@localhost/system (a libvirt
# "remote" host in tests and in a hosts file): openssh-server installed and started when
# nothing listens on port 22; a harness key ($HARNESS_HOME/ssh/id_ed25519) that root accepts
# from this machine only (from="127.0.0.1,::1"), and localhost's host key in
# $HARNESS_HOME/ssh/known_hosts. Idempotent; run by scripts/setup.sh, as root or with sudo.
# The URI to use:  qemu+ssh://root@localhost/system?keyfile=$HARNESS_HOME/ssh/id_ed25519&no_tty=1
set -euo pipefail
HARNESS_HOME=${HARNESS_HOME:-$HOME/.cache/harness}
SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
listening() { ss -ltnH 2>/dev/null | awk '{print $4}' | grep -qE '(^|:)22$'; }
if listening; then
  echo "sshd is listening on port 22"
else
  if ! dpkg-query -W -f='${Status}' openssh-server 2>/dev/null | grep -q "ok installed"; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      openssh-server >/dev/null
  fi
  $SUDO ssh-keygen -A >/dev/null
  if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
    $SUDO systemctl enable --now ssh >/dev/null 2>&1 || $SUDO systemctl start ssh
  else
    $SUDO mkdir -p /run/sshd
    $SUDO /usr/sbin/sshd
  fi
  for _ in $(seq 20); do listening && break; sleep 0.25; done
  listening && echo "sshd started" || { echo "sshd did not start" >&2; exit 1; }
fi
mkdir -p "$HARNESS_HOME/ssh" && chmod 700 "$HARNESS_HOME/ssh"
key="$HARNESS_HOME/ssh/id_ed25519"
[[ -f $key ]] || ssh-keygen -q -t ed25519 -N "" -C "harness@$(hostname)" -f "$key"
line="from=\"127.0.0.1,::1\",no-agent-forwarding,no-X11-forwarding $(cat "$key.pub")"
$SUDO mkdir -p /root/.ssh && $SUDO chmod 700 /root/.ssh
if ! $SUDO grep -qF "$(cat "$key.pub")" /root/.ssh/authorized_keys 2>/dev/null; then
  echo "$line" | $SUDO tee -a /root/.ssh/authorized_keys >/dev/null
  $SUDO chmod 600 /root/.ssh/authorized_keys
  echo "root accepts $key from this machine"
fi
kh="$HARNESS_HOME/ssh/known_hosts"
for _ in $(seq 20); do  # a just-started sshd may not answer yet
  ssh-keyscan -t ed25519 localhost 127.0.0.1 127.0.0.2 2>/dev/null > "$kh.tmp" || true
  [[ -s $kh.tmp ]] && break
  sleep 0.25
done
mv "$kh.tmp" "$kh"
# libvirt's qemu+ssh (the ssh binary) checks ~/.ssh/known_hosts (its known_hosts= parameter
# is for the libssh transports), and so does the Terraform provider's Go client, which asks
# for another key type first: every key of localhost and of 127.0.0.2 (the tests' stand-in
# for another machine: qemu+ssh://root@127.0.0.2/system) goes there, once
mkdir -p ~/.ssh && chmod 700 ~/.ssh
for name in localhost 127.0.0.2; do
  if [[ $(ssh-keygen -F "$name" -f ~/.ssh/known_hosts 2>/dev/null | grep -vc '^#') -lt 3 ]]; then
    keys=$(ssh-keyscan "$name" 2>/dev/null | grep "^$name ") || true
    if [[ -n $keys ]]; then
      ssh-keygen -R "$name" -f ~/.ssh/known_hosts >/dev/null 2>&1 || true
      echo "$keys" >> ~/.ssh/known_hosts
    fi
  fi
done
ssh -i "$key" -o UserKnownHostsFile="$kh" -o BatchMode=yes root@localhost true
echo "ssh root@localhost with the harness key: ok"
