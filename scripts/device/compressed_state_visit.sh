#!/usr/bin/env bash
# One device visit for compressed states (issue 19) and the engine's lane
# polling (issue 18's decode 256), <= ~9 minutes:
#  1. GPU tests: the device codecs against state_quant.h bit for bit, the
#     quantized-state test (int8 / fp8 pages in the decode kernel and the
#     chunked prefill against the float64 oracle of the quantized round
#     trip) and the suites its kernel changes touch; compute-sanitizer
#     memcheck on the quantized-state test;
#  2. decode_bench: the decode kernel per state dtype (fp32, bf16, int8, fp8)
#     at Hv 32, batches 1..1024, % of copy bandwidth counting the bytes moved,
#     and int8 / fp8 against fp32 (round to nearest; then stochastic);
#  3. prefill_state_bench: the chunked prefill per state dtype (PREFILL=0
#     skips it);
#  4. channel_visit.sh steps (CHANNEL_STEPS, default "d256 tf logits"; set
#     and empty: none): d256
#     (decode 256 x 1 through the channel, split by the server's metrics,
#     per state dtype and no-compute), tf (the transformers Qwen3-Next with
#     remote GDN against FLA) and logits (that model per state dtype against
#     fp32 state).
# Needs .bundle (bundle.sh gdn-server gdn-bench quantized_codec_test
# quantized_state_test recurrent_kernel_test recurrent_pdl_test
# chunked_prefill_test draft_states_test cuda_backend_test server_cuda_test
# decode_bench prefill_state_bench) and .whl (channel_visit.sh prepare).
# Writes under $OUT: compressed_state.log, decode.md, decode_sr.md,
# prefill_state.md, and channel_visit's files.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/compressed_state.log
t0=$(date +%s)
say() { echo "== $* ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG"; }
. scripts/device/unpack_bundle.sh  # BUNDLE, B, LD_LIBRARY_PATH
pkill -TERM -f "bin/gdn-server" && sleep 2
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat .bundle/COMMIT; } 2>&1 | tee -a "$LOG"

for t in quantized_codec_test quantized_state_test recurrent_kernel_test recurrent_pdl_test \
         chunked_prefill_test draft_states_test cuda_backend_test server_cuda_test; do
  [ -x "$B/$t" ] || { echo "$t: not bundled" | tee -a "$LOG"; continue; }
  say "$t"
  timeout 150 "$B/$t" > "/tmp/$t.log" 2>&1
  echo "rc $?" | tee -a "$LOG"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|SEED" "/tmp/$t.log" | head -20 | tee -a "$LOG"
done
SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
say "compute-sanitizer memcheck quantized_state_test"
timeout 150 "$SANITIZER" --tool memcheck --error-exitcode 9 "$B/quantized_state_test" \
  --gtest_filter='*EveryCompiledVariant*:*ChunkedPrefill*' > /tmp/san_q.log 2>&1
echo "rc $?" | tee -a "$LOG"
grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED) " /tmp/san_q.log | tee -a "$LOG"

say "decode_bench per state dtype"
timeout 150 "$B/decode_bench" --hv=32 --states=fp32,bf16,int8,fp8 --json="$OUT/decode.json" \
  --md="$OUT/decode.md" > /tmp/decode_bench.log 2>&1
echo "rc $?" | tee -a "$LOG"
tail -30 "$OUT/decode.md" 2>/dev/null | tee -a "$LOG"
timeout 90 "$B/decode_bench" --hv=32 --states=int8,fp8 --rounding=stochastic \
  --json="$OUT/decode_sr.json" --md="$OUT/decode_sr.md" > /tmp/decode_bench_sr.log 2>&1
echo "rc $?" | tee -a "$LOG"

if [ "${PREFILL:-1}" = 1 ]; then
say "prefill_state_bench"
timeout 120 "$B/prefill_state_bench" --md="$OUT/prefill_state.md" > /tmp/prefill_state.log 2>&1
echo "rc $?" | tee -a "$LOG"
cat "$OUT/prefill_state.md" 2>/dev/null | tee -a "$LOG"
fi
tar -czf "$OUT/logs.tar.gz" -C /tmp $(cd /tmp && ls *_test.log san_q.log decode_bench*.log \
  prefill_state.log 2>/dev/null) 2>/dev/null

channel_steps=${CHANNEL_STEPS-d256 tf logits}  # set and empty: none
if [ -n "$channel_steps" ]; then
  say "channel_visit steps $channel_steps"
  STEPS="$channel_steps" D256_ARMS="${D256_ARMS:-fp32 bf16 int8 fp8 no_compute}" TF_S=${TF_S:-170} \
    OUT=$OUT bash scripts/device/channel_visit.sh > /dev/null 2>&1
  grep -E "^d256|^native|^grpc|^channel|^(fp32|bf16|int8|fp8):" "$OUT/channel_visit.log" | tee -a "$LOG"
fi
say "done"
