#!/usr/bin/env bash
# Everything session 32 left for the device, most needed first, in one call
# (~4 minutes):
#   1. visit2.sh SHORT=1: racecheck + memcheck of the aux (consumers now wait
#      on inputs_ready), v7's chunked_prefill_test after the float4 inverse
#   2. the bf16 decode arm b4 (bin/decode_bench: kPersistentMinBlocks 4 for
#      bf16 pages) against main (before/decode_bench) at batch 128, 256,
#      two rounds (../2026-12-05-decode-shapes/README.md: +0.7-1% on the
#      H100; merge only if the H200 agrees)
#   3. visit2.sh in full: every float64 case and the timing rows of the aux
# Pack: lib/, fast/ (as ./README.md "The next visit"), before/decode_bench
# (main), bin/decode_bench and bin/quantized_state_test (the b4 build).
#   bash bench/results/2026-12-06-aux-fast/visit3.sh
set -u
RESULTS=${OUT:-/tmp/gdn_out}; mkdir -p "$RESULTS"
OUT=$RESULTS SHORT=1 bash bench/results/2026-12-06-aux-fast/visit2.sh
OUT=$RESULTS/b4 STATES=bf16 BATCHES=128,256 ROUNDS=2 SAN_TOOLS=" " NCU_BF16=0 \
  bash scripts/device/decode_ab_visit.sh > "$RESULTS/b4_stdout.txt" 2>&1
grep -E "round|^\| 32 \|" "$RESULTS/b4/decode_ab.log" | head -20
mkdir -p "$RESULTS/full" && cp "$RESULTS/auxfast2.tgz" "$RESULTS/full/short.tgz"
OUT=$RESULTS/full bash bench/results/2026-12-06-aux-fast/visit2.sh
