#!/usr/bin/env bash
# Session affinity through nginx, across a drain (ctest label "deploy"):
#   - three gdn-servers (CPU backend, small shape, free ports) sharing one
#     --snapshot_dir, behind nginx (deploy/nginx/render-config.sh: consistent
#     hash of x-gdn-route), run unprivileged under a temp directory;
#   - gdn-bench drives load through the proxy for the whole run;
#   - affinity_driver creates sessions through the proxy, checks they spread
#     over the servers and that every output matches the float64 oracle; when
#     it is ready it names a server, which this script SIGTERMs; the driver
#     keeps going (UNAVAILABLE retried: nginx marks the drained server down
#     and sends the retry to the next server, which restores each session
#     from the snapshot dir) and checks that nothing
#     was lost;
#   - gdn-bench must finish with no errors (retried tries are counted apart);
#   - no call is lost in the drain: nginx's access log shows every call
#     through the proxy answered OK or UNAVAILABLE (retryable, not applied),
#     never e.g. CANCELLED (issue 21, defect 10).
# AFFINITY_BENCH_SESSIONS=24 (default 4) loads the drain harder, for loops
# such as `ctest -R deploy_affinity --repeat until-fail:20`.
# Usage: affinity_test.sh GDN_SERVER GDN_BENCH AFFINITY_DRIVER
# Needs nginx (Debian's package; scripts/install_deps.sh installs it).
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 GDN_SERVER GDN_BENCH AFFINITY_DRIVER" >&2
  exit 2
fi
server_bin="$1"
bench_bin="$2"
driver_bin="$3"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
nginx_bin="$(command -v nginx || true)"
[ -n "$nginx_bin" ] || nginx_bin=/usr/sbin/nginx
if [ ! -x "$nginx_bin" ]; then
  echo "affinity_test: nginx not found (apt-get install nginx, or scripts/install_deps.sh)" >&2
  exit 1
fi

test_name=affinity_test
log_globs='*.log nginx/error.log'
log_lines=40
# shellcheck source=SCRIPTDIR/temp_workspace.sh
. "$(dirname "${BASH_SOURCE[0]}")/temp_workspace.sh"  # $work, $pids, the EXIT trap
trap 'exit 130' INT TERM

fail() {
  echo "affinity_test: FAIL: $*" >&2
  exit 1
}

# --- three servers ----------------------------------------------------------
mkdir -p "$work/snapshots"
grpc=()
metrics=()
server_pids=()
for i in 0 1 2; do
  "$server_bin" --backend=cpu --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
    --snapshot_dir="$work/snapshots" --layers=3 --qk_heads=1 --v_heads=2 \
    --head_dim_k=64 --head_dim_v=64 --activation_dtype=fp32 --state_dtype=fp32 \
    --cpu_threads=1 --max_queue_delay_us=100 --device_state_budget=256MiB \
    --host_state_budget=256MiB --drain_timeout_s=10 \
    >"$work/server$i.out" 2>"$work/server$i.log" &
  pids+=($!)
  server_pids+=($!)
done
for i in 0 1 2; do
  line=""
  for _ in $(seq 300); do
    line="$(grep -m1 '^gdn-server listening ' "$work/server$i.out" || true)"
    [ -n "$line" ] && break
    kill -0 "${server_pids[$i]}" 2>/dev/null || fail "server $i exited at start-up"
    sleep 0.1
  done
  [ -n "$line" ] || fail "server $i printed no start-up line"
  # gdn-server listening grpc=HOST:PORT metrics=HOST:PORT
  g="${line#*grpc=}"
  g="${g%% *}"
  m="${line#*metrics=}"
  m="${m%% *}"
  grpc+=("$g")
  metrics+=("$m")
done
echo "affinity_test: servers ${grpc[*]} (metrics ${metrics[*]})"

# --- nginx --------------------------------------------------------------------
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
mkdir -p "$work/nginx"
proxy=""
for _ in 1 2 3; do  # a free port can be taken before nginx binds it: try again
  port="$(free_port)"
  bash "$root/deploy/nginx/render-config.sh" "127.0.0.1:$port" "$work/nginx" "${grpc[@]}" \
    >"$work/nginx/nginx.conf"
  "$nginx_bin" -t -q -p "$work/nginx" -c "$work/nginx/nginx.conf"
  "$nginx_bin" -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' \
    >"$work/nginx.log" 2>&1 &
  nginx_pid=$!
  pids+=("$nginx_pid")
  for _ in $(seq 50); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      proxy="127.0.0.1:$port"
      break
    fi
    kill -0 "$nginx_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$proxy" ] && break
done
[ -n "$proxy" ] || fail "nginx did not start"
echo "affinity_test: nginx on $proxy"

