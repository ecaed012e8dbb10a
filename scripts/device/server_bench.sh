#!/usr/bin/env bash
# One device visit for the server: starts gdn-server on the cuda backend on
# loopback, drives it with gdn-bench (a decode-heavy and a prefill-heavy
# workload at the default Qwen3-Next shape, all 36 layers), scrapes /metrics
# before and after, and writes everything under $OUT.
# Needs .bundle (scripts/device/bundle.sh with gdn-server and gdn-bench).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:$PWD/.bundle/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=.bundle/bin
LOG=$OUT/server_bench.log
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }

say "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat .bundle/COMMIT; } 2>&1 | tee -a "$LOG"

# The GPU tests of what the server runs (cuda backend, chunked prefill),
# first (SKIP_TESTS=1: already run in this call). WORKLOADS picks the
# gdn-bench runs (default "decode prefill").
tests="chunked_prefill_test cuda_backend_test"
[ -n "${SKIP_TESTS:-}" ] && tests=""
for t in $tests; do
  if [ -x $B/$t ]; then
    say "$t"
    timeout 120 $B/$t 2>&1 | grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|OK \]|Failure|error" | tee -a "$LOG"
    echo "rc ${PIPESTATUS[0]}" | tee -a "$LOG"
  fi
done

say "gdn-server --backend=cuda"
$B/gdn-server --backend=cuda --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
  >/tmp/server.out 2>/tmp/server.err &
server_pid=$!
for _ in $(seq 100); do
  grep -q "listening" /tmp/server.out 2>/dev/null && break
  sleep 0.2
done
line=$(grep "listening" /tmp/server.out)
echo "$line" | tee -a "$LOG"
grpc=$(echo "$line" | sed -E 's/.*grpc=([^ ]+).*/\1/')
metrics=$(echo "$line" | sed -E 's/.*metrics=([^ ]+).*/\1/')
if [ -z "$grpc" ]; then
  cat /tmp/server.err | tail -30 | tee -a "$LOG"
  exit 1
fi

run_bench() {  # name, then gdn-bench flags
  local name=$1; shift
  say "gdn-bench $name: $*"
  timeout 120 $B/gdn-bench --server="$grpc" --json_out="$OUT/bench_$name.json" "$@" 2>&1 \
    | tail -40 | tee -a "$LOG"
  echo "rc ${PIPESTATUS[0]}" | tee -a "$LOG"
}

workloads=" ${WORKLOADS:-decode prefill} "
# Decode-heavy: 128 sessions, 32 per call (a model runner's batch), all 36 layers.
[[ "$workloads" == *" decode "* ]] && run_bench decode --sessions=128 --sessions_per_call=32 --prefill_tokens=64 --decode_steps=256 \
  --warmup_s=3 --duration_s=20
# Prefill-heavy: 8 sessions of 4096-token prompts, one per call.
[[ "$workloads" == *" prefill "* ]] && run_bench prefill --sessions=8 --sessions_per_call=1 --prefill_tokens=4096 --decode_steps=4 \
  --warmup_s=3 --duration_s=20

python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('http://$metrics/metrics').read().decode())" \
  > "$OUT/metrics_after.txt" || true
kill -TERM $server_pid; wait $server_pid; echo "server exit $?" | tee -a "$LOG"
tail -40 /tmp/server.err > "$OUT/server_stderr_tail.txt"
say "done"
