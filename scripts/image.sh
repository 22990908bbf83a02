#!/usr/bin/env bash
# `npm run image`: builds the container image $REGISTRY/kube-overcommit:<package.json version>
# (REGISTRY of .github/workflows/release.yml: the name k8s/ and the chart deploy, so `kind load`
# makes it available as is) from the Dockerfile with docker or podman, whichever is installed
# and answers (docker first).
# Arguments are passed to `build` (`npm run image -- --platform linux/arm64`). NODE_IMAGE, when set,
# is the Dockerfile's base (--build-arg NODE_IMAGE): test/e2e/node/image.sh sets it to a base made
# from Debian's and npm's packages on a machine that reaches no registry.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

engine=
installed=()
for candidate in docker podman; do
  command -v "$candidate" >/dev/null 2>&1 || continue
  installed+=("$candidate")
  if "$candidate" info >/dev/null 2>&1; then engine=$candidate; break; fi
done
if [[ -z $engine ]]; then
  if ((${#installed[@]})); then
    echo "npm run image: ${installed[*]} installed but not answering (\`${installed[0]} info\` fails: is the daemon running, may this user reach it?)" >&2
  else
    echo "npm run image: neither docker nor podman is installed; install one of them to build the image" >&2
  fi
  exit 1
fi

registry=$(awk '$1 == "REGISTRY:" { print $2; exit }' .github/workflows/release.yml)
[[ -n $registry ]] || { echo "npm run image: no REGISTRY in .github/workflows/release.yml" >&2; exit 1; }
image=$registry/kube-overcommit:$(node -p 'require("./package.json").version')
build_args=()
[[ -z ${NODE_IMAGE:-} ]] || build_args+=(--build-arg "NODE_IMAGE=$NODE_IMAGE")
"$engine" build --tag "$image" "${build_args[@]}" "$@" .
echo "built $image with $engine"
