#!/usr/bin/env bash
# A real Kubernetes node on this machine, for `npm run node:up` / `npm run test:node` / `npm run node:down`:
# the control plane of ../control-plane/cluster.sh, plus containerd + runc + the CNI bridge (Debian's
# packages), the kubelet and kube-proxy (built from the control plane's own pinned Go module), the
# webhook's image built from the repository's Dockerfile and k8s/ applied through an overlay that
# changes only the image reference and pull policy.
#
#   node.sh deps         installs the Debian packages below that are missing (apt-get)
#   node.sh build        builds the kubelet, kube-proxy, the sandbox (pause) and workload binaries into
#                        test/e2e/.bin/node/ (skipped while its stamp matches)
#   node.sh up [DIR]     build, then starts everything under DIR (default test/e2e/.run/node) and
#                        deploys k8s/ (NODE_DEPLOY=0: not); writes DIR/node.env and DIR/node.json
#   node.sh down [DIR]   stops everything and removes what up made outside DIR: containers, pod
#                        network namespaces, mounts, the bridge, iptables rules (kube-proxy's and
#                        the kubelet's), cgroups; checks that nothing is left (fails naming what is),
#                        then deletes DIR but its logs
#   node.sh restart-kubelet [DIR]   stops the kubelet (SIGTERM) and starts it again, same flags
#
# The host forces some settings (all recorded in docs/real-node.md): cgroup v1 → failCgroupV1: false
# and the cgroupfs driver; no CAP_SYS_RESOURCE over oom_score_adj → restrict_oom_score_adj; no
# registry → every image is built here and imported (pull policy Never/IfNotPresent).
# Needs root, openssl, Go, npm ci done, and Debian's packages in PACKAGES below (`node.sh deps`).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
CP=$ROOT/test/e2e/control-plane
NODE_BIN=${NODE_BIN:-$ROOT/test/e2e/.bin/node}
CP_BIN=${BIN_DIR:-$ROOT/test/e2e/.bin}
NODE_NAME=${NODE_NAME:-kube-overcommit-node}
STATE=/run/kube-overcommit-node # sockets and shim state: short paths (a unix socket path has 108 bytes)
BRIDGE=ko-cni0
POD_CIDR=10.88.0.0/16
GATEWAY=10.88.0.1 # the bridge's address on the host: the node's IP and the API server's advertised one
SANDBOX_IMAGE=kube-overcommit.local/pause:1
WORKLOAD_IMAGE=kube-overcommit.local/workload:1
GUARD=KUBE-OVERCOMMIT-NODE # iptables chain: pod traffic stays on this machine
UP_TIMEOUT=${UP_TIMEOUT:-120}
export CONTAINERS_CONF=$HERE/containers.conf

# Debian's packages the node needs (`node.sh deps` installs the missing ones).
PACKAGES=(containerd runc containernetworking-plugins podman buildah crun mmdebstrap iptables conntrack uidmap fuse-overlayfs slirp4netns)

