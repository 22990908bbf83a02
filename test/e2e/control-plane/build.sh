#!/usr/bin/env bash
# Builds the real control plane for the end-to-end tests into test/e2e/.bin/:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, kubemark (the
#   kubelet's own code as kubemark's hollow node, over a fake runtime)
# and promtool (the alert rules' checker), from the Go module proxy (pinned by go.mod/go.sum
# here, in etcd/ and in promtool/; kwok by version).
# Skips the build when test/e2e/.bin/.stamp matches a hash of the inputs.
#
# The Kubernetes release is go.mod's (the newest supported minor) unless KUBE names another minor
# pinned in versions/ (KUBE=1.35 → versions/1.35.mod/.sum, built with `go build -modfile`, into
# test/e2e/.bin/v1.35/ unless BIN_DIR says otherwise): the version matrix of `npm run test:compat`.
# A release without cmd/kubemark (1.38) gets the kubemark of the newest pinned minor below it that has
# one, within the kubelet's version skew (release.sh's KUBELET_MODFILE: 1.38 → go.mod's v1.37.2).
#
# Environment: KUBE (a minor in versions/, default: go.mod's),
#              BIN_DIR (output, default test/e2e/.bin, or test/e2e/.bin/vKUBE), GO_BUILD_P (go build -p, default 2),
#              FORCE=1 (ignore the stamp), GO (go binary, default: go on PATH or /usr/local/go/bin/go),
#              PROGRESS_EVERY (seconds between "still building" lines, default 30).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=release.sh
source "$HERE/release.sh"
BIN_DIR=${BIN_DIR:-$DEFAULT_BIN_DIR}
GO_BUILD_P=${GO_BUILD_P:-2}
KWOK_VERSION=v0.7.0
PROGRESS_EVERY=${PROGRESS_EVERY:-30}
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubemark kwok promtool)

if [[ -z ${GO:-} ]]; then
  if command -v go >/dev/null 2>&1; then GO=go
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else echo "build.sh: no Go toolchain found (set GO=/path/to/go)" >&2; exit 1
  fi
fi

# The Kubernetes version is the one the go.mod requires (vX.Y.Z); the ldflags stamp it into
# the binaries (what /version and `kubectl version` report), as hack/lib/version.sh does.
# required_version MODULE GO.MOD: the version a go.mod requires (block or single-line form).
required_version() {
  awk -v m="$1" '$1 == "replace" || $2 == "=>" || $1 ~ /^\/\// { next }
    { for (i = 1; i < NF; i++) if ($i == m) { print $(i + 1); exit } }' "$2"
}
# kubernetes_version MODFILE: the k8s.io/kubernetes version a module file pins (v1.37.2, v1.38.0-beta.0).
kubernetes_version() {
  local version
  version=$(required_version k8s.io/kubernetes "$HERE/$1")
  if [[ ! $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]]; then
    echo "build.sh: cannot read the k8s.io/kubernetes version from $HERE/$1" >&2
    return 1
  fi
  echo "$version"
}
# A release whose module file names a newer toolchain (`toolchain go1.27.3`, written by pin.sh under
# GOTOOLCHAIN) builds its Kubernetes binaries, and only those, with GOTOOLCHAIN set to it: the go
# command fetches that Go from the module proxy (this machine's GOTOOLCHAIN is local).
toolchain_of() { awk '$1 == "toolchain" { print $2; exit }' "$HERE/$1"; }
K8S_VERSION=$(kubernetes_version "$MODFILE")
K8S_TOOLCHAIN=$(toolchain_of "$MODFILE")

# Each Kubernetes main's package: cmd/<name>, or this minor's own (release.sh's main_pkg). kubemark
# comes from KUBELET_MODFILE's release when this one has none (release.sh).
MAINS=()
KUBELET_MAIN=
for name in kube-apiserver kube-controller-manager kube-scheduler kubectl kubemark; do
  pkg=$(main_pkg "$name")
  if [[ -n $pkg ]]; then MAINS+=("$pkg"); continue; fi
  if [[ $name == kubemark && -n $KUBELET_MODFILE ]]; then
    KUBELET_VERSION=$(kubernetes_version "$KUBELET_MODFILE")
    KUBELET_TOOLCHAIN=$(toolchain_of "$KUBELET_MODFILE")
    KUBELET_MAIN=$(main_pkg kubemark "$KUBELET_MODFILE")
    echo "build.sh: $K8S_VERSION has no kubemark (its module file says: absent): the hollow kubelet is kubemark $KUBELET_VERSION ($KUBELET_MODFILE), the newest pinned minor that has one, within the kubelet's version skew (up to 3 minors older than kube-apiserver)" >&2
    continue
  fi
  echo "build.sh: $K8S_VERSION has no $name (its module file says: absent); the tests that need it cannot run on it" >&2
  kept=()
  for b in "${BINARIES[@]}"; do [[ $b == "$name" ]] || kept+=("$b"); done
  BINARIES=("${kept[@]}")
done

