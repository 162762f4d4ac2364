#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed, for the operator page's browser test (test/integration/operator-page.test.ts, docs/operations.md
# "The operator page"), and prints its path. A new machine and CI have none; puppeteer-core's own browser download
# cannot reach its host here, so the test drives this one through its executablePath.
#
#   scripts/chromium.sh        # installs when missing (root, as on CI), then prints e.g. /usr/bin/chromium
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "chromium: $*" >&2; }
die() { echo "chromium: $*" >&2; exit 1; }
# shellcheck source=apt-install.inc.sh
source "$SCRIPT_DIR/apt-install.inc.sh"

find_chromium() { command -v chromium || command -v chromium-browser || true; }

path="$(find_chromium)"
if [[ -z "$path" ]]; then
  [[ "$(id -u)" == 0 ]] || die "chromium is not installed and installing it needs root (apt-get install chromium)"
  apt_install chromium
  path="$(find_chromium)"
  [[ -n "$path" ]] || die "the chromium package is installed but no chromium is on PATH"
fi
echo "$path"