log() { echo "node.sh: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}

# --- deps ----------------------------------------------------------------------------------

missing_packages() {
  local p
  for p in "${PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f '${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || echo "$p"
  done
}

deps() {
  local missing
  missing=$(missing_packages)
  [[ -n $missing ]] || { log "Debian packages present: ${PACKAGES[*]}"; return 0; }
  log "installing $(tr '\n' ' ' <<<"$missing")"
  apt-get update -qq
  # shellcheck disable=SC2086 # one package a word
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# --- build ---------------------------------------------------------------------------------

# The kubelet and kube-proxy mains (../control-plane/node/) are upstream's, built in the control
# plane's module with its go.mod and go.sum (copied, so that -mod=mod records the kubelet's extra
# dependencies in the copy, never in the pinned files): a Go cache that built kubemark builds them
# mostly from cache. Not part of build.sh, so the normal e2e build is not slowed.
build() {
  local inputs stamp_file=$NODE_BIN/.stamp stamp ldflags version major minor b t0=$SECONDS
  inputs=$(cd "$CP" && sha256sum go.mod go.sum node/*/main.go && "$GO" env GOVERSION GOOS GOARCH && sha256sum "$HERE/node.sh")
  stamp=$(sha256sum <<<"$inputs" | cut -d' ' -f1)
  if [[ -f $stamp_file && $(<"$stamp_file") == "$stamp" ]]; then
    for b in kubelet kube-proxy pause workload; do [[ -x $NODE_BIN/$b ]] || break; done
    [[ -x $NODE_BIN/$b ]] && { log "kubelet, kube-proxy, pause, workload in $NODE_BIN are up to date"; return 0; }
  fi
  version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$CP/go.mod")
  [[ $version =~ ^v([0-9]+)\.([0-9]+)\. ]] || die "cannot read the k8s.io/kubernetes version from $CP/go.mod"
  major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
  ldflags="-s -w"
  for b in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $b.gitVersion=$version -X $b.gitMajor=$major -X $b.gitMinor=$minor -X $b.gitTreeState=clean"
  done
  mkdir -p "$NODE_BIN/mod"
  cp "$CP/go.mod" "$NODE_BIN/mod/node.mod"
  cp "$CP/go.sum" "$NODE_BIN/mod/node.sum"
  rm -f "$stamp_file"
  log "building kubelet, kube-proxy $version (a first build after build.sh's takes 5-10 min), pause, workload"
  (cd "$CP" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-buildvcs=false nice -n 10 "$GO" build -modfile="$NODE_BIN/mod/node.mod" -mod=mod \
    -p "${GO_BUILD_P:-2}" -trimpath -ldflags "$ldflags" -o "$NODE_BIN/" ./node/kubelet ./node/kube-proxy ./node/pause ./node/workload)
  echo "$stamp" >"$stamp_file"
  log "built in $((SECONDS - t0))s"
}

# --- helpers -------------------------------------------------------------------------------

kubectl() { "$CP_BIN/kubectl" --kubeconfig="$DIR/cluster/admin.kubeconfig" "$@"; }
ctr_() { ctr --address "$STATE/containerd.sock" -n k8s.io "$@"; }

# start NAME CMD... : in the background, logging to DIR/logs/NAME.log, pid in DIR/pids/NAME.pid.
start() {
  local name=$1
  shift
  "$@" </dev/null >"$DIR/logs/$name.log" 2>&1 &
  echo $! >"$DIR/pids/$name.pid"
}

# wait_for WHAT CMD... : retries CMD every 0.5 s for UP_TIMEOUT seconds.
wait_for() {
  local what=$1 deadline=$((SECONDS + UP_TIMEOUT)) t0=$SECONDS
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "no $what after ${UP_TIMEOUT}s (logs in $DIR/logs)"
    sleep 0.5
  done
  log "$what after $((SECONDS - t0))s"
}

# stop NAME: SIGTERM to the recorded process, SIGKILL after 15 s.
stop() {
  local file=$DIR/pids/$1.pid pid i
  [[ -f $file ]] || return 0
  pid=$(<"$file")
  if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { log "$1 ($pid) ignored SIGTERM: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; }
  fi
  rm -f "$file"
}

# client_cert NAME CN ORG: a client certificate signed by the cluster's CA (as kubeadm makes the
# first kubelet's) and a kubeconfig DIR/NAME.kubeconfig using it.
client_cert() {
  local name=$1 cn=$2 org=$3 pki=$DIR/pki
  mkdir -p "$pki"
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$pki/$name.key" -out "$pki/$name.csr" -subj "/O=$org/CN=$cn" 2>/dev/null
  printf '%s\n' 'basicConstraints=critical,CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
    'extendedKeyUsage=clientAuth' >"$pki/client.ext"
  openssl x509 -req -sha256 -days 30 -in "$pki/$name.csr" -CA "$CA_FILE" -CAkey "$CA_KEY_FILE" -CAcreateserial \
    -CAserial "$pki/ca.srl" -extfile "$pki/client.ext" -out "$pki/$name.crt" 2>/dev/null
  chmod 600 "$pki/$name.key"
  cat >"$DIR/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: { server: "$APISERVER_URL", certificate-authority: "$CA_FILE" }
users:
- name: $name
  user: { client-certificate: "$pki/$name.crt", client-key: "$pki/$name.key" }
contexts:
- name: e2e
  context: { cluster: e2e, user: $name }
current-context: e2e
EOF
}

kubelet_client_pki() {
  local pki=$DIR/pki
  mkdir -p "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 30 -keyout "$pki/kubelet-client-ca.key" -out "$pki/kubelet-client-ca.crt" \
    -subj "/CN=kube-overcommit-node-kubelet-client-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$pki/apiserver-kubelet-client.key" -out "$pki/apiserver-kubelet-client.csr" \
    -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
  printf '%s\n' 'basicConstraints=critical,CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
    'extendedKeyUsage=clientAuth' >"$pki/client.ext"
  openssl x509 -req -sha256 -days 30 -in "$pki/apiserver-kubelet-client.csr" -CA "$pki/kubelet-client-ca.crt" \
    -CAkey "$pki/kubelet-client-ca.key" -CAcreateserial -CAserial "$pki/kubelet-client-ca.srl" -extfile "$pki/client.ext" \
    -out "$pki/apiserver-kubelet-client.crt" 2>/dev/null
  chmod 600 "$pki"/*.key
}

# scratch_image NAME BINARY ARGS...: an image holding one static binary as its entrypoint,
# saved to DIR/images/<base name>.tar for containerd.
scratch_image() {
  local name=$1 bin=$2 ctx
  shift 2
  ctx=$(mktemp -d)
  cp "$bin" "$ctx/$(basename "$bin")"
  printf 'FROM scratch\nCOPY %s /%s\nENTRYPOINT ["/%s"]\n' "$(basename "$bin")" "$(basename "$bin")" "$(basename "$bin")" >"$ctx/Containerfile"
  podman build --quiet --tag "$name" "$ctx" >/dev/null
  rm -rf "$ctx"
  podman save --quiet --format docker-archive --output "$DIR/images/$(basename "$bin").tar" "$name"
}

free_port() {
  local p used
  used=$(ss -Htan | awk '{ n = split($4, a, ":"); print a[n] }' | sort -u)
  while :; do
    p=$((32000 + RANDOM % 8000))
    grep -qx "$p" <<<"$used" || { echo "$p"; return; }
  done
}

# --- up ------------------------------------------------------------------------------------

up() {
  local t0=$SECONDS t
  [[ $(id -u) == 0 ]] || die "up needs root (containerd, the kubelet, iptables)"
  [[ -z $(missing_packages) ]] || die "Debian packages missing: $(missing_packages | tr '\n' ' ')(\`$0 deps\` installs them)"
  command -v openssl >/dev/null || die "needs openssl"
  down_quiet
  rm -rf --one-file-system "$DIR"
  mkdir -p "$DIR/logs" "$DIR/pids" "$DIR/images" "$STATE"
  trap 'rc=$?; if ((rc != 0)); then log "up failed; stopping what was started (logs stay in $DIR/logs)"; cp -r "$DIR/logs" "$DIR.failed-logs" 2>/dev/null || true; down_quiet; fi' EXIT

  build
  # The control plane's binaries and helm (the suite's chart test): no-ops while their stamps match.
  bash "$CP/build.sh" >&2
  bash "$ROOT/test/e2e/helm/build.sh" >&2

  # The images: the webhook's from the Dockerfile (image.sh), the sandbox and the workload from scratch.
  t=$SECONDS
  bash "$HERE/image.sh" "$DIR/images/kube-overcommit.tar" 2>&1 | tee "$DIR/logs/image.log" | grep -E '^(image\.sh|base-image\.sh|built)' >&2
  IMAGE_S=$((SECONDS - t))
  scratch_image "$SANDBOX_IMAGE" "$NODE_BIN/pause"
  scratch_image "$WORKLOAD_IMAGE" "$NODE_BIN/workload"

  # The host's network for pods: a bridge holding the gateway (the node's IP), and a guard that
  # drops whatever a pod would send off this machine (pods talk to each other, Services and the host).
  ip link add "$BRIDGE" type bridge
  ip addr add "$GATEWAY/16" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  iptables -w -N "$GUARD"
  iptables -w -A "$GUARD" -d "$POD_CIDR" -j RETURN
  iptables -w -A "$GUARD" -j DROP
  iptables -w -I FORWARD -s "$POD_CIDR" -j "$GUARD"

  # kube-apiserver's client certificate for the kubelet's API (logs, exec, port-forward), from a CA
  # of its own that the kubelet trusts (x509.clientCAFile): group system:masters, as kubeadm's.
  kubelet_client_pki
  # The control plane, listening beyond loopback so that pods reach it through Service
  # `kubernetes` (10.0.0.1:443 → the advertised $GATEWAY:port, kept by the lease reconciler).
  APISERVER_EXTRA_ARGS="--bind-address=0.0.0.0 --advertise-address=$GATEWAY --endpoint-reconciler-type=lease --kubelet-preferred-address-types=InternalIP --kubelet-client-certificate=$DIR/pki/apiserver-kubelet-client.crt --kubelet-client-key=$DIR/pki/apiserver-kubelet-client.key" \
    bash "$CP/cluster.sh" up "$DIR/cluster"
  set -a
  # shellcheck source=/dev/null
  . "$DIR/cluster/env"
  set +a

  # containerd (CRI), its state under DIR and $STATE.
  mkdir -p "$DIR/cni" "$DIR/containerd"
  cat >"$DIR/cni/10-kube-overcommit.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "kube-overcommit-node",
  "plugins": [
    { "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": { "type": "host-local", "dataDir": "$DIR/cni/ipam", "ranges": [[{ "subnet": "$POD_CIDR", "gateway": "$GATEWAY" }]],
                "routes": [{ "dst": "0.0.0.0/0" }] } },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
  cat >"$DIR/containerd/config.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$STATE/containerd"
[grpc]
  address = "$STATE/containerd.sock"
[ttrpc]
  address = "$STATE/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$SANDBOX_IMAGE"
  # oom_score_adj cannot be lowered in this container: without this every sandbox fails with
  # runc's "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni"
EOF
  start containerd containerd --config "$DIR/containerd/config.toml"
  wait_for "containerd" ctr_ version
  for t in "$DIR"/images/*.tar; do
    ctr_ images import --platform linux/amd64 "$t" >>"$DIR/logs/ctr-import.log" 2>&1 || die "ctr images import $t failed ($DIR/logs/ctr-import.log)"
  done
  log "images imported: $(ctr_ images ls -q | grep -v '^sha256:' | tr '\n' ' ')"

  # The kubelet: a client certificate for system:node:$NODE_NAME (group system:nodes), the
  # KubeletConfiguration the host needs.
  client_cert kubelet "system:node:$NODE_NAME" system:nodes
  client_cert kube-proxy system:kube-proxy system:node-proxier
  KUBELET_PORT=$(free_port)
  KUBELET_HEALTHZ_PORT=$(free_port)
  PROXY_METRICS_PORT=$(free_port)
  PROXY_HEALTHZ_PORT=$(free_port)
  cat >"$DIR/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The host is cgroup v1 (hybrid): the kubelet refuses it since 1.35 unless told.
failCgroupV1: false
# No systemd in this container: the kubelet and runc manage cgroups through cgroupfs.
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$STATE/containerd.sock
address: $GATEWAY
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: "$DIR/pki/kubelet-client-ca.crt" }
authorization: { mode: Webhook }
clusterDomain: cluster.local
failSwapOn: false
# The kubelet's default hard thresholds but for disk: on this shared machine the disk is often
# more than 85 % full with other work, and the default imagefs.available<15% (nodefs 10%) would
# taint the node DiskPressure and evict its pods. memory.available stays the default 100Mi (the
# suite checks raw memory = capacity − 100Mi).
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2Gi
  nodefs.inodesFree: 5%
  imagefs.available: 2Gi
  imagefs.inodesFree: 5%
resolvConf: /etc/resolv.conf
serializeImagePulls: false
podLogsDir: $DIR/pod-logs
EOF
  mkdir -p "$DIR/kubelet"
  start kubelet "$NODE_BIN/kubelet" --config="$DIR/kubelet-config.yaml" --kubeconfig="$DIR/kubelet.kubeconfig" \
    --root-dir="$DIR/kubelet" --hostname-override="$NODE_NAME" --node-ip="$GATEWAY" --v=2
  wait_for "Node $NODE_NAME Ready" node_ready

  cat >"$DIR/kube-proxy-config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: { kubeconfig: "$DIR/kube-proxy.kubeconfig" }
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
# Leave the host's conntrack sysctls alone (a container may not write them).
conntrack: { maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s }
EOF
  start kube-proxy "$NODE_BIN/kube-proxy" --config="$DIR/kube-proxy-config.yaml" --v=2
  wait_for "kube-proxy's rules for Service kubernetes" kube_proxy_synced

  local deploy_s=0
  if [[ ${NODE_DEPLOY:-1} != 0 ]]; then
    t=$SECONDS
    deploy
    deploy_s=$((SECONDS - t))
  fi
  write_env "$deploy_s"
  trap - EXIT
  log "up in $((SECONDS - t0))s (image ${IMAGE_S}s, deploy ${deploy_s}s): KUBECONFIG=$DIR/cluster/admin.kubeconfig"
}

node_ready() {
  [[ $(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
}
kube_proxy_synced() {
  curl -sf "http://127.0.0.1:$PROXY_HEALTHZ_PORT/healthz" >/dev/null && iptables -w -t nat -S KUBE-SERVICES | grep -q 'default/kubernetes:https'
}

# k8s/ through the overlay (image reference and pull policy only), then both replicas Ready and
# the webhook's own certificate in its configuration.
deploy() {
  kubectl apply -k "$HERE/overlay" >"$DIR/logs/apply.log" 2>&1 || { cat "$DIR/logs/apply.log" >&2; die "kubectl apply -k failed"; }
  kubectl -n kube-overcommit rollout status deployment/kube-overcommit --timeout="${UP_TIMEOUT}s" >&2 ||
    { kubectl -n kube-overcommit get pods -o wide >&2; die "the Deployment did not become available"; }
  wait_for "the webhook configuration's caBundle" ca_bundle_written
}
ca_bundle_written() {
  [[ -n $(kubectl get mutatingwebhookconfiguration kube-overcommit -o jsonpath='{.webhooks[0].clientConfig.caBundle}') ]]
}

write_env() {
  local -a vars=(
    NODE_DIR="$DIR" NODE_NAME="$NODE_NAME" NODE_BIN="$NODE_BIN" CLUSTER_DIR="$DIR/cluster"
    KUBECONFIG="$DIR/cluster/admin.kubeconfig" KUBECTL="$CP_BIN/kubectl" APISERVER_URL="$APISERVER_URL"
    CONTAINERD_ADDRESS="$STATE/containerd.sock" KUBELET_PID_FILE="$DIR/pids/kubelet.pid"
    KUBELET_HEALTHZ_PORT="$KUBELET_HEALTHZ_PORT" WORKLOAD_IMAGE="$WORKLOAD_IMAGE" SANDBOX_IMAGE="$SANDBOX_IMAGE"
    IMAGE_BUILD_SECONDS="$IMAGE_S" DEPLOY_SECONDS="$1" PROXY_METRICS_PORT="$PROXY_METRICS_PORT"
  )
  local kv first=1
  for kv in "${vars[@]}"; do printf '%s=%q\n' "${kv%%=*}" "${kv#*=}"; done >"$DIR/node.env"
  {
    echo "{"
    for kv in "${vars[@]}"; do
      ((first)) || echo ","
      first=0
      printf '  "%s": "%s"' "${kv%%=*}" "${kv#*=}"
    done
    printf '\n}\n'
  } >"$DIR/node.json"
}

# The kubelet alone, for the tests' restart: `node.sh restart-kubelet DIR`.
restart_kubelet() {
  local cmdline
  cmdline=$(tr '\0' '\n' <"/proc/$(<"$DIR/pids/kubelet.pid")/cmdline") || die "no kubelet running"
  stop kubelet
  mapfile -t args <<<"$cmdline"
  echo "--- restarted at $(date -u +%FT%TZ) ---" >>"$DIR/logs/kubelet.log"
  "${args[@]}" </dev/null >>"$DIR/logs/kubelet.log" 2>&1 &
  echo $! >"$DIR/pids/kubelet.pid"
}

# --- down ----------------------------------------------------------------------------------

down_quiet() { down 2>/dev/null || true; }

down() {
  local id ns m t0=$SECONDS
  stop kube-proxy
  stop kubelet
  local t_kubelet=$((SECONDS - t0))
  # Every container and sandbox containerd runs, then their network namespaces (the veths go with them).
  if [[ -S $STATE/containerd.sock ]]; then
    for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
    sleep 1
    for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true; done
    for id in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$id" >/dev/null 2>&1 || true; done
  fi
  stop containerd
  local t_containers=$((SECONDS - t0))
  for ns in $(pod_netns); do ip netns delete "$ns" 2>/dev/null || true; done
  "$NODE_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  kubelet_iptables_cleanup
  local t_network=$((SECONDS - t0))
  if [[ -x $CP/cluster.sh ]]; then bash "$CP/cluster.sh" down "$DIR/cluster" >/dev/null 2>&1 || true; fi
  [[ ! -d $DIR/logs ]] || log "down: kubelet and kube-proxy stopped after ${t_kubelet}s, containers and containerd after ${t_containers}s, network after ${t_network}s, control plane after $((SECONDS - t0))s"
  # Mounts under DIR and $STATE (volumes, rootfs, shm), deepest first.
  for m in $(our_mounts | sort -r); do umount -l "$m" 2>/dev/null || true; done
  ip link delete "$BRIDGE" 2>/dev/null || true
  while iptables -w -D FORWARD -s "$POD_CIDR" -j "$GUARD" 2>/dev/null; do :; done
  iptables -w -F "$GUARD" 2>/dev/null || true
  iptables -w -X "$GUARD" 2>/dev/null || true
  local t_mounts=$((SECONDS - t0))
  remove_cgroups
  rm -rf "$STATE"
  # libcni's cache of the results of this network and of containerd's loopback (/var/lib/cni).
  rm -f /var/lib/cni/results/kube-overcommit-node-* /var/lib/cni/results/cni-loopback-* 2>/dev/null || true
  rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true
  local t_cleanup=$((SECONDS - t0))
  leftovers || return 1
  local t_checked=$((SECONDS - t0))
  # The bulky state (containerd's images and snapshots, etcd's data, volumes): only the logs stay.
  if [[ -d $DIR ]]; then
    find "$DIR" -mindepth 1 -maxdepth 1 ! -name logs ! -name cluster -exec rm -rf --one-file-system {} +
    [[ ! -d $DIR/cluster ]] || find "$DIR/cluster" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf --one-file-system {} +
    log "down: mounts after ${t_mounts}s, cgroups and iptables after ${t_cleanup}s, checked after ${t_checked}s, state removed after $((SECONDS - t0))s"
  fi
}

# The chains the kubelet itself still makes (pkg/kubelet/kubelet_network_linux.go): KUBE-IPTABLES-HINT,
# KUBE-KUBELET-CANARY, and KUBE-FIREWALL with its jumps from INPUT and OUTPUT (it drops packets to
# 127.0.0.0/8 from other sources). kube-proxy --cleanup leaves them.
kubelet_iptables_cleanup() {
  local cmd table chain rule
  for cmd in iptables ip6tables; do
    for table in filter nat mangle; do
      for chain in INPUT OUTPUT; do
        while rule=$("$cmd" -w -t "$table" -S "$chain" 2>/dev/null | grep -m1 -- '-j KUBE-FIREWALL$'); do
          # shellcheck disable=SC2086 # the rule's words, -A → -D
          "$cmd" -w -t "$table" ${rule/-A /-D } 2>/dev/null || break
        done
      done
      for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        "$cmd" -w -t "$table" -F "$chain" 2>/dev/null && "$cmd" -w -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
}

# Network namespaces of pods: containerd names them cni-<uuid>, and its sandboxes' are ours.
pod_netns() {
  ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ { print $1 }' | while read -r ns; do
    # Only those whose interfaces sit on our pod network.
    if ip netns exec "$ns" ip -4 -o addr show 2>/dev/null | grep -q ' 10\.88\.'; then echo "$ns"; fi
  done
}

our_mounts() {
  awk -v d="$DIR/" -v s="$STATE/" '{ m = $2; gsub(/\\040/, " ", m) } index(m "/", d) == 1 || index(m "/", s) == 1 { print m }' /proc/self/mounts
}

# The kubelet's cgroups (/kubepods under every v1 controller), leaves first; their processes are gone.
remove_cgroups() {
  local c
  for c in /sys/fs/cgroup/*/kubepods; do
    [[ -d $c ]] || continue
    find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

# Fails naming whatever of the node is still there.
leftovers() {
  local left=()
  pgrep -f "$STATE/containerd" >/dev/null && left+=("containerd-shim processes: $(pgrep -f "$STATE/containerd" | tr '\n' ' ')")
  [[ -n $(our_mounts) ]] && left+=("mounts: $(our_mounts | tr '\n' ' ')")
  [[ -n $(pod_netns) ]] && left+=("network namespaces: $(pod_netns | tr '\n' ' ')")
  ip link show "$BRIDGE" >/dev/null 2>&1 && left+=("bridge $BRIDGE")
  iptables-save 2>/dev/null | grep -qE "KUBE-|$GUARD" && left+=("iptables rules: $(iptables-save | grep -cE "KUBE-|$GUARD") lines with KUBE- or $GUARD")
  ip6tables-save 2>/dev/null | grep -q "KUBE-" && left+=("ip6tables rules: $(ip6tables-save | grep -c "KUBE-") lines with KUBE-")
  ls -d /sys/fs/cgroup/*/kubepods >/dev/null 2>&1 && left+=("cgroups: $(ls -d /sys/fs/cgroup/*/kubepods | tr '\n' ' ')")
  if ((${#left[@]})); then
    printf 'node.sh: left behind: %s\n' "${left[@]}" >&2
    return 1
  fi
  log "down: nothing left (processes, mounts, network namespaces, bridge, iptables rules, cgroups)"
}

cmd=${1:-}
DIR=${2:-$ROOT/test/e2e/.run/node}
mkdir -p "$(dirname "$DIR")"
DIR=$(cd "$(dirname "$DIR")" && pwd)/$(basename "$DIR")
case $cmd in
  deps) deps ;;
  build) build ;;
  up) up ;;
  down) down ;;
  cleanup-iptables) kubelet_iptables_cleanup ;;
  restart-kubelet) restart_kubelet ;;
  *)
    echo "usage: $0 deps|build|up|down|restart-kubelet|cleanup-iptables [DIR]" >&2
    exit 2
    ;;
esac
