#!/usr/bin/env bash
# Session 33, call 14: which side bounds the aux form's step. Timing rows
# only (FusedChunkTiming.Rows), arms taking turns; the diagnostic arms give
# wrong results on purpose and were built from a temporary edit, not
# committed (README "Which side bounds the step"):
#   main      the committed aux (b445ce3)
#   skipaux   the aux arrives on aux_ready without forming anything
#   skipcons  the consumers form neither P nor T'' (still release Tf)
#   skipboth  both
#   bash bench/results/2026-12-06-aux-consumer-p/diag_visit.sh
set -u
RESULTS=${OUT:-/tmp/gdn_out}; mkdir -p "$RESULTS"
W=/tmp/auxdiag; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$W/gpu.txt"
. scripts/device/unpack_bundle.sh
for round in 1 2; do
  for arm in main skipaux skipcons skipboth; do
    timeout 120 "$BUNDLE/$arm/fused_chunk_test" --gtest_filter=FusedChunkTiming.Rows \
      > "$W/rows_${arm}_$round.txt" 2>&1
    echo "$arm $round rc=$?: $(grep -oE 'v8 aux [0-9.]+ ms \(fused kernel [0-9.]+ ms, [0-9.]+ us' \
      "$W/rows_${arm}_$round.txt" | sed 's/v8 aux //; s/(fused kernel//' | tr '\n' ' ')" | tee -a "$W/gpu.txt"
  done
done
tar -C "$W" -czf "$RESULTS/auxdiag.tgz" .
