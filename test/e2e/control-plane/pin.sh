#!/usr/bin/env bash
# Pins the control plane to one Kubernetes release: writes a go.mod that requires
# k8s.io/kubernetes vX.Y.Z and replaces every staging module that release's own go.mod lists
# (`=> ./staging/...`) with its v0.Y.Z, then `go mod tidy` fills in go.sum.
#
#   pin.sh v1.37.2                 # the default control plane: go.mod/go.sum here
#   pin.sh v1.35.4 versions/1.35   # a matrix minor: versions/1.35.mod/.sum (build.sh KUBE=1.35)
#   GOTOOLCHAIN=go1.27.3 pin.sh v1.38.0-beta.0 versions/1.38   # a pre-release that needs a newer Go
#
# A release whose go.mod asks for a newer Go than the machine's (1.38 asks for go 1.27.0) is pinned
# with GOTOOLCHAIN=goX.Y.Z (the go command fetches that toolchain from the module proxy); the module
# file then carries `toolchain goX.Y.Z`, and build.sh builds that minor's Kubernetes binaries, and
# only those, with GOTOOLCHAIN set to it.
#   STAGING_AT=k8s.io/endpointslice@v0.32.12 pin.sh v1.32.13 versions/1.32
#
# STAGING_AT (space-separated module@version) pins a staging module at another version than the
# release's v0.Y.Z: for a staging module the module proxy does not serve at that version (it serves
# k8s.io/endpointslice v0.32.3 to v0.32.12 but not v0.32.13); the module file names each one.
#
# The staging list changes between minors (1.37 added k8s.io/cri-streaming and k8s.io/streaming),
# so it is read from the release, never kept by hand. Needs the Go module proxy.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VERSION=${1:?usage: pin.sh vX.Y.Z [versions/X.Y]}
TARGET=${2:-}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[[ $VERSION =~ ^v1\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.]+)?$ ]] || { echo "pin.sh: $VERSION is not vX.Y.Z[-pre]" >&2; exit 1; }
STAGING="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}${BASH_REMATCH[3]}"
# GOTOOLCHAIN=goX.Y.Z (not local/auto): the toolchain this release needs, recorded in the module file.
TOOLCHAIN=
[[ ${GOTOOLCHAIN:-local} =~ ^go[0-9] ]] && TOOLCHAIN=${GOTOOLCHAIN%%+*}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && GOFLAGS=-mod=mod "$GO" mod download -json "k8s.io/kubernetes@$VERSION" >download.json)
upstream=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).GoMod)' "$work/download.json")
go_line=$(awk '$1 == "go" { print $2; exit }' "$upstream")
# Mains of cmd/ that this release does not have (1.38 has no cmd/kubemark): named in the module file
# (`// absent: NAME`, read by release.sh, so build.sh leaves them out), and tidy goes on without them.
release_dir=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).Dir)' "$work/download.json")
absent=()
for d in "$HERE"/cmd/*/; do
  name=$(basename "$d")
  [[ -d $release_dir/cmd/$name ]] || absent+=("$name")
done
TIDY_FLAGS=()
((${#absent[@]} == 0)) || TIDY_FLAGS=(-e)
mapfile -t staging < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$upstream")

{
  echo "// Wrapper module that builds the Kubernetes control-plane binaries used by the"
  echo "// end-to-end tests from the Go module proxy. k8s.io/kubernetes refuses to be"
  echo "// \"go install\"ed directly because its go.mod replaces every staging module with"
  echo "// a local path; this module pins those staging modules to the matching release."
  echo "// Written by pin.sh $VERSION${STAGING_AT:+ with STAGING_AT=\"$STAGING_AT\" (not served by the module proxy at $STAGING)}."
  for name in "${absent[@]}"; do echo "// absent: $name (no cmd/$name in k8s.io/kubernetes $VERSION)"; done
  echo "module github.com/kube-overcommit/test/e2e/control-plane"
  echo
  echo "go $go_line"
  [[ -z $TOOLCHAIN ]] || echo "toolchain $TOOLCHAIN"
  echo
  echo "require ("
  for m in k8s.io/client-go k8s.io/component-base k8s.io/kubectl; do echo "	$m $STAGING"; done
  echo "	k8s.io/kubernetes $VERSION"
  echo ")"
  echo
  echo "replace ("
  for m in "${staging[@]}"; do
    at=$STAGING
    for o in ${STAGING_AT:-}; do [[ ${o%@*} == "$m" ]] && at=${o#*@}; done
    echo "	$m => $m $at"
  done
  echo ")"
} >"$work/go.mod"

if [[ -z $TARGET ]]; then
  cp "$work/go.mod" "$HERE/go.mod"
  (cd "$HERE" && GOFLAGS=-mod=mod GOWORK=off "$GO" mod tidy "${TIDY_FLAGS[@]}")
else
  cp "$work/go.mod" "$HERE/$TARGET.mod"
  : >"$HERE/$TARGET.sum"
  (cd "$HERE" && GOFLAGS=-mod=mod GOWORK=off "$GO" mod tidy "${TIDY_FLAGS[@]}" -modfile="$TARGET.mod")
fi
echo "pin.sh: pinned $VERSION (${#staging[@]} staging modules at $STAGING)"
