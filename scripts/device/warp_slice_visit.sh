#!/usr/bin/env bash
# One short device step for RecurrentVariant::kWarpSlice (the warp-slice
# decode kernel, kernels/cuda/recurrent_warp_slice_kernel.cuh): one binary
# holds both the persistent and the warp-slice variants, so decode_bench
# compares them in one run (its last table: % of copy per state dtype and
# batch, speedup, and each dtype's throughput against fp32 pages).
#
#   .bundle/bin/   decode_bench recurrent_kernel_test quantized_state_test
#                  draft_states_test recurrent_pdl_test
#   .bundle/lib/   shared libraries (scripts/device/copy_runtime_libs.sh)
# (or both in .bundle/pack.tar.xz: unpack_bundle.sh)
#
# Order: decode_bench, the GPU tests, compute-sanitizer memcheck on the
# warp-slice tests, decode_bench again (a second sample of the same
# binary). Every result goes to $OUT as soon as it exists, each binary runs
# under `timeout`, so a run cut short keeps what it measured. ~3-4 minutes.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/warp_slice.log
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # B, LD_LIBRARY_PATH
STATES=${STATES:-fp32,bf16,int8,fp8}
BATCHES=${BATCHES:-1,32,128,256}
cat .bundle/COMMIT 2>/dev/null | tee -a "$LOG"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$LOG"

bench_round() {  # round number
  timeout 100 "$B/decode_bench" --hv=32 --states="$STATES" --batches="$BATCHES" \
    --md="$OUT/decode_$1.md" --json="$OUT/decode_$1.json" > "$OUT/decode_$1.txt" 2>&1
  echo "decode_bench round $1: rc $?" | tee -a "$LOG"
  # The persistent / warp_slice table (the last one of the report).
  grep -E "^\| 32 \| (fp32|bf16|int8|fp8) \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+x" \
    "$OUT/decode_$1.md" 2>/dev/null | tee -a "$LOG"
}

run_test() {  # seconds, name, binary, args...
  local secs=$1 name=$2 bin=$3
  shift 3
  timeout "$secs" "$B/$bin" "$@" > "$OUT/test_$name.txt" 2>&1
  local rc=$?
  echo "$name: rc $rc $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_$name.txt" | tr '\n' ' ')" |
    tee -a "$LOG"
  [ $rc = 0 ] || grep -E "Failure|Expected|Which is|FAILED|error" "$OUT/test_$name.txt" |
    head -20 >> "$LOG"
}

say "decode_bench round 1"
bench_round 1

say "tests"
run_test 90 recurrent_kernel_test recurrent_kernel_test \
  "--gtest_filter=*WarpSlice*:*EveryVariantMatchesOracle*:*WideIsCompiled*:*HugeAndTinyQkRows*:*DecodeMatchesOracleOverOptionGrid*:*DecodeMixedTokensLargeBatch*:*WritesOnlyFinalPages*"
run_test 90 quantized_state_test quantized_state_test
run_test 45 draft_states_test draft_states_test
run_test 45 recurrent_pdl_test recurrent_pdl_test

say "compute-sanitizer memcheck (warp_slice tests)"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/recurrent_kernel_test" \
  "--gtest_filter=*WarpSliceMatchesOracleEverywhere*:*WritesOnlyFinalPages*" \
  > "$OUT/memcheck_recurrent.txt" 2>&1
echo "memcheck recurrent_kernel_test: rc $? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' "$OUT/memcheck_recurrent.txt" | tr '\n' ' ')" | tee -a "$LOG"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/quantized_state_test" \
  "--gtest_filter=*WarpSliceMatchesThePersistentPages*" > "$OUT/memcheck_quantized.txt" 2>&1
echo "memcheck quantized_state_test: rc $? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' "$OUT/memcheck_quantized.txt" | tr '\n' ' ')" | tee -a "$LOG"

say "decode_bench round 2"
bench_round 2
say "done"
