#!/usr/bin/env bash
# One device visit for a decode call's device phase (the copies around the
# kernel; --decode_o_direct, server/engine/engine_batches.cc), <= ~5 minutes:
#  1. the GPU tests that run the path (server_cuda_test: the whole server
#     against the oracle; cuda_stream_test), compute-sanitizer memcheck on
#     decode_host_io_bench;
#  2. decode_host_io_bench (bench/decode/host_io_bench.cc): one decode
#     call's device phase with copies around the kernel, the kernel on pinned
#     host memory, o only written to pinned memory, the kernel alone; fp32
#     and bf16 states;
#  3. server A/B: gdn-server A (A_FLAGS) and B (B_FLAGS), both with kernels,
#     called in turns by one gdn-bench (--compare_echo=B: ABBA turns, ratio =
#     A / B), per shape (SHAPES) and call kind (CALLS: unary, stream), TCP.
# Needs .bundle from:
#   bash scripts/device/bundle.sh gdn-server gdn-bench decode_host_io_bench \
#     server_cuda_test cuda_stream_test
# Writes under $OUT: decode_io_visit.log, host_io_*.txt, ab.tar.gz.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/decode_io_visit.log
t0=$(date +%s)
say() { echo "== $* ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG"; }
PARTS=${PARTS:-tests,micro,ab}
want() { [[ ",$PARTS," == *",$1,"* ]]; }

. scripts/device/unpack_bundle.sh  # BUNDLE, B, LD_LIBRARY_PATH

say "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat .bundle/COMMIT
  lscpu | grep -E "Model name|^CPU\(s\)"; } 2>&1 | tee -a "$LOG"

if want tests; then
  for t in ${TESTS:-server_cuda_test cuda_stream_test}; do
    say "$t"
    timeout "${TEST_TIMEOUT:-120}" "$B/$t" 2>&1 \
      | grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|SEED" | tee -a "$LOG"
    echo "rc ${PIPESTATUS[0]}" | tee -a "$LOG"
  done
  SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  say "compute-sanitizer memcheck decode_host_io_bench"
  timeout 120 "$SANITIZER" --tool memcheck --error-exitcode 9 "$B/decode_host_io_bench" \
    --batches=1,32,256 --calls=5 --rounds=1 > /tmp/san_host_io.log 2>&1
  echo "rc $?" | tee -a "$LOG"
  grep -E "ERROR SUMMARY|batch|disagree" /tmp/san_host_io.log | tee -a "$LOG"
fi

if want micro; then
  for state in ${MICRO_STATES:-fp32 bf16}; do
    say "decode_host_io_bench --state=$state"
    timeout 150 "$B/decode_host_io_bench" --state="$state" --batches="${MICRO_BATCHES:-1,8,32,64,128,256}" \
      --calls="${MICRO_CALLS:-2000}" --rounds=3 2>&1 | tee "$OUT/host_io_$state.txt" | tee -a "$LOG"
  done
fi

if want ab; then
  start() {  # name flags...: ADDR of a started server
    local name=$1; shift
    "$B/gdn-server" --backend=cuda --layers=4 --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
      "$@" > "/tmp/$name.out" 2> "/tmp/$name.err" &
    for _ in $(seq 150); do grep -q listening "/tmp/$name.out" 2>/dev/null && break; sleep 0.2; done
    ADDR=$(sed -nE 's/.*grpc=([^ ]+).*/\1/p' "/tmp/$name.out")
    METRICS=$(sed -nE 's/.*metrics=([^ ]+).*/\1/p' "/tmp/$name.out")
  }
  # shellcheck disable=SC2086  # flag lists split on purpose
  start ab_a ${A_FLAGS:---decode_o_direct=true}
  a=$ADDR; a_metrics=$METRICS
  # shellcheck disable=SC2086
  start ab_b ${B_FLAGS:---decode_o_direct=false}
  b=$ADDR
  say "A ($a): ${A_FLAGS:---decode_o_direct=true}; B ($b): ${B_FLAGS:---decode_o_direct=false}"
  mkdir -p /tmp/ab
  for call in ${CALLS:-stream unary}; do
    for shape in ${SHAPES:-decode1 decode32 decode256}; do
      n=${shape#decode}
      run=/tmp/ab/${shape}_$call
      say "A/B $shape $call"
      timeout 90 "$B/gdn-bench" --server="$a" --compare_echo="$b" --compare_rounds="${TURNS:-4}" \
        --metrics="$a_metrics" --transport="$call" --layers=4 --sessions="$n" \
        --sessions_per_call="$n" --prefill_tokens=0 --decode_steps=1000000 \
        --duration_s="${ARM_S:-2}" --warmup_s=0.5 --progress=false --json_out="$run.json" \
        > "$run.txt" 2>&1
      echo "rc $?" | tee -a "$LOG"
      grep -E "queue|kernel calls|server p50|^ +decode +[0-9]" "$run.txt" | tee -a "$LOG"
    done
  done
  pkill -TERM -f "bin/gdn-server"
  tar -czf "$OUT/ab.tar.gz" -C /tmp ab ab_a.out ab_a.err ab_b.out ab_b.err 2>/dev/null
fi
say "done"
