#!/usr/bin/env bash
# Session 33, one device call: the aux warpgroup without P (the consumers
# form P themselves, half each), and every producer gate-warp lane arriving
# on inputs_ready (racecheck did not follow lane 0's arrival after a
# __syncwarp).
#   racecheck + memcheck of fast/fused_chunk_test on two cases
#   fast/fused_chunk_test             every float64 case, timing rows
#   before/fused_chunk_test Rows      session 32's aux (main), same run
#   fast/fused_chunk_test Rows        again, after it
#   fast/chunked_prefill_route_test   the aux through ChunkedPrefill
#   on an H200 only: the bf16 decode arm b4 against main (visit3.sh's)
#   one ncu source pass over the new aux
# Pack: lib/, fast/{fused_chunk_test,chunked_prefill_route_test} (this
# change), before/{fused_chunk_test (3265bcc), decode_bench (main)},
# bin/{decode_bench (b4), quantized_state_test}.
#   bash bench/results/2026-12-06-aux-consumer-p/visit.sh
set -u
RESULTS=${OUT:-/tmp/gdn_out}; mkdir -p "$RESULTS"
W=/tmp/auxcp; rm -rf "$W"; mkdir -p "$W"
. scripts/device/unpack_bundle.sh
F=$BUNDLE/fast
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$W/gpu.txt"
pack() { tar -C "$W" -czf "$RESULTS/auxcp.tgz" .; }
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
C='Cases/FusedChunkTest.MatchesFloat64AndV7/len65_bf16:Cases/FusedChunkTest.MatchesFloat64AndV7/varlen_fp16_qwen'
for tool in racecheck memcheck; do
  timeout 120 "$SAN" --tool $tool --error-exitcode 9 "$F/fused_chunk_test" --gtest_filter="$C" \
    > "$W/san_$tool.txt" 2>&1
  echo "$tool rc=$?" | tee -a "$W/gpu.txt"
  tail -2 "$W/san_$tool.txt"
done
pack
timeout 200 "$F/fused_chunk_test" > "$W/fused_chunk_test.txt" 2>&1
echo "fused_chunk_test rc=$?" | tee -a "$W/gpu.txt"
grep -E "^\[ (timing|routed)" "$W/fused_chunk_test.txt" | cut -c1-300
grep -E "FAILED|PASSED" "$W/fused_chunk_test.txt" | head
pack
for arm in before ${ARMS:-} fast; do
  timeout 120 "$BUNDLE/$arm/fused_chunk_test" --gtest_filter=FusedChunkTiming.Rows \
    > "$W/rows_$arm.txt" 2>&1
  echo "rows $arm rc=$?" | tee -a "$W/gpu.txt"
  grep -E "^\[ timing" "$W/rows_$arm.txt" | cut -c1-300
done
timeout 200 "$F/chunked_prefill_route_test" > "$W/chunked_prefill_route_test.txt" 2>&1
echo "chunked_prefill_route_test rc=$?" | tee -a "$W/gpu.txt"
grep -E "FAILED|PASSED" "$W/chunked_prefill_route_test.txt" | head -5
pack
if grep -q H200 "$W/gpu.txt"; then
  OUT=$W/b4 STATES=bf16 BATCHES=128,256 ROUNDS=2 SAN_TOOLS=" " NCU_BF16=0 \
    bash scripts/device/decode_ab_visit.sh > "$W/b4_stdout.txt" 2>&1
  grep -E "round|^\| 32 \|" "$W/b4/decode_ab.log" | head -20
  pack
fi
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 200 "$NCU" --kernel-name-base mangled -k regex:'Lb1EEEv' -c 1 \
  --section WarpStateStats --section SchedulerStats --section SourceCounters \
  --section LaunchStats -o "$W/aux" \
  "$F/fused_chunk_test" --gtest_filter=FusedChunkTiming.Rows > "$W/ncu_run.txt" 2>&1
echo "ncu rc=$?" | tee -a "$W/gpu.txt"
"$NCU" -i "$W/aux.ncu-rep" --page details > "$W/details.txt" 2>&1
"$NCU" -i "$W/aux.ncu-rep" --page source --csv --print-source sass 2>/dev/null | xz > "$W/source.csv.xz"
rm -f "$W/aux.ncu-rep"
pack
