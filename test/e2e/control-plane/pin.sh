#!/usr/bin/env bash
# Pins the control plane to one Kubernetes release: writes a go.mod that requires
# k8s.io/kubernetes vX.Y.Z and replaces every staging module that release's own go.mod lists
# (`=> ./staging/...`) with its v0.Y.Z, then `go mod tidy` fills in go.sum.
#
#   pin.sh v1.37.2                 # the default control plane: go.mod/go.sum here
#   pin.sh v1.35.4 versions/1.35   # a matrix minor: versions/1.35.mod/.sum (build.sh KUBE=1.35)
#
# The staging list changes between minors (1.37 added k8s.io/cri-streaming and k8s.io/streaming),
# so it is read from the release, never kept by hand. Needs the Go module proxy.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VERSION=${1:?usage: pin.sh vX.Y.Z [versions/X.Y]}
TARGET=${2:-}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[[ $VERSION =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "pin.sh: $VERSION is not vX.Y.Z" >&2; exit 1; }
STAGING="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && GOFLAGS=-mod=mod "$GO" mod download -json "k8s.io/kubernetes@$VERSION" >download.json)
upstream=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).GoMod)' "$work/download.json")
go_line=$(awk '$1 == "go" { print $2; exit }' "$upstream")
mapfile -t staging < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$upstream")

{
  echo "// Wrapper module that builds the Kubernetes control-plane binaries used by the"
  echo "// end-to-end tests from the Go module proxy. k8s.io/kubernetes refuses to be"
  echo "// \"go install\"ed directly because its go.mod replaces every staging module with"
  echo "// a local path; this module pins those staging modules to the matching release."
  echo "// Written by pin.sh $VERSION."
  echo "module github.com/kube-overcommit/test/e2e/control-plane"
  echo
  echo "go $go_line"
  echo
  echo "require ("
  for m in k8s.io/client-go k8s.io/component-base k8s.io/kubectl; do echo "	$m $STAGING"; done
  echo "	k8s.io/kubernetes $VERSION"
  echo ")"
  echo
  echo "replace ("
  for m in "${staging[@]}"; do echo "	$m => $m $STAGING"; done
  echo ")"
} >"$work/go.mod"

if [[ -z $TARGET ]]; then
  cp "$work/go.mod" "$HERE/go.mod"
  (cd "$HERE" && GOFLAGS=-mod=mod GOWORK=off "$GO" mod tidy)
else
  cp "$work/go.mod" "$HERE/$TARGET.mod"
  : >"$HERE/$TARGET.sum"
  (cd "$HERE" && GOFLAGS=-mod=mod GOWORK=off "$GO" mod tidy -modfile="$TARGET.mod")
fi
echo "pin.sh: pinned $VERSION (${#staging[@]} staging modules at $STAGING)"