# --- sessions and load through the proxy ----------------------------------------
grpc_list="$(IFS=,; echo "${grpc[*]}")"
metrics_list="$(IFS=,; echo "${metrics[*]}")"
"$driver_bin" --proxy="$proxy" --servers="$grpc_list" --metrics="$metrics_list" \
  --ready_file="$work/ready" >"$work/driver.log" 2>&1 &
driver_pid=$!
pids+=("$driver_pid")

# --- drain one server mid-run ---------------------------------------------------
for _ in $(seq 1200); do
  [ -f "$work/ready" ] && break
  kill -0 "$driver_pid" 2>/dev/null || break
  sleep 0.1
done
[ -f "$work/ready" ] || { cat "$work/driver.log" >&2; fail "the driver never became ready"; }
target="$(cat "$work/ready")"
# Load from gdn-bench before, during and after the drain (the driver keeps
# going meanwhile: it stops a few rounds after the server is gone).
# AFFINITY_BENCH_SESSIONS raises the load (and the calls in flight when the
# drained server shuts down) for stress loops; the default keeps CI light.
bench_sessions="${AFFINITY_BENCH_SESSIONS:-4}"
"$bench_bin" --server="$proxy" --sessions="$bench_sessions" --sessions_per_call=2 --prefill_tokens=24 \
  --decode_steps=12 --duration_s=12 --progress=false --json_out="$work/bench.json" \
  >"$work/bench.log" 2>&1 &
bench_pid=$!
pids+=("$bench_pid")
sleep 3
kill -0 "$bench_pid" 2>/dev/null || fail "gdn-bench ended before the drain"
echo "affinity_test: SIGTERM to server $target (${grpc[$target]})"
kill -TERM "${server_pids[$target]}"
drain_status=0
wait "${server_pids[$target]}" || drain_status=$?
echo "affinity_test: server $target exited with status $drain_status"
grep -i -E 'drain|snapshot' "$work/server$target.log" | tail -n 5 || true
[ "$drain_status" -eq 0 ] || fail "the drained server exited with status $drain_status"

driver_status=0
wait "$driver_pid" || driver_status=$?
cat "$work/driver.log"
bench_status=0
wait "$bench_pid" || bench_status=$?
grep -E '^  (errors|retries)' "$work/bench.log" || true

# No call may be lost in the drain: every call through the proxy (the
# driver's, gdn-bench's, retries included) ended OK or UNAVAILABLE (a gRPC
# status in the trailers or in a trailers-only answer, or nginx's own 502 /
# 503 / 504, which gRPC clients read as UNAVAILABLE). Anything else, e.g. a
# CANCELLED from a server shutting down, fails the test.
python3 - "$work/nginx/access.log" <<'EOF'
import collections, re, sys
ok, unavailable, lost = 0, 0, collections.Counter()
examples = []
for line in open(sys.argv[1]):
    m = re.search(r'" (\d{3}) ', line)
    if not m:
        continue
    fields = dict(re.findall(r'(\w+)=(\S*)', line))
    codes = {fields.get("grpc_status", "-"), fields.get("grpc_header_status", "-")} - {"-", ""}
    if codes == {"0"}:
        ok += 1
    elif codes == {"14"} or (not codes and m.group(1) in ("502", "503", "504")):
        unavailable += 1
    else:
        lost[",".join(sorted(codes)) or "http " + m.group(1)] += 1
        if len(examples) < 5:
            examples.append(line.strip())
print("affinity_test: calls through the proxy: %d OK, %d UNAVAILABLE (retried), %d other"
      % (ok, unavailable, sum(lost.values())))
if lost:
    sys.exit("affinity_test: FAIL: calls lost in the drain (gRPC status: count) %s:\n  %s"
             % (dict(lost), "\n  ".join(examples)))
if ok == 0:
    sys.exit("affinity_test: FAIL: the proxy logged no call")
EOF
[ "$driver_status" -eq 0 ] || fail "affinity_driver failed ($driver_status)"
[ "$bench_status" -eq 0 ] || fail "gdn-bench failed ($bench_status)"
python3 - "$work/bench.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
errors = {k: v for k, v in r["errors"].items() if int(v) > 0}
sessions = r["sessions"]
print("affinity_test: gdn-bench sessions %s/%s completed, retries %s, errors %s"
      % (sessions["completed"], sessions["started"], r.get("retries", {}), errors or "none"))
if errors:
    sys.exit("affinity_test: FAIL: gdn-bench errors through the drain: %s" % errors)
if int(sessions["completed"]) == 0:
    sys.exit("affinity_test: FAIL: gdn-bench completed no session")
EOF
leftover="$(find "$work/snapshots" -name '*.gdnsnap' | wc -l)"
echo "affinity_test: $leftover snapshot file(s) not restored (sessions no call asked for since)"
echo "affinity_test: passed"
