#!/usr/bin/env bash
# Session 30's first device call (it got an H100; this replaces session 29's
# visit_store.sh, which never ran): the quantized page store in one loop per
# (dtype, rounding) (bin/ of the pack, branch quant-store) against main `1764e16`
# (mainli/ prefill_state_bench, before/ decode_bench), bounded by BUDGET_S.
#   BUDGET_S=540 bash bench/results/2026-12-05-quant-store/visit.sh
# Every output goes to a work folder, packed into one $OUT/visit.tgz at the
# end (the device returns at most 8 files; as first run, the outputs went
# to $OUT directly and only 8 came back: visit1/ holds those, the rest of
# that run's results are in this folder's README).
set -u
RESULTS=${OUT:-/tmp/gdn_out}; mkdir -p "$RESULTS"
OUT=/tmp/quant_store_visit; rm -rf "$OUT"; mkdir -p "$OUT"
END=$(( $(date +%s) + ${BUDGET_S:-400} ))
LOG=$OUT/visit.log
. scripts/device/visit_steps.sh  # say, step
. scripts/device/unpack_bundle.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
cat .bundle/COMMIT "$BUNDLE/mainli/COMMIT" 2>/dev/null | tee -a "$LOG"
# Most telling first: the codec and prefill tests, one A/B round, then the rest.
ROWS=16/32/8/1024,16/32/4/4096,16/32/4/8192,16/32/1/32768
pstate_round() {
  for arm in mainli bin; do
    step 40 "pstate_${arm}_$1" "$BUNDLE/$arm/prefill_state_bench" --rows=$ROWS \
      --states=fp32,bf16,int8,fp8 --calls=10 --md="$OUT/pstate_${arm}_$1.md"
    cat "$OUT/pstate_${arm}_$1.md" >> "$LOG"
  done
}
for t in quantized_codec_test fused_chunk_test chunked_prefill_route_test \
         chunked_prefill_checkpoints_test recurrent_kernel_test; do
  step 90 "$t" "$B/$t" --gtest_brief=1
done
pstate_round 1
for t in chunked_prefill_spans_test chunked_prefill_test; do
  step 90 "$t" "$B/$t" --gtest_brief=1
done
pstate_round 2
step 200 quantized_state_test "$B/quantized_state_test" --gtest_brief=1
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step 60 memcheck_route "$SAN" --tool memcheck --error-exitcode 9 "$B/chunked_prefill_route_test" \
  --gtest_filter='*QuantizedPages*'
step 60 racecheck_ckpt "$SAN" --tool racecheck --error-exitcode 9 \
  "$B/chunked_prefill_checkpoints_test" --gtest_filter='*SpanPathBad*'
pstate_round 3
left=$(( END - $(date +%s) - 10 ))
[ "$left" -gt 60 ] && OUT=$OUT STATES=fp32,int8,fp8 BATCHES=128,256 ROUNDS=2 EXTRA_ARMS="" \
  SAN_TOOLS=" " NCU_BF16=0 timeout "$left" bash scripts/device/decode_ab_visit.sh > /dev/null 2>&1
say "decode_ab rc=$?"
say done
tar -C "$OUT" -czf "$RESULTS/visit.tgz" .
