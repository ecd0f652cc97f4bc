# The web viewer's browser tests (tests/ui/): Debian's Chromium, driven headless by Playwright
# (the pip package only; never `playwright install`: the tests launch /usr/bin/chromium).
apt_install chromium
[ -x /usr/bin/chromium ] || { echo "setup: /usr/bin/chromium missing after apt install" >&2; return 1; }
pip_extras dev ui ui-test otel
