#!/usr/bin/env bash
# Session 31, one device call: the fused kernel's aux warpgroup (issue 22,
# HOPPER_DESIGN.md §5 step 3) checked and timed, then session 30's decode
# block shapes (issues 19, 22; ../2026-12-05-decode-shapes/visit.sh).
#   aux/fused_chunk_test            21 float64 cases, every variant incl. aux;
#                                   timing rows (form P, aux, v7)
#   aux/tprep_test, aux/chunked_prefill_route_test
#                                   TPrep's step 2 now shared (blocked_inverse.cuh)
#   memcheck + racecheck of fused_chunk_test on a few cases
#   bash bench/results/2026-12-06-aux-prep/visit.sh   (SHAPES=0: skip the shapes)
set -u
RESULTS=${OUT:-/tmp/gdn_out}; mkdir -p "$RESULTS"
W=/tmp/aux; rm -rf "$W"; mkdir -p "$W"
. scripts/device/unpack_bundle.sh
A=$BUNDLE/aux
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$W/gpu.txt"
pack() { tar -C "$W" -czf "$RESULTS/aux.tgz" .; }
timeout 300 "$A/fused_chunk_test" > "$W/fused_chunk_test.txt" 2>&1
echo "fused_chunk_test rc=$?" | tee -a "$W/gpu.txt"
grep -E "^\[ (timing|routed|len|varlen|allequal|strong|qwen|l2off|bf16state)" "$W/fused_chunk_test.txt" | cut -c1-400
grep -E "FAILED|PASSED" "$W/fused_chunk_test.txt" | head -20
pack
for t in tprep_test chunked_prefill_route_test; do
  timeout 150 "$A/$t" --gtest_brief=1 > "$W/$t.txt" 2>&1
  echo "$t rc=$?" | tee -a "$W/gpu.txt"
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
F='Cases/FusedChunkTest.MatchesFloat64AndV7/len65_bf16:Cases/FusedChunkTest.MatchesFloat64AndV7/varlen_fp16_qwen'
for tool in memcheck racecheck; do
  timeout 200 "$SAN" --tool $tool --error-exitcode 9 "$A/fused_chunk_test" --gtest_filter="$F" \
    > "$W/san_$tool.txt" 2>&1
  echo "$tool rc=$?" | tee -a "$W/gpu.txt"
  tail -3 "$W/san_$tool.txt"
done
pack
if [ "${SHAPES:-1}" = 1 ]; then
  OUT=$W/shapes bash bench/results/2026-12-05-decode-shapes/visit.sh > "$W/shapes_stdout.txt" 2>&1
  tail -30 "$W/shapes_stdout.txt"
fi
pack
