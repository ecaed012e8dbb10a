#!/usr/bin/env bash
# Session 32, second call: the aux after visit 1's racecheck report (the
# consumers now wait on inputs_ready themselves) and with TPiece's offsets
# formed per chunk; v7's chunked_prefill_test after InvertDiagonalBlocks
# went to float4 row reads.
#   racecheck + memcheck of fused_chunk_test on two cases
#   fast/chunked_prefill_test, fast/tprep_test, fast/chunked_prefill_route_test
#   fast/fused_chunk_test: every float64 case, timing rows Rows and RoutedRows
#   bash bench/results/2026-12-06-aux-fast/visit2.sh   (SHORT=1: the sanitizers and
#   chunked_prefill_test only)
set -u
RESULTS=${OUT:-/tmp/gdn_out}; mkdir -p "$RESULTS"
W=/tmp/auxfast2; rm -rf "$W"; mkdir -p "$W"
. scripts/device/unpack_bundle.sh
F=$BUNDLE/fast
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$W/gpu.txt"
pack() { tar -C "$W" -czf "$RESULTS/auxfast2.tgz" .; }
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
C='Cases/FusedChunkTest.MatchesFloat64AndV7/len65_bf16:Cases/FusedChunkTest.MatchesFloat64AndV7/varlen_fp16_qwen'
for tool in racecheck memcheck; do
  timeout 120 "$SAN" --tool $tool --error-exitcode 9 "$F/fused_chunk_test" --gtest_filter="$C" \
    > "$W/san_$tool.txt" 2>&1
  echo "$tool rc=$?" | tee -a "$W/gpu.txt"
  tail -2 "$W/san_$tool.txt"
done
pack
if [ "${SHORT:-0}" = 1 ]; then
  timeout 150 "$F/chunked_prefill_test" > "$W/chunked_prefill_test.txt" 2>&1
  echo "chunked_prefill_test rc=$?" | tee -a "$W/gpu.txt"
  grep -E "FAILED|PASSED" "$W/chunked_prefill_test.txt" | head -5
  pack
  exit 0
fi
timeout 200 "$F/fused_chunk_test" > "$W/fused_chunk_test.txt" 2>&1
echo "fused_chunk_test rc=$?" | tee -a "$W/gpu.txt"
grep -E "^\[ (timing|routed)" "$W/fused_chunk_test.txt" | cut -c1-300
grep -E "FAILED|PASSED" "$W/fused_chunk_test.txt" | head
pack
for t in chunked_prefill_test tprep_test chunked_prefill_route_test; do
  timeout 200 "$F/$t" > "$W/$t.txt" 2>&1
  echo "$t rc=$?" | tee -a "$W/gpu.txt"
  grep -E "FAILED|PASSED" "$W/$t.txt" | head -5
done
pack
