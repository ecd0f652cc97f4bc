# Real host binaries for tests/hosts_e2e: pinned npm packages of Claude Code, Codex and
# Copilot CLI installed into $PERSONAE_CI_CACHE/hosts (reused between runs; npm fetches
# only from its registry). Tests find them through PERSONAE_HOSTS_DIR.
PERSONAE_HOSTS_PACKAGES="@anthropic-ai/claude-code@2.1.331 @openai/codex@0.169.0 @github/copilot@1.0.102"
export PERSONAE_HOSTS_DIR="$PERSONAE_CI_CACHE/hosts"
_personae_hosts_install() {
  local stamp="$PERSONAE_HOSTS_DIR/.installed"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$PERSONAE_HOSTS_PACKAGES" ] \
    && [ -x "$PERSONAE_HOSTS_DIR/node_modules/.bin/claude" ] \
    && [ -x "$PERSONAE_HOSTS_DIR/node_modules/.bin/codex" ] \
    && [ -x "$PERSONAE_HOSTS_DIR/node_modules/.bin/copilot" ]; then
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "20-hosts.sh: npm is not installed; the host end-to-end tests need it (apt-get install npm)" >&2
    return 1
  fi
  mkdir -p "$PERSONAE_HOSTS_DIR"
  # shellcheck disable=SC2086
  if ! npm install --prefix "$PERSONAE_HOSTS_DIR" --no-save --no-audit --no-fund --loglevel=error \
    $PERSONAE_HOSTS_PACKAGES >"$PERSONAE_HOSTS_DIR/npm-install.log" 2>&1; then
    echo "20-hosts.sh: npm install of $PERSONAE_HOSTS_PACKAGES failed; see $PERSONAE_HOSTS_DIR/npm-install.log" >&2
    return 1
  fi
  echo "$PERSONAE_HOSTS_PACKAGES" >"$stamp"
}
_personae_hosts_install
