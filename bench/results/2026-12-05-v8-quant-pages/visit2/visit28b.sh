#!/usr/bin/env bash
# Session 28, device call B (one call, <= 590 s): visit28 = main + v8-quant-pages + the
# initial-page load fix (97700fe) + cand-test (merged, a2d2d22+). Steps by value, each
# bounded by what is left of the call.
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
END=$(( $(date +%s) + ${BUDGET_S:-575} ))
LOG=$OUT/visit.log
. scripts/device/visit_steps.sh  # say, step (written inline here when it ran)
. scripts/device/unpack_bundle.sh
ln -sfn "$BUNDLE/before" .bundle/before
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
cat .bundle/COMMIT | tee -a "$LOG"
# 1. the prefill tests of the fix (initial pages of every dtype) and the merged decode tests
for t in fused_chunk_test chunked_prefill_route_test chunked_prefill_spans_test \
         chunked_prefill_checkpoints_test; do
  step 60 "$t" "$B/$t" --gtest_brief=1
done
# 2. prefill time by state dtype: main, visit28, span-checkpoints (kQuantPages split)
for arm in before after ckpt; do
  bin=$B/prefill_state_bench; [ $arm != after ] && bin=$BUNDLE/$arm/prefill_state_bench
  step 40 "pstate_$arm" "$bin" --rows=16/32/8/1024,16/32/1/8192,16/32/4/4096,16/32/1/32768 \
    --states=fp32,bf16,int8,fp8 --calls=10 --md="$OUT/pstate_$arm.md"
  cat "$OUT/pstate_$arm.md" | tee -a "$LOG"
done
# 2b. the span path with checkpoints (branch span-checkpoints, its own build in ckpt/)
for t in chunked_prefill_checkpoints_test chunked_prefill_spans_test chunked_prefill_route_test \
         fused_chunk_test; do
  step 90 "ckpt_$t" "$BUNDLE/ckpt/$t" --gtest_brief=1
done
# 2c. the merged decode's tests
for t in recurrent_kernel_test draft_states_test quantized_state_test; do
  step 120 "$t" "$B/$t" --gtest_brief=1
done
# 3. decode A/B: main (before), visit28 (after = cand-test), decode-stages, q3; racecheck
left=$(( END - $(date +%s) - 60 ))
[ "$left" -gt 60 ] && OUT=$OUT STATES=fp32,bf16,int8,fp8 BATCHES=1,32,128,256 ROUNDS=2 \
  EXTRA_ARMS="stages q3" SAN_TOOLS=" " NCU_BF16=0 \
  timeout "$left" bash scripts/device/decode_ab_visit.sh > /dev/null 2>&1
say "decode_ab rc=$?"
grep -E "round|rc" "$OUT/decode_ab.log" | head -40 >> "$LOG"
# 4. the decode-stages tests (built on cand-test)
for t in recurrent_kernel_test draft_states_test quantized_state_test; do
  step 60 "stages_$t" "$BUNDLE/stages/$t" --gtest_brief=1
done
# 5. chain bars of the merged decode on the GPU
step 70 chain_bars "$B/gdn-chain-bars" --backend=cuda --seeds=6 --cases=0,1,2,3
grep -c "failed 0/" "$OUT/chain_bars.txt" | sed 's/^/combinations without a failure: /' | tee -a "$LOG"
grep "failing seed" "$OUT/chain_bars.txt" | head | tee -a "$LOG"
# 5b. route_bench (v7 / v8 / spans) of main, visit28, span-checkpoints: 16/32 4 x 8192, 1 x 32768
for arm in ckpt before after; do
  capi=$B/libgdn_capi.so; [ $arm != after ] && capi=$BUNDLE/$arm/libgdn_capi.so
  PYTHONUNBUFFERED=1 step 50 "route_$arm" python3 bench/prefill/route_bench.py --capi "$capi" \
    --out "$OUT/route_$arm" --budget-s 20 --no-fla --ref-len 0 --rows 0,3
  grep -E "^ROUTE" "$OUT/route_$arm.txt" | tee -a "$LOG"
done
# 6. the rest of the prefill suite and memcheck of the fixed load
for t in chunked_prefill_test span_plan_test server_cuda_test; do
  step 60 "$t" "$B/$t" --gtest_brief=1
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step 60 memcheck_route "$SAN" --tool memcheck --error-exitcode 9 "$B/chunked_prefill_route_test" \
  --gtest_filter='*QuantizedPages*'
step 60 memcheck_ckpt "$SAN" --tool memcheck --error-exitcode 9 \
  "$BUNDLE/ckpt/chunked_prefill_checkpoints_test" --gtest_filter='*SpanPath*'
step 60 racecheck_ckpt "$SAN" --tool racecheck --error-exitcode 9 \
  "$BUNDLE/ckpt/chunked_prefill_checkpoints_test" --gtest_filter='*SpanPathBad*'
step 60 racecheck_decode "$SAN" --tool racecheck --error-exitcode 9 "$B/quantized_state_test" \
  --gtest_filter='*DecodeChains*:*EveryCompiledVariant*'
say done
