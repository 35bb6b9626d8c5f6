#!/usr/bin/env bash
# Install headless Chromium and its WebDriver from Debian for the leaderboard browser test
# (tests/leaderboards/test_browser.py). Idempotent and quiet: does nothing when both are present.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

if have chromium && have chromedriver; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
have chromium && have chromedriver || { echo "setup-browser: chromium or chromedriver missing after install" >&2; exit 1; }
