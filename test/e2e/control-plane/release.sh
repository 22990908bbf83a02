# Sourced by build.sh, cluster.sh and smoke.sh (after setting HERE to this folder): which
# Kubernetes release KUBE names, and where its binaries live.
#   KUBE unset, or go.mod's minor → MODFILE=go.mod,            DEFAULT_BIN_DIR=test/e2e/.bin
#   KUBE=1.35 (versions/1.35.mod)  → MODFILE=versions/1.35.mod, DEFAULT_BIN_DIR=test/e2e/.bin/v1.35
# MODSUM is the go.sum beside MODFILE; main_pkg names the package of each main. Fails for a minor that is not pinned (pin.sh pins one).
# shellcheck shell=bash
MODFILE=go.mod
DEFAULT_BIN_DIR=$(cd "$HERE/.." && pwd)/.bin
if [[ -n ${KUBE:-} && -f $HERE/versions/$KUBE.mod ]]; then
  MODFILE=versions/$KUBE.mod
  DEFAULT_BIN_DIR+=/v$KUBE
elif [[ -n ${KUBE:-} ]]; then
  default_minor=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { split(substr($2, 2), v, "."); print v[1] "." v[2]; exit }' "$HERE/go.mod")
  if [[ $KUBE != "$default_minor" ]]; then
    echo "$(basename "$0"): KUBE=$KUBE: no versions/$KUBE.mod here (pinned: $default_minor and versions/*.mod; pin.sh pins another)" >&2
    exit 1
  fi
fi
MODSUM=${MODFILE%.mod}.sum
# main_pkg NAME: the package of one binary's main for this release: versions/<minor>/cmd/NAME when
# that minor's upstream main differs from the newest's (1.32 and 1.33: kubectl), else cmd/NAME;
# nothing for a main the release does not have (pin.sh's `// absent: NAME`: 1.38's kubemark).
main_pkg() {
  # `// absent: NAME` (pin.sh): this release has no such main; nothing to build.
  if grep -q "^// absent: $1 " "$HERE/$MODFILE"; then return 0; fi
  if [[ $MODFILE == versions/*.mod && -f $HERE/${MODFILE%.mod}/cmd/$1/main.go ]]; then echo "./${MODFILE%.mod}/cmd/$1"; else echo "./cmd/$1"; fi
}
