#!/usr/bin/env bash
# Builds metrics-server (metrics.k8s.io through the aggregation layer, for the usage-aware e2e and
# `npm run bench:usage`) into test/e2e/.bin/metrics-server from the Go module proxy, pinned by
# metrics-server/go.mod and go.sum (the `tool` directive). Its own stamp (.stamp-metrics-server)
# so that it never forces a rebuild of the rest of the control plane (build.sh).
#
# Environment: BIN_DIR (output, default test/e2e/.bin), GO_BUILD_P (go build -p, default 2),
#              FORCE=1 (ignore the stamp), GO (go binary, default: go on PATH or /usr/local/go/bin/go).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN_DIR=${BIN_DIR:-$(cd "$HERE/.." && pwd)/.bin}
GO_BUILD_P=${GO_BUILD_P:-2}

if [[ -z ${GO:-} ]]; then
  if command -v go >/dev/null 2>&1; then GO=go
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else echo "build-metrics-server.sh: no Go toolchain found (set GO=/path/to/go)" >&2; exit 1
  fi
fi

STAMP_FILE=$BIN_DIR/.stamp-metrics-server
STAMP=$( (cd "$HERE" && sha256sum build-metrics-server.sh metrics-server/go.mod metrics-server/go.sum
  "$GO" env GOVERSION GOOS GOARCH) | sha256sum | cut -d' ' -f1)

if [[ -z ${FORCE:-} && -f $STAMP_FILE && $(<"$STAMP_FILE") == "$STAMP" && -x $BIN_DIR/metrics-server ]]; then
  echo "build-metrics-server.sh: $BIN_DIR/metrics-server is up to date"
  exit 0
fi

mkdir -p "$BIN_DIR"
rm -f "$STAMP_FILE"
start=$SECONDS
echo "build-metrics-server.sh: building metrics-server (a first build takes a few minutes)"
export CGO_ENABLED=0 GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly"
(cd "$HERE/metrics-server" && "$GO" build -p "$GO_BUILD_P" -trimpath -ldflags "-s -w" \
  -o "$BIN_DIR/metrics-server.tmp" sigs.k8s.io/metrics-server/cmd/metrics-server)
mv "$BIN_DIR/metrics-server.tmp" "$BIN_DIR/metrics-server"
echo "$STAMP" >"$STAMP_FILE"
echo "build-metrics-server.sh: built $BIN_DIR/metrics-server in $((SECONDS - start))s"
