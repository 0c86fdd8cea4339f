#!/usr/bin/env bash
# ensure-chromium.sh: headless Chromium and its matching WebDriver for the
# console's browser test, from Debian's packages.
#
# Idempotent: exits at once when `chromium` and `chromedriver` are on PATH.
# Otherwise installs Debian's `chromium` and `chromium-driver` (built from the
# same source package, so the driver always matches the browser) as root.
set -euo pipefail

say() { echo "ensure-chromium: $*" >&2; }

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "the console test needs chromium and chromium-driver: apt-get install them as root"
    exit 1
fi
say "installing Debian's chromium and chromium-driver (apt-get)"
export DEBIAN_FRONTEND=noninteractive
start=$SECONDS
if ! apt-get install -y -q --no-install-recommends chromium chromium-driver </dev/null >&2; then
    apt-get update -q </dev/null >&2
    apt-get install -y -q --no-install-recommends chromium chromium-driver </dev/null >&2
fi
say "installed in $((SECONDS - start)) s: $(chromium --version 2>/dev/null)"
