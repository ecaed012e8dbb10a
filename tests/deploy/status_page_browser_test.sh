#!/usr/bin/env bash
# The status page in a real headless browser (Debian's chromium): starts a
# gdn-server (cpu backend, a small shape, free ports, a device tier of a few
# pages so that pages spill), drives calls with gdn-bench and gdn-cli, leaves
# the server idle with 3 open sessions, lets chromium load /status and run its
# script for a few seconds of virtual time, and checks every figure in the
# dumped DOM against /metrics (tests/deploy/check_status_page_dom.py).
#
# Usage: status_page_browser_test.sh GDN_SERVER GDN_CLI GDN_BENCH
# Exits 77 (ctest: skipped) when no chromium is installed; $GDN_CHROMIUM
# names another binary. $GDN_STATUS_PAGE_ARTIFACTS, if set, is a folder that
# receives the DOM, the /metrics text and the logs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/small_server.sh"
server_bin="$1" cli_bin="$2" bench_bin="$3"

for bin in "$server_bin" "$cli_bin" "$bench_bin"; do
  if [ ! -x "$bin" ]; then
    echo "status_page_browser_test: $bin is not built (cmake --build the project first)" >&2
    exit 1
  fi
done
chromium_bin="${GDN_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [ -z "$chromium_bin" ]; then
  echo "status_page_browser_test: SKIPPED, no chromium (scripts/install_deps.sh installs it)" >&2
  exit 77
fi

work="$(mktemp -d)"
server_pid="" static_pid=""
cleanup() {
  for pid in $server_pid $static_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "${GDN_STATUS_PAGE_ARTIFACTS:-}" ]; then
    mkdir -p "$GDN_STATUS_PAGE_ARTIFACTS"
    cp "$work"/*.html "$work"/*.txt "$work"/*.out "$work"/*.err "$GDN_STATUS_PAGE_ARTIFACTS"/ 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "status_page_browser_test: FAILED: $*" >&2
  for log in server.err chromium.err bench.out; do
    if [ -s "$work/$log" ]; then echo "--- $log (last lines)" >&2; tail -n 20 "$work/$log" >&2; fi
  done
  exit 1
}

# Pages are Hv*K*V*4 = 64 KiB: 6 on the device, 64 on the host. gdn-bench's 4
# concurrent sessions of 2 layers need 8, so some spill and come back.
start_small_server 4MiB
echo "status_page_browser_test: server grpc=$grpc metrics=$metrics"

# Traffic: prefill and decode over every layer (gdn-bench closes its
# sessions), then 3 sessions left open.
"$bench_bin" --server="$grpc" --sessions=4 --rounds=2 --prefill_tokens=24 \
  --decode_steps=6 >"$work/bench.out" 2>&1 || fail "gdn-bench failed"
for id in status-a status-b status-c; do
  "$cli_bin" --server="$grpc" create --id="$id" >/dev/null || fail "gdn-cli create $id failed"
done

curl -sf "http://$metrics/metrics" >"$work/metrics-before.txt" || fail "GET /metrics failed"
# Virtual time runs the page's 2 s scrape timer 4 times in a moment of real
# time (it stops while a fetch is in flight); --dump-dom prints the DOM then.
timeout 60 "$chromium_bin" --headless --no-sandbox --disable-gpu \
  --disable-dev-shm-usage --no-first-run --user-data-dir="$work/profile" \
  --virtual-time-budget=7000 --dump-dom "http://$metrics/status" \
  >"$work/dom.html" 2>"$work/chromium.err" || fail "chromium failed (rc $?)"
curl -sf "http://$metrics/metrics" >"$work/metrics.txt" || fail "GET /metrics failed"
cmp -s "$work/metrics-before.txt" "$work/metrics.txt" ||
  echo "status_page_browser_test: note: /metrics changed while the page was open" >&2
grep -q 'id="sessions"' "$work/dom.html" || fail "the DOM has no #sessions (chromium printed no page?)"

python3 "$here/check_status_page_dom.py" "$work/dom.html" "$work/metrics.txt" \
  --sessions=3 --min-spills=1 || fail "the page's figures differ from /metrics"
# A failing scrape shows the error line: the same page and its scripts from
# a plain file server that has no /metrics.
mkdir "$work/static"
curl -sf "http://$metrics/status" >"$work/static/status.html" || fail "GET /status failed"
while read -r script; do
  curl -sf "http://$metrics/$script" >"$work/static/$script" || fail "GET /$script failed"
done < <(sed -n 's/.*<script src="\([^"]*\)".*/\1/p' "$work/static/status.html")
# The log exists before the server starts: the loop below may read it before
# the background shell has opened it (sed then failed, and set -e ended the
# test: a flake seen in CI on 2026-12-02).
: >"$work/static.out"
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$work/static" \
  >"$work/static.out" 2>&1 &
static_pid=$!
static_port=""
for _ in $(seq 100); do
  static_port="$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$work/static.out")"
  if [ -n "$static_port" ]; then break; fi
  sleep 0.1
done
[ -n "$static_port" ] || fail "the static file server printed no port in 10 s"
timeout 60 "$chromium_bin" --headless --no-sandbox --disable-gpu \
  --disable-dev-shm-usage --no-first-run --user-data-dir="$work/profile" \
  --virtual-time-budget=3000 --dump-dom "http://127.0.0.1:$static_port/status.html" \
  >"$work/dom-no-metrics.html" 2>>"$work/chromium.err" || fail "chromium failed (rc $?)"
grep -q 'data-scrape-ok="false"' "$work/dom-no-metrics.html" ||
  fail "without /metrics the page does not say its scrape failed"
grep -q 'id="scrape-error">scrape of /metrics failed at .*HTTP 404' "$work/dom-no-metrics.html" ||
  fail "without /metrics the page shows no error line with the HTTP status"
echo "status_page_browser_test: passed"
