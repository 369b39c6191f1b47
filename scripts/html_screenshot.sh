#!/usr/bin/env bash
# Look at a result set's HTML page as a reader would: write it, then screenshot it in headless Chromium at 1,400 px
# (Debian: apt-get install chromium). Usage: scripts/html_screenshot.sh [RESULTS] [OUT]
set -euo pipefail
set_dir=${1:-results/reference}
out=${2:-/tmp/pebench-html}
rm -rf "$out"
python -m pebench report --html --results "$set_dir" --out "$out" > /dev/null
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$(mktemp -d)" --window-size=1400,9000 \
    --screenshot="$out/screenshot.png" "file://$(realpath "$out")/report.html" 2> /dev/null
echo "wrote $out/report.html and $out/screenshot.png"
