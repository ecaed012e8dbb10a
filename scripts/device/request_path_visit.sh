#!/usr/bin/env bash
# One device visit for the request path (issue 16), <= ~9.5 minutes:
#  1. the GPU tests of what the new engine runs on the device (cuda streams
#     and the gather kernel, the whole server with concurrent clients against
#     the oracle, the backend), and compute-sanitizer memcheck on the first two;
#  2. bench/request_path/run.sh BACKEND=cuda: per shape (decode 1x1, 32x1,
#     256x1, prefill 1x2048) and transport (TCP, Unix socket), the echo
#     ceilings, gdn-server --diagnostic_no_compute and gdn-server with kernels
#     through gdn-bench --compare_echo, gdn-min-client, gRPC-default "before";
#  3. scripts/device/server_sweep.sh: the 36-layer sweep and the SLO search
#     (decode_step P99 <= 100 ms) on the cuda server.
# Needs .bundle from:
#   bash scripts/device/bundle.sh gdn-server gdn-bench gdn-echo gdn-min-client \
#     cuda_stream_test server_cuda_test cuda_backend_test
# PARTS=tests,bench,sweep (default all). Writes under $OUT (few files).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/request_path_visit.log
t0=$(date +%s)
say() { echo "== $* ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG"; }
PARTS=${PARTS:-tests,bench,sweep}
want() { [[ ",$PARTS," == *",$1,"* ]]; }

BUNDLE=$PWD/.bundle
if [ -f .bundle/pack.tar.xz ]; then  # bundle.sh packed bin/ and lib/ (over 60 MiB)
  BUNDLE=/tmp/gdn_bundle
  mkdir -p "$BUNDLE"
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    .bundle/pack.tar.xz "$BUNDLE"
  rm -rf .bundle/bin .bundle/lib
  ln -s "$BUNDLE/bin" .bundle/bin
  ln -s "$BUNDLE/lib" .bundle/lib
fi
export LD_LIBRARY_PATH=$BUNDLE/lib:$BUNDLE/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$BUNDLE/bin

say "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat .bundle/COMMIT
  lscpu | grep -E "Model name|^CPU\(s\)"; } 2>&1 | tee -a "$LOG"

if want tests; then
  for t in cuda_stream_test server_cuda_test cuda_backend_test; do
    say "$t"
    timeout 120 $B/$t 2>&1 | grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|OK \]|Failure|error|SEED" | tee -a "$LOG"
    echo "rc ${PIPESTATUS[0]}" | tee -a "$LOG"
  done
  SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for t in cuda_stream_test server_cuda_test; do
    say "compute-sanitizer memcheck $t"
    timeout 150 "$SANITIZER" --tool memcheck --error-exitcode 9 $B/$t > /tmp/san_$t.log 2>&1
    echo "rc $?" | tee -a "$LOG"
    grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED) " /tmp/san_$t.log | tee -a "$LOG"
  done
fi

if want bench; then
  say "request path (bench/request_path/run.sh, cuda)"
  BACKEND=cuda BIN=$B ARM_S=${ARM_S:-2} PREFILL_S=${PREFILL_S:-4} timeout 330 \
    bash bench/request_path/run.sh /tmp/request_path > /tmp/request_path.log 2>&1
  echo "rc $?" | tee -a "$LOG"
  tail -5 /tmp/request_path.log | tee -a "$LOG"
  cp /tmp/request_path/results.md "$OUT/request_path.md" 2>/dev/null
  tar -czf "$OUT/request_path.tar.gz" -C /tmp request_path request_path.log 2>/dev/null
  cat "$OUT/request_path.md" 2>/dev/null | tee -a "$LOG"
fi

if want sweep; then
  say "server sweep and SLO search (36 layers, cuda)"
  OUT=/tmp/sweep timeout 200 bash scripts/device/server_sweep.sh > /tmp/sweep.log 2>&1
  echo "rc $?" | tee -a "$LOG"
  tail -45 /tmp/sweep/server_sweep.log | tee -a "$LOG"
  tar -czf "$OUT/sweep.tar.gz" -C /tmp sweep sweep.log 2>/dev/null
fi
say "done"
