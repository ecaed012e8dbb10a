#!/usr/bin/env bash
# Session 33: wgmma_test on any GPU, then what only an H200 can settle,
# and nothing more on any other GPU (a call that lands on an H100 costs
# little more than its start):
#   the bf16 decode arm b4 against main (../2026-12-05-decode-shapes/)
#   the aux's timing rows, session 32's (before/) and this commit's (fast/),
#   two rounds taking turns; then fast/'s float64 cases and the route test
# Pack: as visit.sh's.
#   bash bench/results/2026-12-06-aux-consumer-p/visit_h200.sh
set -u
RESULTS=${OUT:-/tmp/gdn_out}; mkdir -p "$RESULTS"
W=/tmp/auxh200; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$W/gpu.txt"
. scripts/device/unpack_bundle.sh
pack() { tar -C "$W" -czf "$RESULTS/auxh200.tgz" .; }
# On any GPU: wgmma_test (its new m64n32 SS cases).
timeout 120 "$BUNDLE/fast/wgmma_test" > "$W/wgmma_test.txt" 2>&1
echo "wgmma_test rc=$?" | tee -a "$W/gpu.txt"
grep -E "m64n32.*(random|awkward)|FAILED|PASSED" "$W/wgmma_test.txt" | head -6
pack
if ! grep -q H200 "$W/gpu.txt"; then echo "not an H200: nothing more run"; exit 0; fi
OUT=$W/b4 STATES=bf16 BATCHES=128,256 ROUNDS=2 SAN_TOOLS=" " NCU_BF16=0 \
  bash scripts/device/decode_ab_visit.sh > "$W/b4_stdout.txt" 2>&1
grep -E "round|^\| 32 \|" "$W/b4/decode_ab.log" | head -20
pack
for round in 1 2; do
  for arm in before fast; do
    timeout 120 "$BUNDLE/$arm/fused_chunk_test" --gtest_filter=FusedChunkTiming.Rows \
      > "$W/rows_${arm}_$round.txt" 2>&1
    echo "rows $arm $round rc=$?" | tee -a "$W/gpu.txt"
    grep -E "^\[ timing" "$W/rows_${arm}_$round.txt" | cut -c1-330
  done
done
pack
timeout 200 "$BUNDLE/fast/fused_chunk_test" > "$W/fused_chunk_test.txt" 2>&1
echo "fused_chunk_test rc=$?" | tee -a "$W/gpu.txt"
grep -E "^\[ routed|FAILED|PASSED" "$W/fused_chunk_test.txt" | head -12
timeout 200 "$BUNDLE/fast/chunked_prefill_route_test" > "$W/chunked_prefill_route_test.txt" 2>&1
echo "chunked_prefill_route_test rc=$?" | tee -a "$W/gpu.txt"
pack
