# The MCP Inspector CLI (npm package @modelcontextprotocol/inspector), used by
# tests/test_mind_server.py::test_mcp_inspector_cli to talk to `personae serve` as a
# third-party client. Installed once into $PERSONAE_CI_CACHE/mcp-inspector (needs npm
# and the npm registry); the test runs $PERSONAE_CI_CACHE/mcp-inspector/node_modules/.bin/mcp-inspector.
_personae_inspector_version="2.12.0"
_personae_inspector_dir="$PERSONAE_CI_CACHE/mcp-inspector"
if ! command -v npm >/dev/null 2>&1; then
  apt_install npm
fi
if [ ! -x "$_personae_inspector_dir/node_modules/.bin/mcp-inspector" ] \
  || ! grep -q "\"version\": \"$_personae_inspector_version\"" \
    "$_personae_inspector_dir/node_modules/@modelcontextprotocol/inspector/package.json" 2>/dev/null; then
  mkdir -p "$_personae_inspector_dir"
  npm install --silent --no-audit --no-fund --prefix "$_personae_inspector_dir" \
    "@modelcontextprotocol/inspector@$_personae_inspector_version" >/dev/null \
    || { echo "setup: cannot install @modelcontextprotocol/inspector@$_personae_inspector_version from npm" >&2; return 1; }
fi
