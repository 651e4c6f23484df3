#!/usr/bin/env bash
# Build the dmacvicar/libvirt Terraform provider from the Go module proxy into the
# harness's filesystem mirror. Idempotent: does nothing when the binary is already there.
#
# The 0.9 line (module github.com/dmacvicar/terraform-provider-libvirt/v2) is only
# reachable through an exact commit pseudo-version, which the filtered proxy here does
# not serve for any commit we could identify; set LIBVIRT_PROVIDER_V2_PSEUDO to try one
# (built as version LIBVIRT_PROVIDER_V2_VERSION, default 0.9.99). Otherwise the 0.7.6
# tag of the old module path is built (old schema: libvirt_volume/network/domain).
# The module is downloaded, copied out of the read-only module cache and built in place
# so that its own go.mod replace directives apply.
#
# One local patch on 0.7.6 (recorded in the mirror as PATCHED.txt): every state wait
# (network, pool, volume, domain; create and delete) starts after a hard-coded 5 s delay
# and polls at least every 3 s (libvirt/timeout.go), which adds 5-10 s to every VM trial's
# apply and destroy; they are set to 100 ms / 200 ms. And `running = false` defines a domain
# without starting it (0.7.6 started it and destroyed it again): snapshot start restores
# the node into the defined domain instead of booting it.
set -euo pipefail

HARNESS_HOME=${HARNESS_HOME:-$HOME/.cache/harness}
MIRROR="$HARNESS_HOME/providers/registry.terraform.io/dmacvicar/libvirt"
V2_PSEUDO=${LIBVIRT_PROVIDER_V2_PSEUDO:-}
V2_VERSION=${LIBVIRT_PROVIDER_V2_VERSION:-0.9.99}
V1_VERSION=${LIBVIRT_PROVIDER_VERSION:-0.7.6}

V1_PATCH_ID="state-wait-100ms-v1+define-only-v1"
installed() {
  [[ -x "$MIRROR/$1/linux_amd64/terraform-provider-libvirt_v$1" ]] || return 1
  [[ "$1" != "$V1_VERSION" || "$(cat "$MIRROR/$1/linux_amd64/PATCHED.txt" 2>/dev/null)" == "$V1_PATCH_ID" ]]
}

skip() { echo "provider dmacvicar/libvirt $1 already in the mirror ($MIRROR/$1)"; exit 0; }
if [[ -n "$V2_PSEUDO" ]]; then
  installed "$V2_VERSION" && skip "$V2_VERSION"
elif installed "$V1_VERSION"; then
  skip "$V1_VERSION"
fi
command -v go >/dev/null || { echo "go not found: install Go (scripts/setup.sh does)" >&2; exit 1; }

work=$(mktemp -d /tmp/hx-tfp-libvirt.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod GONOSUMDB=github.com/dmacvicar GOPATH="${GOPATH:-$(go env GOPATH)}"

# build MODULE@VERSION as provider version VERSION_NAME; prints the go error on failure
build() {
  local module=$1 modver=$2 version=$3 dir dest json
  dest="$MIRROR/$version/linux_amd64"
  echo "downloading $module@$modver"
  if ! json=$(go mod download -json "$module@$modver" 2>&1); then
    echo "cannot fetch $module@$modver:" >&2
    echo "$json" | sed -n 's/.*"Error": "\(.*\)".*/  \1/p' >&2
    return 1
  fi
  dir=$(echo "$json" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  cp -r "$dir" "$work/src-$version" && chmod -R u+w "$work/src-$version"
  echo "building dmacvicar/libvirt $version with $(go version | cut -d' ' -f3); takes minutes"
  mkdir -p "$dest"
  # the 0.9 tree does not ship its generated schema code (internal/generated): generate it
  if [[ "$version" == "$V1_VERSION" ]]; then
    sed -i -E -e 's/^(\s*resourceStateDelay\s*=\s*).*/\1100 * time.Millisecond/' \
      -e 's/^(\s*resourceStateMinTimeout\s*=\s*).*/\1200 * time.Millisecond/' \
      "$work/src-$version/libvirt/timeout.go"
    grep -cE 'resourceState(Delay|MinTimeout)\s*=\s*[12]00 \* time.Millisecond' \
      "$work/src-$version/libvirt/timeout.go" | grep -qx 2 \
      || { echo "patch did not apply: the provider source changed" >&2; return 1; }
    perl -0pi -e 's/\n\terr = virConn\.DomainCreate\(domain\)\n\tif err != nil \{\n\t\treturn diag\.Errorf\("error creating libvirt domain: %s", err\)\n\t\}\n/\n\tif d.Get("running").(bool) {\n\t\tif err = virConn.DomainCreate(domain); err != nil {\n\t\t\treturn diag.Errorf("error creating libvirt domain: %s", err)\n\t\t}\n\t}\n/' \
      "$work/src-$version/libvirt/resource_libvirt_domain.go"
    grep -q 'if err = virConn.DomainCreate(domain); err != nil' \
      "$work/src-$version/libvirt/resource_libvirt_domain.go" \
      || { echo "patch did not apply: the provider source changed (DomainCreate)" >&2; return 1; }
  fi
  if [[ -d "$work/src-$version/internal/codegen" ]]; then
    (cd "$work/src-$version" && nice -n 15 go generate ./...)
  fi
  (cd "$work/src-$version" && nice -n 15 go build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$dest/terraform-provider-libvirt_v$version.tmp" .)
  mv "$dest/terraform-provider-libvirt_v$version.tmp" "$dest/terraform-provider-libvirt_v$version"
  if [[ "$version" == "$V1_VERSION" ]]; then echo "$V1_PATCH_ID" > "$dest/PATCHED.txt"; fi
  echo "installed $dest/terraform-provider-libvirt_v$version"
}

if [[ -n "$V2_PSEUDO" ]]; then
  if build github.com/dmacvicar/terraform-provider-libvirt/v2 "$V2_PSEUDO" "$V2_VERSION"; then
    exit 0
  fi
  echo "falling back to the old schema, dmacvicar/libvirt $V1_VERSION" >&2
fi
installed "$V1_VERSION" || build github.com/dmacvicar/terraform-provider-libvirt "v$V1_VERSION" "$V1_VERSION"
