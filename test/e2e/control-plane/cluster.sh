#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1 for the end-to-end tests:
# etcd, kube-apiserver, kube-controller-manager and kube-scheduler, built by build.sh.
#
#   cluster.sh up DIR     fresh certificates, tokens and data under DIR; starts the processes
#                         on free ports; waits until they are healthy; writes DIR/env,
#                         DIR/env.json and DIR/admin.kubeconfig. On failure it prints the
#                         tail of the failing log and stops what it started.
#   cluster.sh down DIR   stops every process with a pid file in DIR/pids/ (SIGTERM, then
#                         SIGKILL after 10 s), also ones the tests started (kwok, webhooks).
#                         Safe to run at any time, also after a failed or interrupted up.
#   cluster.sh restart DIR
#                         stops kube-apiserver, then kube-controller-manager, then kube-scheduler,
#                         one at a time, and starts each again from BIN_DIR (KUBE=1.36: another
#                         release's binaries, an upgrade) with the flags, ports, certificates and
#                         etcd data up gave them, waiting until each is healthy; etcd and every
#                         other process (kubelets, webhooks, kwok) keep running. Each one's earlier
#                         log is kept as DIR/logs/<name>.<its version>.log; DIR/env is rewritten.
#
# Environment: KUBE (a pinned minor, see release.sh), BIN_DIR (binaries, default test/e2e/.bin, or
#              test/e2e/.bin/vKUBE), UP_TIMEOUT (seconds per wait, default 90),
#              APISERVER_EXTRA_ARGS (extra kube-apiserver flags, split on whitespace; up's are
#              kept in DIR/env, and restart uses those).
# kwok and the hollow kubelet (kubemark) are not started here: see README.md for the command lines
# the tests use. up says which kubemark BIN_DIR holds (a release without one, 1.38, has the newest
# pinned older minor's: build.sh) and writes its version to DIR/env as KUBELET_VERSION.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=release.sh
source "$HERE/release.sh"
BIN_DIR=${BIN_DIR:-$DEFAULT_BIN_DIR}
UP_TIMEOUT=${UP_TIMEOUT:-90}
SERVICE_CIDR=10.0.0.0/24

usage() {
  echo "usage: $0 up|down|restart DIR" >&2
  exit 2
}

log() { echo "cluster.sh: $*" >&2; }

# --- process bookkeeping ---------------------------------------------------------------

# Start time of a live, non-zombie process in clock ticks since boot (/proc/PID/stat field 22);
# fails if there is no such process. "pid:starttime" identifies a process across pid reuse.
proc_start() {
  local stat fields
  { stat=$(<"/proc/$1/stat"); } 2>/dev/null || return 1
  read -r -a fields <<<"${stat##*) }" # fields[0] is field 3 (state)
  [[ ${fields[0]} != Z ]] || return 1
  echo "${fields[19]}"
}

