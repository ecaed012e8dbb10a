#!/usr/bin/env bash
# One device visit for same-host tensors (issue 18), <= ~8 minutes:
#  1. GPU tests: cuda_regions_test (CheckValues, host registration, bad IPC
#     handles), cuda_stream_test, server_cuda_test, cuda_backend_test;
#  2. compute-sanitizer memcheck of gdn-server while gdn-bench drives it
#     inline, through shm and through CUDA IPC regions;
#  3. bench/regions/run.sh: one Forward call inline (TCP, Unix socket) vs
#     shm vs cuda_ipc regions, decode 1 / 32 / 256 x 1, prefill 1 x 2048 and
#     1 x 4096, 4 layers;
# The Python client's CUDA-region check from a second process runs in
# python_visit.sh (client/python/tests/cuda_region_check.py).
# Needs .bundle from:
#   BUILD=build bash scripts/device/bundle.sh gdn-server gdn-bench cuda_stream_test \
#     server_cuda_test cuda_backend_test cuda_regions_test
# Writes under $OUT (few files).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/regions_visit.log
t0=$(date +%s)
say() { echo "== $* ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG"; }
. scripts/device/unpack_bundle.sh  # BUNDLE, B, LD_LIBRARY_PATH
say "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat .bundle/COMMIT; } 2>&1 | tee -a "$LOG"

for t in cuda_regions_test cuda_stream_test server_cuda_test cuda_backend_test; do
  say "$t"
  timeout 90 $B/$t 2>&1 | grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|error|Expected|Which|actual" | head -20 | tee -a "$LOG"
  echo "rc ${PIPESTATUS[0]}" | tee -a "$LOG"
done

SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
say "compute-sanitizer memcheck: gdn-server under inline, shm and cuda_ipc calls"
sock=/tmp/gdn_san.sock; rm -f $sock
"$SANITIZER" --tool memcheck --error-exitcode 9 $B/gdn-server --backend=cuda --layers=2 \
  --metrics_listen=127.0.0.1:0 --listen=unix:$sock > /tmp/san_server.out 2> /tmp/san_server.err &
spid=$!  # compute-sanitizer itself: the server is its child
for _ in $(seq 600); do grep -q listening /tmp/san_server.out 2>/dev/null && break; sleep 0.1; done
for tr in unary shm cuda_ipc; do
  for shape in "--sessions=8 --sessions_per_call=8 --prefill_tokens=100 --decode_steps=3" \
               "--sessions=2 --sessions_per_call=1 --prefill_tokens=300 --decode_steps=2"; do
    # shellcheck disable=SC2086
    timeout 60 $B/gdn-bench --server=unix:$sock --transport=$tr --layers=2 --rounds=1 \
      --progress=false $shape > /tmp/san_bench_$tr.txt 2>&1
    echo "gdn-bench $tr ($shape): rc $? $(grep -E "errors|failed" /tmp/san_bench_$tr.txt | head -2 | tr '\n' ' ')" | tee -a "$LOG"
  done
done
# SIGTERM to the server (the sanitizer reports when its child exits).
pkill -TERM -f "^$B/gdn-server --backend=cuda --layers=2"
( sleep 60; kill -KILL $spid 2>/dev/null ) & watchdog=$!
wait $spid; echo "sanitizer rc $? (0: no errors; 9: errors)" | tee -a "$LOG"
kill $watchdog 2>/dev/null
grep -E "ERROR SUMMARY|Invalid|out of bounds" /tmp/san_server.out /tmp/san_server.err | head -5 | tee -a "$LOG"

say "bench/regions/run.sh (cuda)"
BACKEND=cuda BIN=$B ARM_S=${ARM_S:-1.5} PREFILL_S=${PREFILL_S:-3} timeout ${BENCH_S:-200} \
  bash bench/regions/run.sh /tmp/regions > /tmp/regions.log 2>&1
echo "rc $?" | tee -a "$LOG"
grep "failed" /tmp/regions.log | head -5 | tee -a "$LOG"
cp /tmp/regions/results.md "$OUT/regions.md" 2>/dev/null && cat "$OUT/regions.md" | tee -a "$LOG"
tar -czf "$OUT/regions.tar.gz" -C /tmp regions regions.log 2>/dev/null

say "done"
