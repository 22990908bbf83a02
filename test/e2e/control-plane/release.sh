# Sourced by build.sh, cluster.sh and smoke.sh (after setting HERE to this folder): which
# Kubernetes release KUBE names, and where its binaries live.
#   KUBE unset, or go.mod's minor → MODFILE=go.mod,            DEFAULT_BIN_DIR=test/e2e/.bin
#   KUBE=1.35 (versions/1.35.mod)  → MODFILE=versions/1.35.mod, DEFAULT_BIN_DIR=test/e2e/.bin/v1.35
# MODSUM is the go.sum beside MODFILE; main_pkg names the package of each main; KUBELET_MODFILE is the
# module file the hollow kubelet (kubemark) is built from (below). Fails for a minor that is not pinned (pin.sh pins one).
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
# main_pkg NAME [MODFILE]: the package of one binary's main for a release (default: MODFILE's):
# versions/<minor>/cmd/NAME when that minor's upstream main differs from the newest's (1.32 and 1.33:
# kubectl), else cmd/NAME; nothing for a main the release does not have (pin.sh's `// absent: NAME`:
# 1.38's kubemark).
main_pkg() {
  local modfile=${2:-$MODFILE}
  # `// absent: NAME` (pin.sh): this release has no such main; nothing to build.
  if grep -q "^// absent: $1 " "$HERE/$modfile"; then return 0; fi
  if [[ $modfile == versions/*.mod && -f $HERE/${modfile%.mod}/cmd/$1/main.go ]]; then echo "./${modfile%.mod}/cmd/$1"; else echo "./cmd/$1"; fi
}

# pinned_minor MODFILE: the minor (37) of the k8s.io/kubernetes a module file requires.
pinned_minor() {
  awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { split(substr($2, 2), v, "."); print v[2]; exit }' "$HERE/$1"
}

# kubelet_modfile: the module file to build the hollow kubelet (kubemark) from. MODFILE's release
# when it has cmd/kubemark; else (1.38: kubemark left k8s.io/kubernetes) the newest pinned minor
# below it that has one, within the kubelet's version skew (a kubelet up to 3 minors older than
# kube-apiserver): 1.38 → go.mod (v1.37.2). Nothing when no pinned minor fits.
kubelet_modfile() {
  if [[ -n $(main_pkg kubemark) ]]; then echo "$MODFILE"; return 0; fi
  local minor best=-1 found= file m
  minor=$(pinned_minor "$MODFILE")
  for file in go.mod "$HERE"/versions/*.mod; do
    file=${file#"$HERE"/}
    m=$(pinned_minor "$file")
    if ((m < minor && m >= minor - 3 && m > best)) && [[ -n $(main_pkg kubemark "$file") ]]; then
      best=$m
      found=$file
    fi
  done
  echo "$found"
}
KUBELET_MODFILE=$(kubelet_modfile)
