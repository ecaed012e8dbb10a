#!/usr/bin/env bash
# Session 29's H200 visit, two calls on one warm machine (PART=A, then PART=B),
# each bounded by BUDGET_S. The pack (.bundle/pack.tar.xz, git-ignored) holds:
#   bin/, lib/  decode tests, decode_bench, gdn-chain-bars of cand-test (a2d2d22);
#               gdn-server, gdn-bench, gdn-echo, gdn-min-client of main's server code
#               (06aa728, CUDA build)
#   before/     main b256098: decode_bench (= main's decode), prefill_state_bench,
#               libgdn_capi.so (the prefill before the int8 / fp8 v8 pages)
#   ckpt/       span-checkpoints 08b85f9 (= main's prefill kernels): tests,
#               prefill_state_bench, libgdn_capi.so
#   mainli/     main 4eab7a6 prefill_state_bench built with -lineinfo (ncu)
#   probe/      quant_mma_probe (int8 decode reductions on the integer tensor cores)
#   qe/         quant-ends: the quantized checkpoint store in instances of its
#               own; prefill tests, prefill_state_bench, libgdn_capi.so
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
END=$(( $(date +%s) + ${BUDGET_S:-575} ))
LOG=$OUT/visit_${PART:-A}.log
. scripts/device/visit_steps.sh  # say, step
. scripts/device/unpack_bundle.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
ROWS=16/32/8/1024,16/32/4/4096,16/32/4/8192,16/32/1/8192,16/32/1/32768
pstate() {  # arm round
  step 60 "pstate_$1_$2" "$BUNDLE/$1/prefill_state_bench" --rows=$ROWS --states=fp32,bf16,int8,fp8 \
    --calls=10 --md="$OUT/pstate_$1_$2.md"
  cat "$OUT/pstate_$1_$2.md" >> "$LOG"
}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
if [ "${PART:-A}" = A ]; then
  # 0. the int8 tensor-core decode probe (bench/decode/quant_mma_probe.cu): float64 checks, time
  for b in 256 128; do
    step 40 "probe_$b" "$BUNDLE/probe/quant_mma_probe" --batch=$b --hv=32 --reps=30
    grep -E "^(CHECK|TIME)" "$OUT/probe_$b.txt" | tee -a "$LOG"
  done
  # 1. quant-ends: every prefill test
  for t in fused_chunk_test chunked_prefill_route_test chunked_prefill_checkpoints_test \
           chunked_prefill_spans_test chunked_prefill_test server_cuda_test; do
    step 90 "qe_$t" "$BUNDLE/qe/$t" --gtest_brief=1
  done
  # 2. prefill time by state dtype: the old main, main, quant-ends, taking turns
  for round in 1 2; do for arm in before mainli qe; do pstate $arm $round; done; done
  # 3. where main's int8 8 x 1024 time goes: ncu of the fused kernel, int8 and fp32
  for st in int8 fp32; do
    rep=$OUT/ncu_$st
    step 90 "ncu_$st" "$NCU" --kernel-name-base demangled --kernel-name "regex:.*FusedChunkKernel.*" \
      --launch-skip 2 --launch-count 1 --import-source yes --section WarpStateStats \
      --section SourceCounters --section SpeedOfLight --section Occupancy --section LaunchStats \
      -o "$rep" -f "$BUNDLE/mainli/prefill_state_bench" --rows=16/32/8/1024 --states=$st --calls=1 \
      --md=/tmp/ncu_$st.md
    [ -f "$rep.ncu-rep" ] || continue
    "$NCU" -i "$rep.ncu-rep" --page details > "$rep.details.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Executed Ipc|Issue Slots|No Eligible|Achieved Occ" "$rep.details.txt" | head -12 | tee -a "$LOG"
    "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.sass.csv" 2>/dev/null
    python3 scripts/device/ncu_hot_lines.py "$rep.sass.csv" --top 25 > "$rep.hot.txt" 2>&1
    head -30 "$rep.hot.txt" >> "$LOG"
    "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source cuda > "$rep.cuda.csv" 2>/dev/null
  done
  # 4. sanitizers on quant-ends
  step 60 memcheck_qe "$SAN" --tool memcheck --error-exitcode 9 "$BUNDLE/qe/chunked_prefill_route_test" \
    --gtest_filter='*QuantizedPages*'
  step 60 memcheck_qe_ckpt "$SAN" --tool memcheck --error-exitcode 9 \
    "$BUNDLE/qe/chunked_prefill_checkpoints_test"
else
  # 5. issue 16's engine overhead on this host with main's server (decode 1 x 1, 32 x 1, TCP)
  OUT=$OUT BENCH=1 timeout 200 bash scripts/device/engine_overhead_visit.sh > /dev/null 2>&1
  say "engine_overhead rc=$?"
  grep -E "^\| decode|overhead" "$OUT/engine_overhead.md" 2>/dev/null | tee -a "$LOG"
  # 6. decode A/B: main's decode (before) against cand-test (after)
  left=$(( END - $(date +%s) - 200 ))
  [ "$left" -gt 60 ] && OUT=$OUT STATES=fp32,bf16,int8,fp8 BATCHES=1,32,128,256 ROUNDS=2 \
    EXTRA_ARMS="" SAN_TOOLS=" " NCU_BF16=0 \
    timeout "$left" bash scripts/device/decode_ab_visit.sh > /dev/null 2>&1
  say "decode_ab rc=$?"
  grep -E "round|rc" "$OUT/decode_ab.log" | head -40 >> "$LOG"
  for t in recurrent_kernel_test draft_states_test quantized_state_test; do
    step 60 "cand_$t" "$B/$t" --gtest_brief=1
  done
  step 60 chain_bars "$B/gdn-chain-bars" --backend=cuda --seeds=6 --cases=0,1,2,3
  grep -c "failed 0/" "$OUT/chain_bars.txt" | sed 's/^/combinations without a failure: /' | tee -a "$LOG"
  # 7. route_bench (v7 / v8 / spans) of main (ckpt) and quant-ends, rows 0 and 3
  for arm in ckpt qe before; do
    PYTHONUNBUFFERED=1 step 45 "route_$arm" python3 bench/prefill/route_bench.py \
      --capi "$BUNDLE/$arm/libgdn_capi.so" --out "$OUT/route_$arm" --budget-s 20 --no-fla \
      --ref-len 0 --rows 0,3
    grep -E "^ROUTE" "$OUT/route_$arm.txt" | tee -a "$LOG"
  done
fi
say done
