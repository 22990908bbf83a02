#!/usr/bin/env bash
# Builds helm (the chart tests: helm lint, helm template, helm install against the e2e's
# kube-apiserver) into test/e2e/.bin/helm from the Go module proxy, pinned by go.mod/go.sum here.
# Skips the build when test/e2e/.bin/.helm-stamp matches a hash of the inputs.
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
  else echo "helm/build.sh: no Go toolchain found (set GO=/path/to/go)" >&2; exit 1
  fi
fi

HELM_VERSION=$(awk '$1 == "helm.sh/helm/v3" { print $2; exit }' "$HERE/go.mod")
[[ $HELM_VERSION =~ ^v3\.[0-9]+\.[0-9]+$ ]] || { echo "helm/build.sh: cannot read the helm version from $HERE/go.mod" >&2; exit 1; }

STAMP_FILE=$BIN_DIR/.helm-stamp
STAMP=$({ (cd "$HERE" && sha256sum build.sh go.mod go.sum); "$GO" env GOVERSION GOOS GOARCH; } | sha256sum | cut -d' ' -f1)

if [[ -z ${FORCE:-} && -f $STAMP_FILE && $(<"$STAMP_FILE") == "$STAMP" && -x $BIN_DIR/helm ]]; then
  echo "helm/build.sh: helm in $BIN_DIR is up to date ($HELM_VERSION)"
  exit 0
fi

mkdir -p "$BIN_DIR"
rm -f "$STAMP_FILE"
start=$(date +%s)
export CGO_ENABLED=0 GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly"
# As helm's Makefile stamps it: the version `helm version` reports, and the Kubernetes version
# `helm template` and `helm lint` assume without a cluster (from the client-go it is built with;
# unset, v1.20, which a chart's kubeVersion constraint refuses).
CLIENT_GO=$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$HERE/go.mod")
[[ $CLIENT_GO =~ ^v0\.([0-9]+)\.[0-9]+$ ]] || { echo "helm/build.sh: cannot read the k8s.io/client-go version from $HERE/go.mod" >&2; exit 1; }
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=${BASH_REMATCH[1]}"
done
echo "helm/build.sh: building helm $HELM_VERSION"
(cd "$HERE" && "$GO" build -p "$GO_BUILD_P" -trimpath -ldflags "$ldflags" -o "$BIN_DIR/helm" helm.sh/helm/v3/cmd/helm)
echo "$STAMP" >"$STAMP_FILE"
echo "helm/build.sh: built helm into $BIN_DIR in $(($(date +%s) - start))s"
