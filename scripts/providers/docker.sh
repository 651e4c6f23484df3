#!/usr/bin/env bash
# Build the kreuzwerker/docker Terraform provider from the Go module proxy into the
# harness's filesystem mirror. The provider's go.mod declares the old module path
# github.com/terraform-providers/terraform-provider-docker, so a tiny wrapper module
# requires that path and replaces it by the kreuzwerker repository at a commit
# pseudo-version. Idempotent: does nothing when the binary is already in the mirror.
set -euo pipefail

HARNESS_HOME=${HARNESS_HOME:-$HOME/.cache/harness}
VERSION=${DOCKER_PROVIDER_VERSION:-4.6.0}
PSEUDO=${DOCKER_PROVIDER_PSEUDO:-v0.0.0-20260916201441-96d331c98ff4}
DEST="$HARNESS_HOME/providers/registry.terraform.io/kreuzwerker/docker/$VERSION/linux_amd64"
BIN="$DEST/terraform-provider-docker_v$VERSION"

if [[ -x "$BIN" ]]; then
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

replace github.com/terraform-providers/terraform-provider-docker => github.com/kreuzwerker/terraform-provider-docker $PSEUDO
MOD
echo "building kreuzwerker/docker $VERSION ($PSEUDO) with $(go version | cut -d' ' -f3); takes several minutes"
mkdir -p "$DEST"
(cd "$work" && GOFLAGS=-mod=mod nice -n 10 go build -trimpath -ldflags "-s -w -X main.version=$VERSION" \
  -o "$BIN.tmp" github.com/terraform-providers/terraform-provider-docker)
mv "$BIN.tmp" "$BIN"
echo "installed $BIN"