# True if the pid file's process is still the one that was recorded: its command line mentions
# DIR, or it started no later than the pid file was written (a reused pid starts afterwards).
recorded_process() {
  local file=$1 pid=$2 ticks started written
  ticks=$(proc_start "$pid") || return 1
  { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF -- "$DIR" && return 0
  started=$(($(awk '$1 == "btime" { print $2 }' /proc/stat) + ticks / $(getconf CLK_TCK)))
  written=$(stat -c %Y "$file") || return 1
  ((started <= written + 1))
}

# SIGTERMs the process of a pid file; prints "pid:starttime" if it signalled one.
stop_pid_file() {
  local file=$1 pid
  { pid=$(<"$file"); } 2>/dev/null || return 0
  [[ $pid =~ ^[0-9]+$ && $pid -gt 1 && $pid -ne $$ ]] || return 0
  if recorded_process "$file" "$pid"; then
    echo "$pid:$(proc_start "$pid")"
    kill -TERM "$pid" 2>/dev/null || true
  fi
}

# Stops every process with a pid file in DIR/pids: clients first (kwok, webhooks, controllers,
# scheduler), then the API server, etcd last.
down() {
  [[ -d $DIR/pids ]] || return 0
  local f procs=() p
  shopt -s nullglob
  for f in "$DIR"/pids/*.pid; do
    case $(basename "$f") in
      etcd.pid | kube-apiserver.pid) ;;
      *) p=$(stop_pid_file "$f") && [[ -n $p ]] && procs+=("$p") ;;
    esac
  done
  wait_gone "${procs[@]}"
  for f in "$DIR/pids/kube-apiserver.pid" "$DIR/pids/etcd.pid"; do
    [[ -f $f ]] || continue
    p=$(stop_pid_file "$f")
    [[ -n $p ]] && wait_gone "$p"
  done
  rm -f "$DIR"/pids/*.pid
  shopt -u nullglob
}

# wait_gone PID:STARTTIME... : waits up to 10 s for the processes to exit, then SIGKILLs the rest.
wait_gone() {
  local p alive i
  [[ $# -gt 0 ]] || return 0
  for ((i = 0; i < 100; i++)); do
    alive=0
    for p in "$@"; do
      [[ $(proc_start "${p%%:*}") == "${p#*:}" ]] && alive=1
    done
    ((alive)) || return 0
    sleep 0.1
  done
  for p in "$@"; do
    if [[ $(proc_start "${p%%:*}") == "${p#*:}" ]]; then
      log "pid ${p%%:*} did not stop after SIGTERM; sending SIGKILL"
      kill -KILL "${p%%:*}" 2>/dev/null || true
    fi
  done
}

# start NAME BINARY ARGS... : runs the binary in the background, logging to DIR/logs/NAME.log.
start() {
  local name=$1 bin=$2
  shift 2
  [[ -x $BIN_DIR/$bin ]] || { log "missing $BIN_DIR/$bin: run build.sh first"; return 1; }
  "$BIN_DIR/$bin" "$@" </dev/null >"$DIR/logs/$name.log" 2>&1 &
  echo $! >"$DIR/pids/$name.pid"
}

# wait_for NAME WHAT CMD... : retries CMD until it succeeds; fails if the process exits or
# after UP_TIMEOUT seconds, showing the end of its log.
wait_for() {
  local name=$1 what=$2 pid deadline=$((SECONDS + UP_TIMEOUT))
  shift 2
  pid=$(<"$DIR/pids/$name.pid")
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
      fail "$name exited while waiting for $what" "$name"
    fi
    if ((SECONDS >= deadline)); then
      fail "$name: no $what after ${UP_TIMEOUT}s" "$name"
    fi
    sleep 0.2
  done
  log "$name: $what ok after $((SECONDS - deadline + UP_TIMEOUT))s"
}

fail() {
  log "ERROR: $1"
  if [[ -n ${2:-} && -f $DIR/logs/$2.log ]]; then
    log "last lines of $DIR/logs/$2.log:"
    tail -n 40 "$DIR/logs/$2.log" | sed 's/^/    /' >&2
  fi
  exit 1
}

# --- helpers -----------------------------------------------------------------------------

# Free TCP ports on 127.0.0.1, outside the ephemeral range, distinct from each other.
free_ports() {
  local n=$1 used p picked=()
  used=$(ss -Htan 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }' | sort -u || true)
  while ((${#picked[@]} < n)); do
    p=$((20000 + RANDOM % 12000))
    grep -qx "$p" <<<"$used" && continue
    [[ " ${picked[*]} " == *" $p "* ]] && continue
    # Nothing answers there either (covers namespaces/tools without ss).
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
    picked+=("$p")
  done
  echo "${picked[@]}"
}

# GET on a plain-HTTP endpoint with bash only; succeeds if the body contains $2.
http_get_contains() {
  local port=$1 path=$2 want=$3 body
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&3
  body=$(timeout 5 cat <&3) || { exec 3>&-; return 1; }
  exec 3>&-
  [[ $body == *"$want"* ]]
}

kubectl_admin() { "$BIN_DIR/kubectl" --kubeconfig="$DIR/admin.kubeconfig" --request-timeout=5s "$@"; }

apiserver_ready() { [[ $(kubectl_admin get --raw /readyz) == ok ]]; }

# healthz of a component serving HTTPS with a self-signed certificate.
component_healthz() {
  [[ $(curl -sk --max-time 5 "https://127.0.0.1:$1/healthz") == ok ]]
}

write_kubeconfig() {
  local file=$1 user=$2 token=$3
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(base64 -w0 <"$DIR/pki/ca.crt")
users:
- name: $user
  user:
    token: $token
contexts:
- name: e2e
  context:
    cluster: e2e
    user: $user
current-context: e2e
EOF
  chmod 600 "$file"
}

make_pki() {
  local pki=$DIR/pki
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout ca.key -out ca.crt \
      -subj "/CN=kube-overcommit-e2e-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout apiserver.key -out apiserver.csr \
      -subj "/CN=kube-apiserver" 2>/dev/null
    cat >apiserver.ext <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EOF
    openssl x509 -req -sha256 -days 3650 -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
    openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
    # The client certificate kube-apiserver presents to webhooks (admission config below), from
    # a CA of its own: a webhook that trusts it trusts nothing else of this cluster.
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout webhook-client-ca.key -out webhook-client-ca.crt \
      -subj "/CN=kube-overcommit-e2e-webhook-client-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout webhook-client.key -out webhook-client.csr \
      -subj "/CN=kube-apiserver-webhook-client" 2>/dev/null
    printf '%s\n' 'basicConstraints=critical,CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
      'extendedKeyUsage=clientAuth' >webhook-client.ext
    openssl x509 -req -sha256 -days 3650 -in webhook-client.csr -CA webhook-client-ca.crt -CAkey webhook-client-ca.key \
      -CAcreateserial -extfile webhook-client.ext -out webhook-client.crt 2>/dev/null
    # The aggregation layer's front proxy: kube-apiserver presents front-proxy-client to extension
    # API servers (metrics-server), which trust it through the requestheader CA it publishes.
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout front-proxy-ca.key -out front-proxy-ca.crt \
      -subj "/CN=kube-overcommit-e2e-front-proxy-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout front-proxy-client.key -out front-proxy-client.csr \
      -subj "/CN=front-proxy-client" 2>/dev/null
    openssl x509 -req -sha256 -days 3650 -in front-proxy-client.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key \
      -CAcreateserial -extfile webhook-client.ext -out front-proxy-client.crt 2>/dev/null
    chmod 600 ./*.key
  )
}

# kube-apiserver's --admission-control-config-file: it presents the webhook client certificate
# to every webhook (user "*"); a webhook that asks for no certificate is unaffected.
make_admission_config() {
  mkdir -p "$DIR/admission"
  cat >"$DIR/admission/webhook-kubeconfig.yaml" <<EOF
apiVersion: v1
kind: Config
users:
  - name: "*"
    user:
      client-certificate: $DIR/pki/webhook-client.crt
      client-key: $DIR/pki/webhook-client.key
EOF
  cat >"$DIR/admission/admission.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: MutatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: $DIR/admission/webhook-kubeconfig.yaml
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: $DIR/admission/webhook-kubeconfig.yaml
EOF
}

# Static tokens: token,user,uid,"groups". Node tokens are node-<name> so tests can compute them.
make_tokens() {
  local file=$DIR/tokens.csv i
  {
    echo "$ADMIN_TOKEN,admin,admin,\"system:masters\""
    echo "$KCM_TOKEN,system:kube-controller-manager,system:kube-controller-manager"
    echo "$SCHEDULER_TOKEN,system:kube-scheduler,system:kube-scheduler"
    for ((i = 0; i < 1100; i++)); do
      echo "node-sim-node-$i,system:node:sim-node-$i,system:node:sim-node-$i,\"system:nodes\""
    done
    for ((i = 0; i < 20; i++)); do
      echo "node-kwok-node-$i,system:node:kwok-node-$i,system:node:kwok-node-$i,\"system:nodes\""
    done
  } >"$file"
  chmod 600 "$file"
}

# The three processes restart runs again, each with the one set of flags up and restart share.
start_apiserver() {
  # shellcheck disable=SC2086 # APISERVER_EXTRA_ARGS is split on purpose
  start kube-apiserver kube-apiserver \
    --etcd-servers="$ETCD_URL" \
    --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --secure-port="$APISERVER_PORT" \
    --cert-dir="$DIR/pki/kube-apiserver" \
    --tls-cert-file="$DIR/pki/apiserver.crt" \
    --tls-private-key-file="$DIR/pki/apiserver.key" \
    --client-ca-file="$DIR/pki/ca.crt" \
    --token-auth-file="$DIR/tokens.csv" \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
    --admission-control-config-file="$DIR/admission/admission.yaml" \
    --endpoint-reconciler-type=none \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$DIR/pki/sa.pub" \
    --service-account-signing-key-file="$DIR/pki/sa.key" \
    --allow-privileged=true \
    --profiling=false \
    --requestheader-client-ca-file="$DIR/pki/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$DIR/pki/front-proxy-client.crt" \
    --proxy-client-key-file="$DIR/pki/front-proxy-client.key" \
    ${APISERVER_EXTRA_ARGS:-}
}

start_controller_manager() {
  start kube-controller-manager kube-controller-manager \
    --kubeconfig="$DIR/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="$KCM_PORT" \
    --leader-elect=false \
    --controllers='*' \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$DIR/pki/sa.key" \
    --root-ca-file="$DIR/pki/ca.crt" \
    --cluster-signing-cert-file="$DIR/pki/ca.crt" \
    --cluster-signing-key-file="$DIR/pki/ca.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --profiling=false
}

start_scheduler() {
  start kube-scheduler kube-scheduler \
    --kubeconfig="$DIR/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="$SCHEDULER_PORT" \
    --leader-elect=false \
    --profiling=false
}

# --- up ----------------------------------------------------------------------------------

up() {
  local t0=$SECONDS tool
  for tool in openssl curl base64; do
    command -v "$tool" >/dev/null || { log "up needs $tool on PATH"; exit 1; }
  done
  # Leftovers of an earlier run in the same DIR: stop them and start from scratch.
  down
  rm -rf "$DIR/etcd-data" "$DIR/pki" "$DIR/logs" "$DIR/pids" "$DIR/tokens.csv" \
    "$DIR"/*.kubeconfig "$DIR/env" "$DIR/env.json" "$DIR/admission"
  mkdir -p "$DIR/logs" "$DIR/pids"
  # If anything below fails, stop what was started (logs stay in DIR/logs).
  trap 'rc=$?; if ((rc != 0)); then log "up failed; stopping what was started"; down; fi' EXIT
  say_kubelet

  read -r ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT SCHEDULER_PORT <<<"$(free_ports 5)"
  APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
  ETCD_URL=http://127.0.0.1:$ETCD_PORT
  ADMIN_TOKEN=$(openssl rand -hex 24)
  KCM_TOKEN=$(openssl rand -hex 24)
  SCHEDULER_TOKEN=$(openssl rand -hex 24)

  make_pki
  make_admission_config
  make_tokens
  write_kubeconfig "$DIR/admin.kubeconfig" admin "$ADMIN_TOKEN"
  write_kubeconfig "$DIR/kube-controller-manager.kubeconfig" system:kube-controller-manager "$KCM_TOKEN"
  write_kubeconfig "$DIR/kube-scheduler.kubeconfig" system:kube-scheduler "$SCHEDULER_TOKEN"

  start etcd etcd \
    --name=e2e \
    --data-dir="$DIR/etcd-data" \
    --listen-client-urls="$ETCD_URL" \
    --advertise-client-urls="$ETCD_URL" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster-state=new \
    --unsafe-no-fsync=true \
    --log-level=warn
  wait_for etcd "/health" http_get_contains "$ETCD_PORT" /health '"health":"true"'

  start_apiserver
  wait_for kube-apiserver "/readyz" apiserver_ready

  start_controller_manager
  start_scheduler
  wait_for kube-controller-manager "/healthz" component_healthz "$KCM_PORT"
  wait_for kube-scheduler "/healthz" component_healthz "$SCHEDULER_PORT"
  # The controllers run: the service-account controller has made "default" in "default".
  wait_for kube-controller-manager "the default ServiceAccount" kubectl_admin -n default get serviceaccount default

  write_env
  trap - EXIT
  log "up in $((SECONDS - t0))s: $APISERVER_URL (source $DIR/env)"
}

# binary_version NAME: the release a binary of BIN_DIR was built as (v1.37.2); nothing when BIN_DIR
# has no such binary.
binary_version() {
  [[ -x $BIN_DIR/$1 ]] || return 0
  case $1 in
    kubectl) "$BIN_DIR/kubectl" version --client -o json | awk -F'"' '/gitVersion/ { print $4; exit }' ;;
    *) "$BIN_DIR/$1" --version | awk '{ print $2; exit }' ;;
  esac
}

# Which kubemark BIN_DIR holds: the release's own, or (release.sh's KUBELET_MODFILE) an older one's.
say_kubelet() {
  local k8s kubelet
  k8s=$(binary_version kubectl)
  kubelet=$(binary_version kubemark)
  if [[ -z $kubelet ]]; then
    log "Kubernetes $k8s; no kubemark in $BIN_DIR: no hollow kubelet"
  elif [[ $MODFILE != "$KUBELET_MODFILE" ]]; then
    log "Kubernetes $k8s; the hollow kubelet is kubemark $kubelet: $k8s has no cmd/kubemark, $KUBELET_MODFILE's minor is the newest pinned one that has, within the kubelet's version skew"
  else
    log "Kubernetes $k8s; the hollow kubelet is kubemark $kubelet"
  fi
}

write_env() {
  local -a vars=(
    CLUSTER_DIR="$DIR"
    BIN_DIR="$BIN_DIR"
    K8S_VERSION="$(binary_version kubectl)"
    KUBELET_VERSION="$(binary_version kubemark)"
    APISERVER_URL="$APISERVER_URL"
    APISERVER_PORT="$APISERVER_PORT"
    CA_FILE="$DIR/pki/ca.crt"
    CA_KEY_FILE="$DIR/pki/ca.key"
    WEBHOOK_CLIENT_CA_FILE="$DIR/pki/webhook-client-ca.crt"
    ADMIN_TOKEN="$ADMIN_TOKEN"
    KUBECONFIG="$DIR/admin.kubeconfig"
    KUBECACHEDIR="$DIR/kube-cache"
    TOKEN_FILE="$DIR/tokens.csv"
    ETCD_URL="$ETCD_URL"
    ETCD_PORT="$ETCD_PORT"
    ETCD_PEER_PORT="$ETCD_PEER_PORT"
    KCM_PORT="$KCM_PORT"
    SCHEDULER_PORT="$SCHEDULER_PORT"
    ETCD_PID="$(<"$DIR/pids/etcd.pid")"
    APISERVER_PID="$(<"$DIR/pids/kube-apiserver.pid")"
    KCM_PID="$(<"$DIR/pids/kube-controller-manager.pid")"
    SCHEDULER_PID="$(<"$DIR/pids/kube-scheduler.pid")"
    LOG_DIR="$DIR/logs"
    PID_DIR="$DIR/pids"
    APISERVER_EXTRA_ARGS="${APISERVER_EXTRA_ARGS:-}"
  )
  local kv first=1
  {
    echo "# Written by cluster.sh up; source it (set -a; . env; set +a) to use the cluster."
    for kv in "${vars[@]}"; do printf '%s=%q\n' "${kv%%=*}" "${kv#*=}"; done
  } >"$DIR/env"
  {
    echo "{"
    for kv in "${vars[@]}"; do
      ((first)) || echo ","
      first=0
      printf '  "%s": "%s"' "${kv%%=*}" "$(json_escape "${kv#*=}")"
    done
    printf '\n}\n'
  } >"$DIR/env.json"
}

json_escape() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  printf '%s' "$s"
}

# --- restart -----------------------------------------------------------------------------

# restart_one NAME START_FUNCTION WAIT_ARGS...: stops NAME (SIGTERM, SIGKILL after 10 s), keeps its
# log as NAME.<version>.log, starts it from BIN_DIR and waits until it answers WAIT_ARGS.
restart_one() {
  local name=$1 starter=$2 p
  shift 2
  p=$(stop_pid_file "$DIR/pids/$name.pid")
  [[ -n $p ]] && wait_gone "$p"
  [[ -f $DIR/logs/$name.log ]] && mv "$DIR/logs/$name.log" "$DIR/logs/$name.$K8S_VERSION.log"
  "$starter"
  wait_for "$name" "$@"
}

# The upgrade order of the version skew policy: kube-apiserver first, then the components that
# talk to it. up's ports, tokens and extra flags come from DIR/env; the binaries from BIN_DIR.
restart() {
  local t0=$SECONDS bin_dir=$BIN_DIR
  [[ -f $DIR/env ]] || { log "no $DIR/env: run up first"; exit 1; }
  # shellcheck source=/dev/null # written by write_env
  source "$DIR/env"
  BIN_DIR=$bin_dir
  local from=$K8S_VERSION
  restart_one kube-apiserver start_apiserver "/readyz" apiserver_ready
  restart_one kube-controller-manager start_controller_manager "/healthz" component_healthz "$KCM_PORT"
  restart_one kube-scheduler start_scheduler "/healthz" component_healthz "$SCHEDULER_PORT"
  write_env
  log "restarted in $((SECONDS - t0))s: $from -> $(awk -F'"' '/"K8S_VERSION"/ { print $4 }' "$DIR/env.json") from $BIN_DIR"
}

# --- main --------------------------------------------------------------------------------

[[ $# -eq 2 ]] || usage
case $1 in
  up)
    mkdir -p "$2"
    DIR=$(cd "$2" && pwd)
    up
    ;;
  down)
    [[ -d $2 ]] || exit 0
    DIR=$(cd "$2" && pwd)
    down
    ;;
  restart)
    DIR=$(cd "$2" && pwd)
    restart
    ;;
  *) usage ;;
esac
