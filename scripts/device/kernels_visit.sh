#!/usr/bin/env bash
# One device visit (<= ~9.5 minutes) for the decode and prefill kernels
# together, when both changed: the decode suite's GPU tests and benchmark
# (scripts/device/gpu_suite.sh PARTS=tests,bench), the prefill gtest and the
# FLA comparison (bench/prefill/compare_fla.py), compute-sanitizer memcheck on
# a small prefill case. Everything lands in $OUT/visit.tar.gz plus the two
# Markdown tables (the tool brings back at most 8 files).
# Bundle here with:
#   BUILD=build-decode bash scripts/device/bundle.sh cuda_backend_test recurrent_kernel_test \
#     decode_graph_test gdn_capi_test decode_bench gdn_capi recurrent_pdl_test \
#     graphed_decode_runner_test server_decode_graph_test chunked_prefill_test gdn-server gdn-bench
# then run carry [".bundle", ".whl"] command "bash scripts/device/kernels_visit.sh".
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
WORK=/tmp/gdn_visit
mkdir -p "$WORK"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }

# 1. Decode: GPU tests (graphs, PDL, runner, server) and the benchmark.
OUT=$WORK PARTS=tests,bench TEST_TIMEOUT=60 timeout 300 bash scripts/device/gpu_suite.sh > "$WORK/decode_console.log" 2>&1
echo "== decode suite done at $(elapsed)s"
grep -E "^== |^rc |^\[  (PASSED|FAILED) |^\[  FAILED" "$WORK/suite.log" | head -60

# 2. Prefill: gtest (every kernel-1 variant and V tile vs the float64 oracle),
# then the benchmark next to FLA with what is left of ~520 s.
B=/tmp/gdn_bundle/bin
export LD_LIBRARY_PATH=/tmp/gdn_bundle/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
timeout 90 "$B/chunked_prefill_test" > "$WORK/chunked_prefill_test.txt" 2>&1
echo "== chunked_prefill_test rc=$? at $(elapsed)s"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|Failure" "$WORK/chunked_prefill_test.txt" | head -30
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl >/dev/null 2>&1 \
  && export PYTHONPATH=/tmp/site
left=$(( 500 - $(elapsed) ))
[ $left -lt 90 ] && left=90
timeout "$left" python3 bench/prefill/compare_fla.py --capi "$B/libgdn_capi.so" --out "$WORK" \
  --budget-s $(( left - 10 )) --checks-s 60 > "$WORK/prefill_compare.log" 2>&1
echo "== compare_fla rc=$? at $(elapsed)s"
grep -v '^{' "$WORK/prefill_compare.log" | grep -v "^ok  " | tail -40

# 3. memcheck on a small prefill case.
timeout 50 compute-sanitizer --tool memcheck --print-limit 5 "$B/chunked_prefill_test" \
  --gtest_filter='*GroupSizes*' > "$WORK/prefill_memcheck.txt" 2>&1
echo "== prefill memcheck rc=$? at $(elapsed)s"
grep -E "ERROR SUMMARY|Invalid" "$WORK/prefill_memcheck.txt" | head -5

cp "$WORK/decode_bench.md" "$WORK/prefill_bench.md" "$OUT/" 2>/dev/null
tar -czf "$OUT/visit.tar.gz" -C "$WORK" .
echo "== done at $(elapsed)s"
