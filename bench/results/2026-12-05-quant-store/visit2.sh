#!/usr/bin/env bash
# Session 30's second call: the codec test with the chunked stores'
# per-code / per-pair form, then three rounds of prefill_state_bench, main
# `1764e16` (mainli/) against quant-store (bin/), arms taking turns; all
# results in $OUT/visit2.tgz.
#   bash bench/results/2026-12-05-quant-store/visit2.sh
set -u
O=/tmp/visit2; rm -rf "$O"; mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/.bundle/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$O/gpu.txt"
cat .bundle/COMMIT .bundle/mainli/COMMIT >> "$O/gpu.txt"
timeout 120 .bundle/bin/quantized_codec_test > "$O/quantized_codec_test.txt" 2>&1
echo "codec rc=$?" >> "$O/gpu.txt"
R=16/32/8/1024,16/32/4/4096,16/32/4/8192,16/32/1/32768
for r in 1 2 3; do
  for a in mainli bin; do
    timeout 60 .bundle/$a/prefill_state_bench --rows=$R --states=fp32,bf16,int8,fp8 --calls=10 \
      --md="$O/pstate_${a}_$r.md" > "$O/pstate_${a}_$r.txt" 2>&1
  done
done
cat "$O/gpu.txt"; tail -3 "$O/quantized_codec_test.txt"; cat "$O"/pstate_*_1.md
tar -C "$O" -czf "${OUT:-/tmp}/visit2.tgz" .
