#!/usr/bin/env bash
# The webhook's image for the real node: the repository's Dockerfile, unchanged, built by
# `npm run image` with podman on the base that base-image.sh recreates from Debian's and npm's
# packages (NODE_IMAGE), then saved as an image archive for `ctr -n k8s.io images import`.
#
#   image.sh OUT.tar     builds (podman's cache makes a rebuild of unchanged inputs quick) and saves
#
# The build's RUN steps use the host's network (npm ci) and, when NODE_EXTRA_CA_CERTS names a CA
# bundle (a TLS-intercepting proxy), npm inside the build trusts that bundle through a global
# npmrc mounted for the build only: nothing of it is in the image.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
out=${1:?usage: image.sh OUT.tar}
export CONTAINERS_CONF=$HERE/containers.conf
log() { echo "image.sh: $*" >&2; }

bash "$HERE/base-image.sh"
args=(--network host)
# A fixed folder: podman's layer cache keys a RUN step on its mounts' sources too.
work=$ROOT/test/e2e/.run/image-build
mkdir -p "$work"
if [[ -n ${NODE_EXTRA_CA_CERTS:-} && -r $NODE_EXTRA_CA_CERTS ]]; then
  cp "$NODE_EXTRA_CA_CERTS" "$work/ca.pem"
  echo "cafile=/run/kube-overcommit-build/ca.pem" >"$work/npmrc"
  args+=(--volume "$work:/run/kube-overcommit-build:ro" --volume "$work/npmrc:/usr/local/etc/npmrc:ro")
fi
t0=$SECONDS
(cd "$ROOT" && NODE_IMAGE=${BASE_IMAGE:-localhost/node:24-bookworm-slim} npm run --silent image -- "${args[@]}")
build_s=$((SECONDS - t0))
registry=$(awk '$1 == "REGISTRY:" { print $2; exit }' "$ROOT/.github/workflows/release.yml")
image=$registry/kube-overcommit:$(node -p 'require(process.argv[1]).version' "$ROOT/package.json")
rm -f "$out"
podman save --quiet --format docker-archive --output "$out" "$image"
log "$image built in ${build_s}s: $(podman image inspect --format '{{.Size}}' "$image") bytes; saved to $out"
