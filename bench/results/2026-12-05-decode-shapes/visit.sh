#!/usr/bin/env bash
# Session 30: the persistent decode kernel's block shape for int8 / fp8 and
# bf16 pages (issues 19 and 22), one device call. Arms (decode_bench each):
#   before     main (9321010; decode code as 1764e16)
#   after      combo: int8 / fp8 64 x 64 threads, 6 blocks; bf16 5 blocks
#   q64m6      int8 / fp8 V tile 64, 64 threads, 6 resident blocks (main: 128, 5)
#   t32m10     int8 / fp8 V tile 32, 64 threads, 10 blocks
#   t32x128m8  int8 / fp8 V tile 32, 128 threads, 8 blocks
#   b4, b5     bf16 V tile 64, 128 threads, 4 / 5 blocks (main: 1, i.e. 151 registers)
# The combo's tests run after the A/B (no sanitizer: device time was short).
#   bash bench/results/2026-12-05-decode-shapes/visit.sh
# (ROUNDS=1 TESTS= for a short call: one A/B round, no tests.)
set -u
RESULTS=${OUT:-/tmp/gdn_out}; mkdir -p "$RESULTS"
W=/tmp/shapes; rm -rf "$W"; mkdir -p "$W"
. scripts/device/unpack_bundle.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$W/gpu.txt"
OUT=$W STATES=fp32,bf16,int8,fp8 BATCHES=128,256 ROUNDS=${ROUNDS:-2} \
  EXTRA_ARMS="q64m6 t32m10 t32x128m8 b4 b5" SAN_TOOLS=" " NCU_BF16=0 \
  bash scripts/device/decode_ab_visit.sh > "$W/decode_ab_stdout.txt" 2>&1
tar -C "$W" -czf "$RESULTS/shapes.tgz" .  # again below: what a cut-short call still returns
for t in ${TESTS-quantized_state_test recurrent_kernel_test draft_states_test}; do
  timeout 150 "$B/$t" --gtest_brief=1 > "$W/$t.txt" 2>&1
  echo "$t rc=$?" | tee -a "$W/gpu.txt"
done
grep -E "round|^\| 32 \| (128|256|32) \|" "$W/decode_ab.log" | grep -v "^| 32 | [a-z]" | head -80
tar -C "$W" -czf "$RESULTS/shapes.tgz" .
