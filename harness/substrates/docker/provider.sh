#!/usr/bin/env bash
# Build the kreuzwerker/docker Terraform provider from the Go module proxy into the
# harness's filesystem mirror. The provider's go.mod declares the old module path
# github.com/terraform-providers/terraform-provider-docker, so a tiny wrapper module
# requires that path and replaces it by the kreuzwerker repository at a commit
# pseudo-version. Idempotent: does nothing when the binary is already in the mirror.
#
# One local patch (recorded in the mirror as PATCHED.txt): the network resource polls with
# a hard-coded 2 s delay and 5 s minimum wait after create and before delete, which costs
# every trial ~4 s. The delay before the first poll is set to none (a bridge network shows
# all its fields at once after create, and delete removes it at the first poll once its
# containers are gone), the wait between polls to the 100 ms the provider uses elsewhere.
set -euo pipefail

HARNESS_HOME=${HARNESS_HOME:-$HOME/.cache/harness}
VERSION=${DOCKER_PROVIDER_VERSION:-4.6.0}
PSEUDO=${DOCKER_PROVIDER_PSEUDO:-v0.0.0-20260916201441-96d331c98ff4}
DEST="$HARNESS_HOME/providers/registry.terraform.io/kreuzwerker/docker/$VERSION/linux_amd64"
BIN="$DEST/terraform-provider-docker_v$VERSION"

PATCH_ID="network-refresh-nodelay-v2"
if [[ -x "$BIN" && "$(cat "$DEST/PATCHED.txt" 2>/dev/null)" == "$PATCH_ID" ]]; then
  echo "provider kreuzwerker/docker $VERSION already in the mirror ($BIN)"
  exit 0
fi
command -v go >/dev/null || { echo "go not found: install Go (scripts/setup.sh does)" >&2; exit 1; }

work=$(mktemp -d /tmp/hx-tfp-docker.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat >"$work/go.mod" <<MOD
module harness.local/tfprovider-docker

go 1.24

require github.com/terraform-providers/terraform-provider-docker v0.0.0

replace github.com/terraform-providers/terraform-provider-docker => ./src
MOD
mod="github.com/kreuzwerker/terraform-provider-docker@$PSEUDO"
GOFLAGS=-mod=mod go mod download "$mod"
srcdir=$(GOFLAGS=-mod=mod go mod download -json "$mod" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
cp -r "$srcdir" "$work/src" && chmod -R u+w "$work/src"
funcs="$work/src/internal/provider/resource_docker_network_funcs.go"
sed -i -E -e 's/^(\s*network(Read|Remove)RefreshWaitBeforeRefreshes\s*=\s*).*/\1100 * time.Millisecond/' \
  -e 's/^(\s*network(Read|Remove)RefreshDelay\s*=\s*).*/\10/' "$funcs"
grep -cE 'RefreshWaitBeforeRefreshes\s*= 100 \* time.Millisecond$' "$funcs" | grep -qx 2 &&
  grep -cE 'RefreshDelay\s*= 0$' "$funcs" | grep -qx 2 \
  || { echo "patch did not apply: the provider source changed" >&2; exit 1; }
cp "$work/src/go.sum" "$work/go.sum"
echo "building kreuzwerker/docker $VERSION ($PSEUDO) with $(go version | cut -d' ' -f3); takes several minutes"
mkdir -p "$DEST"
(cd "$work" && GOFLAGS=-mod=mod nice -n 10 go build -trimpath -ldflags "-s -w -X main.version=$VERSION" \
  -o "$BIN.tmp" github.com/terraform-providers/terraform-provider-docker)
mv "$BIN.tmp" "$BIN"
echo "$PATCH_ID" > "$DEST/PATCHED.txt"
echo "installed $BIN"
