#!/usr/bin/env bash
# The status page's charts in a real headless browser, screenshot included:
# starts a gdn-server (cpu backend, a small shape, free ports, a device tier
# of 6 pages so that pages spill), keeps gdn-bench calling it, opens
# /status?scrape_ms=250 in headless chromium until the page has made 16 of
# its own scrapes (tests/deploy/status_page_screenshot.py: real time, over
# the DevTools pipe), then checks every chart in the DOM and in the PNG
# (tests/deploy/check_status_charts.py). Then the checker's own test: the
# same page with four charts broken on purpose (lines hidden, path emptied,
# tick labels removed, chart emptied) must fail on exactly those four.
#
# Usage: status_charts_browser_test.sh GDN_SERVER GDN_BENCH
# Exits 77 (ctest: skipped) when no chromium is installed ($GDN_CHROMIUM
# names another binary) or python3 lacks numpy or matplotlib.
# $GDN_STATUS_PAGE_ARTIFACTS, if set, is a folder that receives the
# screenshots, chart geometry, DOM, /metrics text and logs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/small_server.sh"
server_bin="$1" bench_bin="$2"

for bin in "$server_bin" "$bench_bin"; do
  if [ ! -x "$bin" ]; then
    echo "status_charts_browser_test: $bin is not built (cmake --build the project first)" >&2
    exit 1
  fi
done
chromium_bin="${GDN_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [ -z "$chromium_bin" ]; then
  echo "status_charts_browser_test: SKIPPED, no chromium (scripts/install_deps.sh installs it)" >&2
  exit 77
fi
if ! python3 -c "import matplotlib.image, numpy" 2>/dev/null; then
  echo "status_charts_browser_test: SKIPPED, python3 has no numpy or matplotlib" \
    "(scripts/install_deps.sh installs them)" >&2
  exit 77
fi

work="$(mktemp -d)"
server_pid="" bench_pid=""
stop_bench() {
  if [ -n "$bench_pid" ]; then
    kill "$bench_pid" 2>/dev/null || true
    wait "$bench_pid" 2>/dev/null || true
    bench_pid=""
  fi
}
cleanup() {
  stop_bench
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ -n "${GDN_STATUS_PAGE_ARTIFACTS:-}" ]; then
    mkdir -p "$GDN_STATUS_PAGE_ARTIFACTS/charts"
    cp -r "$work"/capture "$work"/*.txt "$work"/*.out "$work"/*.err \
      "$GDN_STATUS_PAGE_ARTIFACTS/charts"/ 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "status_charts_browser_test: FAILED: $*" >&2
  for log in server.err bench.out capture/chromium.log; do
    if [ -s "$work/$log" ]; then
      echo "--- $log (last lines; chromium's complaints about D-Bus left out)" >&2
      grep -v "dbus" "$work/$log" | tail -n 20 >&2
    fi
  done
  exit 1
}

# Pages are Hv*K*V*4 = 64 KiB: 6 on the device, 16 on the host. gdn-bench's 4
# concurrent sessions of 2 layers need 8, so pages spill and come back and
# the cache chart moves.
start_small_server 1MiB
echo "status_charts_browser_test: server grpc=$grpc metrics=$metrics"

# Load for as long as the page needs (stopped below): sessions created,
# prefilled, decoded and closed over and over, so every chart moves. 1 ms of
# think time between decode steps leaves CPU to chromium on a 2-core machine.
"$bench_bin" --server="$grpc" --sessions=4 --prefill_tokens=24 --decode_steps=6 \
  --think_ms=1 --duration_s=120 --progress=false >"$work/bench.out" 2>&1 &
bench_pid=$!
# Every method of the load has been called once before the page opens: the
# page then sees at least the series of metrics.txt.
for _ in $(seq 300); do
  curl -sf "http://$metrics/metrics" >"$work/metrics.txt" || fail "GET /metrics failed"
  if grep -q 'gdn_requests_total{code="OK",method="CloseSession"}' "$work/metrics.txt" &&
     grep -q 'gdn_queue_duration_seconds_count{method="Forward"}' "$work/metrics.txt"; then
    break
  fi
  kill -0 "$bench_pid" 2>/dev/null || fail "gdn-bench exited early"
  sleep 0.1
done
grep -q 'method="CloseSession"' "$work/metrics.txt" || fail "no CloseSession call in 30 s"

python3 "$here/status_page_screenshot.py" --chromium="$chromium_bin" \
  --scrapes=16 --timeout-s=45 "http://$metrics/status?scrape_ms=250" "$work/capture" \
  --break=chart-calls:hidden-lines --break=chart-latency:empty-path \
  --break=chart-cache:no-ticks --break=chart-tokens:blank ||
  fail "chromium could not load and capture the page"
stop_bench

python3 "$here/check_status_charts.py" --min-points=6 \
  "$work/capture/clean" "$work/metrics.txt" || fail "the charts are broken"
echo "status_charts_browser_test: the checker on charts broken on purpose" \
  "(chart-calls, -latency, -cache, -tokens must fail, the rest pass):"
python3 "$here/check_status_charts.py" --min-points=6 \
  --expect-broken=chart-calls,chart-latency,chart-cache,chart-tokens \
  "$work/capture/broken" "$work/metrics.txt" ||
  fail "the checker did not catch exactly the charts broken on purpose"
echo "status_charts_browser_test: passed"
