#!/usr/bin/env bash
# Smoke test of the control plane: build (if needed), up, checks, down.
#   smoke.sh [DIR]   (default: a fresh temporary directory, removed afterwards if all passed)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=release.sh
source "$HERE/release.sh"
BIN_DIR=${BIN_DIR:-$DEFAULT_BIN_DIR}
export BIN_DIR
KWOK_NODE=kwok-node-0
NS=smoke

if [[ $# -ge 1 ]]; then DIR=$1; KEEP=1; else DIR=$(mktemp -d /tmp/kube-e2e-smoke.XXXXXX); KEEP=0; fi

step_t=$SECONDS
step() {
  echo "smoke: [$((SECONDS - step_t))s] $*"
}
die() {
  echo "smoke: FAILED: $*" >&2
  exit 1
}
cleanup() {
  local rc=$?
  "$HERE/cluster.sh" down "$DIR" || true
  if ((rc == 0 && !KEEP)); then rm -rf "$DIR"; else echo "smoke: logs kept in $DIR/logs" >&2; fi
  exit "$rc"
}

"$HERE/build.sh"

t0=$SECONDS
trap cleanup EXIT
"$HERE/cluster.sh" up "$DIR"
step "cluster up in $((SECONDS - t0))s"
set -a
# shellcheck source=/dev/null
. "$DIR/env"
set +a
k() { "$BIN_DIR/kubectl" --request-timeout=10s "$@"; }
# kubectl as a node: only server, CA and the node's static token.
k_node() {
  local name=$1
  shift
  "$BIN_DIR/kubectl" --kubeconfig=/dev/null --server="$APISERVER_URL" --certificate-authority="$CA_FILE" \
    --token="node-$name" --request-timeout=10s "$@"
}
# poll SECONDS CMD... : retries CMD until it succeeds.
poll() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# 1. version
version=$(k get --raw /version)
echo "$version" | grep -q "\"gitVersion\": \"$K8S_VERSION\"" || die "unexpected /version: $version"
# The release build.sh pinned: go.mod's, or versions/$KUBE.mod's for a matrix minor.
pinned=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$HERE/$MODFILE")
[[ $K8S_VERSION == "$pinned" ]] || die "K8S_VERSION=$K8S_VERSION, $MODFILE pins $pinned"
step "/version reports $K8S_VERSION"

# 2. admission chain includes MutatingAdmissionWebhook and NodeRestriction
grep -q 'mutating admission controller(s) successfully in the following order:.*NodeRestriction.*MutatingAdmissionWebhook' \
  "$LOG_DIR/kube-apiserver.log" || die "MutatingAdmissionWebhook/NodeRestriction not in the mutating admission chain"
step "mutating admission chain: $(grep -o 'mutating admission controller(s) successfully in the following order: [^"]*' "$LOG_DIR/kube-apiserver.log" | head -1 | sed 's/.*order: //')"

# 3. node identities: a node creates itself, updates its own status, not another node's
node_yaml() {
  cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $1
  labels:
    kubernetes.io/hostname: $1
status:
  capacity: {cpu: "4", memory: 8Gi, pods: "110"}
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
EOF
}
k_node sim-node-0 auth whoami -o jsonpath='{.status.userInfo.username}' | grep -qx 'system:node:sim-node-0' ||
  die "token node-sim-node-0 is not system:node:sim-node-0"
node_yaml sim-node-0 | k_node sim-node-0 create -f - >/dev/null || die "sim-node-0 cannot create its Node"
node_yaml sim-node-1 | k_node sim-node-1 create -f - >/dev/null || die "sim-node-1 cannot create its Node"
step "sim-node-0 and sim-node-1 created their Nodes with their own tokens"
# Like the kubelet: PATCH nodes/NAME/status with a strategic merge patch, no GET first (the Node
# authorizer does not let a node GET nodes/status, so `kubectl patch --subresource=status` fails).
# Prints the HTTP status code, the response body goes to $DIR/patch.out.
node_patch_status() {
  curl -sS -o "$DIR/patch.out" -w '%{http_code}' --cacert "$CA_FILE" -H "Authorization: Bearer node-$1" \
    -X PATCH -H 'Content-Type: application/strategic-merge-patch+json' --data "$3" \
    "$APISERVER_URL/api/v1/nodes/$2/status"
}
code=$(node_patch_status sim-node-0 sim-node-0 '{"status":{"allocatable":{"cpu":"5"}}}')
[[ $code == 200 ]] || die "sim-node-0 cannot patch its own status: $code $(<"$DIR/patch.out")"
[[ $(k get node sim-node-0 -o jsonpath='{.status.allocatable.cpu}') == 5 ]] || die "own status patch not applied"
step "sim-node-0 patched its own status (HTTP $code)"
code=$(node_patch_status sim-node-0 sim-node-1 '{"status":{"allocatable":{"cpu":"6"}}}')
[[ $code == 403 ]] || die "sim-node-0 patching sim-node-1's status: HTTP $code $(<"$DIR/patch.out")"
[[ $(k get node sim-node-1 -o jsonpath='{.status.allocatable.cpu}') == 4 ]] || die "sim-node-1 was modified"
step "sim-node-0 may not patch sim-node-1's status: HTTP $code $(sed -n 's/^ *"message": *"\(.*\)",$/\1/p' "$DIR/patch.out")"
if k_node sim-node-0 get node sim-node-1 >/dev/null 2>&1; then die "sim-node-0 could read sim-node-1"; fi
step "sim-node-0 may not read sim-node-1 either (Node authorizer with selectors)"

# 4. controller-manager: a Deployment gets a Pod. The pod only fits the kwok node (nodeSelector +
# toleration), so it stays Pending until kwok runs.
k create namespace "$NS" >/dev/null
k -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector: {type: kwok}
      tolerations:
      - {key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}
      containers:
      - name: web
        image: registry.k8s.io/pause:3.10
        resources:
          requests: {cpu: 100m, memory: 64Mi}
EOF
has_web_pod() { [[ -n $(k -n "$NS" get pods -l app=web -o name) ]]; }
poll 60 has_web_pod || die "the Deployment made no Pod"
step "Deployment made pod $(k -n "$NS" get pods -l app=web -o name)"

# 5. scheduler + kwok: a fake node, the pod is scheduled there and becomes Running
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $KWOK_NODE
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: $KWOK_NODE
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
spec:
  taints:
  - {key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}
status:
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
EOF
"$BIN_DIR/kwok" \
  --kubeconfig="$KUBECONFIG" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-ip=127.0.0.1 \
  --node-lease-duration-seconds=40 \
  --cidr=10.244.0.1/16 \
  </dev/null >"$LOG_DIR/kwok.log" 2>&1 &
echo $! >"$PID_DIR/kwok.pid"
step "kwok started (pid $(<"$PID_DIR/kwok.pid"))"
node_ready() { [[ $(k get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]; }
poll 60 node_ready "$KWOK_NODE" ||
  die "$KWOK_NODE did not become Ready (see $LOG_DIR/kwok.log)"
has_lease() { k -n kube-node-lease get lease "$1"; }
poll 30 has_lease "$KWOK_NODE" || die "kwok made no Lease for $KWOK_NODE"
step "$KWOK_NODE is Ready and has a Lease"
web_running() { [[ $(k -n "$NS" get pods -l app=web -o jsonpath='{.items[0].status.phase}') == Running ]]; }
poll 90 web_running ||
  die "pod not Running: $(k -n "$NS" get pods -o wide 2>&1)"
node=$(k -n "$NS" get pods -l app=web -o jsonpath='{.items[0].spec.nodeName}')
[[ $node == "$KWOK_NODE" ]] || die "pod runs on '$node'"
[[ $(k get node sim-node-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') != True ]] ||
  die "kwok took over sim-node-0 (it must manage only nodes annotated kwok.x-k8s.io/node=fake)"
step "pod Running on $node: $(k -n "$NS" get pods -l app=web -o jsonpath='{.items[0].status.podIP}')"

# 6. down stops everything
pids=$(cat "$PID_DIR"/*.pid)
t1=$SECONDS
"$HERE/cluster.sh" down "$DIR"
for p in $pids; do
  if [[ -d /proc/$p ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status" 2>/dev/null; then die "pid $p still running after down"; fi
done
step "down in $((SECONDS - t1))s; all processes gone"
echo "smoke: PASSED in $((SECONDS - t0))s (excluding build)"