# Everything that decides what gets built.
stamp_inputs() {
  (cd "$HERE" && sha256sum build.sh release.sh "$MODFILE" "$MODSUM" etcd/go.mod etcd/go.sum etcd/main.go promtool/go.mod promtool/go.sum \
    "${MAINS[@]/%//main.go}" ${KUBELET_MAIN:+"$KUBELET_MODFILE" "${KUBELET_MODFILE%.mod}.sum" "$KUBELET_MAIN/main.go"})
  echo "kwok $KWOK_VERSION"
  "$GO" env GOVERSION GOOS GOARCH
  [[ -z $K8S_TOOLCHAIN ]] || echo "kubernetes toolchain $K8S_TOOLCHAIN"
}
STAMP_FILE=$BIN_DIR/.stamp
STAMP=$(stamp_inputs | sha256sum | cut -d' ' -f1)

all_present() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x $BIN_DIR/$b ]] || return 1; done
}

if [[ -z ${FORCE:-} && -f $STAMP_FILE && $(<"$STAMP_FILE") == "$STAMP" ]] && all_present; then
  echo "build.sh: control-plane binaries in $BIN_DIR are up to date ($K8S_VERSION)"
  exit 0
fi

mkdir -p "$BIN_DIR"
rm -f "$STAMP_FILE"
start=$SECONDS
elapsed() { printf '%dm%02ds' $(((SECONDS - $1) / 60)) $(((SECONDS - $1) % 60)); }

# step WHAT DIR COMMAND...: runs one build in DIR, saying every PROGRESS_EVERY seconds that it
# still runs: compiling Kubernetes prints nothing for minutes on a first build (go build reports
# only errors), which looks like a hang. The build stays in the foreground (Ctrl-C reaches it).
ticker=
trap '[[ -z $ticker ]] || kill "$ticker" 2>/dev/null' EXIT
step() {
  local what=$1 dir=$2 t0=$SECONDS
  shift 2
  echo "build.sh: building $what"
  (
    n=0
    while sleep 1; do
      ((++n % PROGRESS_EVERY)) ||
        echo "build.sh: still building $what: $(elapsed "$t0") (all: $(elapsed "$start"); a first build takes 5-25 min)"
    done
  ) &
  ticker=$!
  (cd "$dir" && "$@")
  kill "$ticker"
  ticker=
}

export CGO_ENABLED=0 GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly"

# ldflags VERSION: -s -w (no symbol table/DWARF) and the version, as Kubernetes' own release builds
# (hack/lib/golang.sh, hack/lib/version.sh).
ldflags() {
  local flags="-s -w" pkg major minor
  [[ $1 =~ ^v([0-9]+)\.([0-9]+)\. ]]
  major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$1 -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  echo "$flags"
}

step "${MAINS[*]##*/} $K8S_VERSION${K8S_TOOLCHAIN:+ with $K8S_TOOLCHAIN}" \
  "$HERE" env ${K8S_TOOLCHAIN:+GOTOOLCHAIN=$K8S_TOOLCHAIN} "$GO" build -modfile="$MODFILE" -p "$GO_BUILD_P" -trimpath -ldflags "$(ldflags "$K8S_VERSION")" \
  -o "$BIN_DIR/" "${MAINS[@]}"

if [[ -n $KUBELET_MAIN ]]; then
  step "kubemark $KUBELET_VERSION (the hollow kubelet: $K8S_VERSION has none)${KUBELET_TOOLCHAIN:+ with $KUBELET_TOOLCHAIN}" \
    "$HERE" env ${KUBELET_TOOLCHAIN:+GOTOOLCHAIN=$KUBELET_TOOLCHAIN} "$GO" build -modfile="$KUBELET_MODFILE" -p "$GO_BUILD_P" -trimpath \
    -ldflags "$(ldflags "$KUBELET_VERSION")" -o "$BIN_DIR/kubemark" "$KUBELET_MAIN"
fi

step "etcd $(required_version go.etcd.io/etcd/server/v3 "$HERE/etcd/go.mod")" \
  "$HERE/etcd" "$GO" build -p "$GO_BUILD_P" -trimpath -ldflags "-s -w" -o "$BIN_DIR/etcd" .

# `go install pkg@version` builds outside any main module, so GOFLAGS' -mod must not be set.
step "kwok $KWOK_VERSION" "$HERE" \
  env GOFLAGS=-buildvcs=false GOBIN="$BIN_DIR" "$GO" install -p "$GO_BUILD_P" -trimpath -ldflags "-s -w" \
  "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"

# The `tool` directive of promtool/go.mod pins the version.
step "promtool $(required_version github.com/prometheus/prometheus "$HERE/promtool/go.mod")" \
  "$HERE/promtool" "$GO" build -p "$GO_BUILD_P" -trimpath -ldflags "-s -w" -o "$BIN_DIR/promtool" \
  github.com/prometheus/prometheus/cmd/promtool

all_present || { echo "build.sh: a binary is missing from $BIN_DIR after the build" >&2; exit 1; }
echo "$STAMP" >"$STAMP_FILE"
echo "build.sh: built ${BINARIES[*]} into $BIN_DIR in $((SECONDS - start))s"
