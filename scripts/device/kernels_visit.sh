#!/usr/bin/env bash
# One device visit (<= ~9.5 minutes) for the decode and prefill kernels
# together, when both changed: the decode suite's GPU tests and benchmark
# (scripts/device/gpu_suite.sh PARTS=tests,bench), the prefill gtest and the
# FLA comparison (bench/prefill/compare_fla.py), compute-sanitizer on small
# prefill cases (prefill_visit.sh). Everything lands in $OUT/visit.tar.gz plus the two
# Markdown tables (the tool brings back at most 8 files).
# Bundle here with:
#   BUILD=build-decode bash scripts/device/bundle.sh cuda_backend_test recurrent_kernel_test \
#     decode_graph_test gdn_capi_test decode_bench gdn_capi recurrent_pdl_test \
#     graphed_decode_runner_test server_decode_graph_test chunked_prefill_test gdn-server gdn-bench
# then run carry [".bundle", ".whl"] command "bash scripts/device/kernels_visit.sh".
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
WORK=/tmp/gdn_visit
mkdir -p "$WORK"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }

# 1. Decode: GPU tests (backend, streams, PDL, server) and the benchmark.
OUT=$WORK PARTS=tests,bench TEST_TIMEOUT=60 timeout 300 bash scripts/device/gpu_suite.sh > "$WORK/decode_console.log" 2>&1
echo "== decode suite done at $(elapsed)s"
grep -E "^== |^rc |^\[  (PASSED|FAILED) |^\[  FAILED" "$WORK/suite.log" | head -60

# 2. Prefill: scripts/device/prefill_visit.sh (gtests, the benchmark next to
# FLA, memcheck / racecheck) with what is left of ~500 s, no ncu; it packs
# $WORK, decode files included, into $OUT/visit.tar.gz.
BENCH_END_S=$(( 500 - $(elapsed) )) CHECKS_S=60 SKIP_NCU=1 OUT="$OUT" \
  bash scripts/device/prefill_visit.sh
cp "$WORK/decode_bench.md" "$OUT/" 2>/dev/null
echo "== done at $(elapsed)s"
