#!/usr/bin/env bash
# Build the harness's own CloudLab Terraform provider (Go, terraform-plugin-framework;
# source in ./provider next to this script) into the harness's filesystem mirror as
#   registry.terraform.io/harness/cloudlab/0.1.0/<os>_<arch>/terraform-provider-cloudlab_v0.1.0
# so that a root with `source = "harness/cloudlab"` finds it through terraform.rc.
#
# Idempotent: a sha256 over the provider's sorted *.go files, go.mod and go.sum is recorded
# next to the binary (SOURCE_SHA256); when it matches the source, nothing is rebuilt.
# CLOUDLAB_PROVIDER_FORCE=1 rebuilds anyway. Go modules come from the Go module proxy
# (or the module cache); the build does not modify go.mod/go.sum (-mod=readonly).
set -euo pipefail

HARNESS_HOME=${HARNESS_HOME:-$HOME/.cache/harness}
VERSION=0.1.0
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/provider"
case "$(uname -m)" in
  x86_64 | amd64) ARCH=amd64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  *) echo "unsupported machine $(uname -m) for the cloudlab provider" >&2; exit 1 ;;
esac
DEST="$HARNESS_HOME/providers/registry.terraform.io/harness/cloudlab/$VERSION/linux_$ARCH"
BIN="$DEST/terraform-provider-cloudlab_v$VERSION"

[[ -f "$SRC/go.mod" ]] || { echo "provider source not found: $SRC/go.mod" >&2; exit 1; }
hash=$(cd "$SRC" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 \
  | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)

if [[ -z "${CLOUDLAB_PROVIDER_FORCE:-}" && -x "$BIN" && "$(cat "$DEST/SOURCE_SHA256" 2>/dev/null)" == "$hash" ]]; then
  echo "provider harness/cloudlab $VERSION already in the mirror, source unchanged ($BIN)"
  exit 0
fi
command -v go >/dev/null || { echo "go not found: install Go (scripts/setup.sh does)" >&2; exit 1; }

echo "building harness/cloudlab $VERSION from $SRC (source sha256 ${hash:0:12}) with $(go version | cut -d' ' -f3)"
mkdir -p "$DEST"
rm -f "$BIN.tmp"
if ! (cd "$SRC" && GOFLAGS="-mod=readonly -buildvcs=false" nice -n 10 go build -trimpath \
  -ldflags "-s -w -X main.version=$VERSION" -o "$BIN.tmp" .); then
  rm -f "$BIN.tmp"
  echo "building the cloudlab provider failed (see the go errors above)" >&2
  exit 1
fi
mv "$BIN.tmp" "$BIN"
echo "$hash" > "$DEST/SOURCE_SHA256"
echo "installed $BIN"
