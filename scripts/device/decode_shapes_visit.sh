#!/usr/bin/env bash
# One short device step: candidate block shapes of the persistent decode
# kernel (RecurrentVariantShapes in kernels/cuda/recurrent_instances.h are
# compile-time, so each candidate is its own build) against the current one,
# in one run, then the decode tests of each candidate.
#
#   .bundle/bin/            candidate A: decode_bench and the tests below
#   .bundle/lib/            shared libraries (scripts/device/copy_runtime_libs.sh)
#   .bundle/before/         decode_bench of the current shapes
#   .bundle/<arm>/          further candidates (ARMS), the same binaries as bin/
#   .bundle/SHAPES          what each arm is (printed into the log)
# (or all of bin/ lib/ before/ <arm>/ in .bundle/pack.tar.xz: unpack_bundle.sh)
#
# Order: decode_bench round 1 (every arm), the tests of each candidate,
# round 2; every result goes to $OUT as soon as it exists, so a run cut
# short by the lease keeps what it measured. ARMS ("A B"), STATES, BATCHES.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/shapes.log
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # B, LD_LIBRARY_PATH
ARMS=${ARMS:-A B}
STATES=${STATES:-fp32,bf16,int8,fp8}
BATCHES=${BATCHES:-128,256}
cat .bundle/SHAPES 2>/dev/null | tee -a "$LOG"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$LOG"

bin_of() {  # arm -> its directory
  case $1 in
    A) echo "$B" ;;
    *) echo "$BUNDLE/$1" ;;
  esac
}

bench_round() {  # round number
  for arm in before $ARMS; do
    timeout 60 "$(bin_of "$arm")/decode_bench" --hv=32 --states="$STATES" --batches="$BATCHES" \
      --md="$OUT/${arm}_$1.md" --json=/tmp/decode_${arm}_$1.json > /tmp/decode_${arm}_$1.txt 2>&1
    echo "$arm round $1: rc $?" | tee -a "$LOG"
    grep -E "^\| 32 \| (fp32|bf16|int8|fp8) \|" "$OUT/${arm}_$1.md" 2>/dev/null | tee -a "$LOG"
  done
}

say "decode_bench round 1"
bench_round 1

TESTS=("recurrent_kernel_test --gtest_filter=*EveryVariantMatchesOracle*:*DecodeMatchesOracleOverOptionGrid*:*DecodeMixedTokensLargeBatch*:*HugeAndTinyQkRows*:*ThousandStepDecodeChain*:*WritesOnlyFinalPages*"
       "quantized_state_test"
       "draft_states_test"
       "recurrent_pdl_test")
for arm in $ARMS; do
  dir=$(bin_of "$arm")
  for t in "${TESTS[@]}"; do
    read -r -a args <<< "$t"  # split, never globbed
    timeout 60 "$dir/${args[0]}" "${args[@]:1}" > "/tmp/test_${arm}_${args[0]}.txt" 2>&1
    rc=$?
    echo "$arm ${args[0]}: rc $rc $(grep -E '^\[  (PASSED|FAILED) ' "/tmp/test_${arm}_${args[0]}.txt" | tr '\n' ' ')" | tee -a "$LOG"
    [ $rc = 0 ] || grep -E "Failure|Expected|Which is|FAILED" "/tmp/test_${arm}_${args[0]}.txt" | head -20 >> "$LOG"
  done
done

say "decode_bench round 2"
bench_round 2
say "done"
