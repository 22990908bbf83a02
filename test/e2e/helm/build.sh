#!/usr/bin/env bash
# Builds helm (the chart tests: helm lint, helm template, helm install against the e2e's
# kube-apiserver) into test/e2e/.bin/helm from the Go module proxy, pinned by go.mod/go.sum here.
# Skips the build when test/e2e/.bin/.helm-stamp matches a hash of the inputs.
#
# Environment: KUBE (the control plane's minor, see ../control-plane/release.sh), BIN_DIR (output,
#              default test/e2e/.bin, or test/e2e/.bin/vKUBE), GO_BUILD_P (go build -p, default 2),
#              FORCE=1 (ignore the stamp), GO (go binary, default: go on PATH or /usr/local/go/bin/go).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The control plane's release (KUBE): its binary folder, and the minor helm assumes without a cluster.
CONTROL_PLANE=$(cd "$HERE/../control-plane" && pwd)
# shellcheck source=../control-plane/release.sh
HERE=$CONTROL_PLANE source "$CONTROL_PLANE/release.sh"
BIN_DIR=${BIN_DIR:-$DEFAULT_BIN_DIR}
GO_BUILD_P=${GO_BUILD_P:-2}

if [[ -z ${GO:-} ]]; then
  if command -v go >/dev/null 2>&1; then GO=go
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else echo "helm/build.sh: no Go toolchain found (set GO=/path/to/go)" >&2; exit 1
  fi
fi

HELM_VERSION=$(awk '$1 == "helm.sh/helm/v3" { print $2; exit }' "$HERE/go.mod")
[[ $HELM_VERSION =~ ^v3\.[0-9]+\.[0-9]+$ ]] || { echo "helm/build.sh: cannot read the helm version from $HERE/go.mod" >&2; exit 1; }

# The Kubernetes version `helm template` and `helm lint` assume without a cluster (helm's Makefile
# stamps its client-go's, v1.20 when unset): the e2e control plane's, so that the chart's
# kubeVersion constraint is checked against the release the tests run, not helm's own client-go.
# A pre-release (v1.38.0-beta.0) counts as its minor.
K8S_VERSION=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$CONTROL_PLANE/$MODFILE")
[[ $K8S_VERSION =~ ^v1\.([0-9]+)\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] || { echo "helm/build.sh: cannot read the k8s.io/kubernetes version from $CONTROL_PLANE/$MODFILE" >&2; exit 1; }
K8S_MINOR=${BASH_REMATCH[1]}

STAMP_FILE=$BIN_DIR/.helm-stamp
STAMP=$({ (cd "$HERE" && sha256sum build.sh go.mod go.sum); echo "kubernetes $K8S_VERSION"; "$GO" env GOVERSION GOOS GOARCH; } | sha256sum | cut -d' ' -f1)

if [[ -z ${FORCE:-} && -f $STAMP_FILE && $(<"$STAMP_FILE") == "$STAMP" && -x $BIN_DIR/helm ]]; then
  echo "helm/build.sh: helm in $BIN_DIR is up to date ($HELM_VERSION)"
  exit 0
fi

mkdir -p "$BIN_DIR"
rm -f "$STAMP_FILE"
start=$(date +%s)
export CGO_ENABLED=0 GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly"
# As helm's Makefile stamps it: the version `helm version` reports; the Kubernetes minor is the
# control plane's (above).
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$K8S_MINOR"
done
echo "helm/build.sh: building helm $HELM_VERSION"
(cd "$HERE" && "$GO" build -p "$GO_BUILD_P" -trimpath -ldflags "$ldflags" -o "$BIN_DIR/helm" helm.sh/helm/v3/cmd/helm)
echo "$STAMP" >"$STAMP_FILE"
echo "helm/build.sh: built helm into $BIN_DIR in $(($(date +%s) - start))s"
