#!/usr/bin/env bash
# Installs Debian's Chromium for tests/test_browser.py when /usr/bin/chromium is missing.
# Idempotent and quiet: does nothing when Chromium is already there. Never downloads a browser build
# of its own (no `playwright install`): Playwright drives this system Chromium.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-browser: installing Debian chromium (apt-get)" >&2
$SUDO apt-get update -qq >/dev/null
# fonts-liberation: readable text in the screenshots the browser test saves.
$SUDO apt-get install -y -qq chromium fonts-liberation >/dev/null

if [ ! -x /usr/bin/chromium ]; then
  echo "install-browser: /usr/bin/chromium still missing after apt-get install" >&2
  exit 1
fi
