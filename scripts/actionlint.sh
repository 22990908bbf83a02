#!/usr/bin/env bash
# Checks the GitHub Actions workflows (.github/workflows/) with actionlint, built from its Go
# module at a pinned version into the ignored .tools/ (once; later runs reuse the binary).
#
# Environment: GO (go binary, default: go on PATH or /usr/local/go/bin/go).
set -euo pipefail

ACTIONLINT_VERSION=v1.7.12
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_DIR=$ROOT/.tools/actionlint-$ACTIONLINT_VERSION
ACTIONLINT=$BIN_DIR/actionlint

if [[ ! -x $ACTIONLINT ]]; then
  if [[ -z ${GO:-} ]]; then
    if command -v go >/dev/null 2>&1; then GO=go
    elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
    else echo "actionlint.sh: no Go toolchain found to build actionlint (set GO=/path/to/go)" >&2; exit 1
    fi
  fi
  echo "actionlint.sh: building actionlint $ACTIONLINT_VERSION into $BIN_DIR" >&2
  mkdir -p "$BIN_DIR"
  # go install MODULE@VERSION builds with the module's own go.sum, checked against the checksum database.
  GOBIN=$BIN_DIR "$GO" install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
fi

cd "$ROOT"
"$ACTIONLINT"
# actionlint knows the inputs of popular actions by major version (docker/build-push-action@v7),
# not by the exact versions the workflows pin: a copy pinned to the majors has its inputs checked.
majors=$(mktemp -d)
trap 'rm -rf "$majors"' EXIT
for workflow in .github/workflows/*.yml; do
  sed -E 's/(uses: [^@ ]+@v[0-9]+)(\.[0-9]+)+/\1/' "$workflow" >"$majors/$(basename "$workflow")"
done
"$ACTIONLINT" "$majors"/*.yml
echo "actionlint.sh: workflows OK"
