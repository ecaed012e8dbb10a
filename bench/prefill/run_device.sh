#!/usr/bin/env bash
# One device visit for the chunked prefill, at most ~8 minutes (run from the
# repo root there, with .bundle/prefill and .whl carried; bench/prefill/bundle.sh
# fills the bundle, .whl holds the flash-linear-attention 0.6.0 wheels):
#   1. GPU gtests against the C++ float64 oracle: chunked_prefill_test (every
#      kernel-1 variant, V tiles, group sizes, lengths, varlen, state dtypes),
#      gdn_capi_test (the C ABI's routing and forced kernels), cuda_backend_test;
#   2. compare_fla.py: the benchmark next to FLA's chunk_gated_delta_rule (rows
#      printed and written as they finish), then checks against a float64
#      torch reference with the time left;
#   3. with SANITIZE=1: compute-sanitizer memcheck on a small gtest case.
# Everything goes to $OUT; the table prints at the end of the benchmark.
#   bash bench/prefill/run_device.sh [compare_fla.py args, e.g. --rows 0,1]
set -uo pipefail
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT"
b=.bundle/prefill
export LD_LIBRARY_PATH="$PWD/$b/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl >/dev/null 2>&1 \
  && export PYTHONPATH=/tmp/site
rc_test=0
for t in chunked_prefill_test gdn_capi_test cuda_backend_test; do
  if [[ -x "$b/bin/$t" ]]; then
    timeout "${GTEST_TIMEOUT:-100}" "$b/bin/$t" > "$OUT/$t.txt" 2>&1
    rc=$?; [[ $rc -ne 0 ]] && rc_test=$rc
    echo "== $t rc=$rc [$(( $(date +%s) - t0 ))s]"
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|Failure|max_abs_rel|error" "$OUT/$t.txt" | head -30
  else
    echo "== $t not bundled"
  fi
done
left=$(( ${TOTAL_S:-470} - ( $(date +%s) - t0 ) - 15 ))
[[ $left -lt 60 ]] && left=60
timeout "$left" python3 "$b/compare_fla.py" --capi "$b/lib/libgdn_capi.so" --out "$OUT" \
  --budget-s $(( left - 10 )) --checks-s "${CHECKS_S:-80}" "$@" > "$OUT/compare.log" 2>&1
rc_py=$?
grep -v '^{' "$OUT/compare.log" | grep -v "^ok  " | tail -70
echo "checks failing: $(grep -c '^FAIL' "$OUT/compare.log")"
if [[ "${SANITIZE:-0}" == 1 ]] && [[ -x "$b/bin/chunked_prefill_test" ]]; then
  timeout "${SANITIZE_TIMEOUT:-60}" compute-sanitizer --tool memcheck --print-limit 5 \
    "$b/bin/chunked_prefill_test" --gtest_filter='*GroupSizes*' > "$OUT/memcheck.txt" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|Invalid|at 0x" "$OUT/memcheck.txt" | head -12
fi
echo "gtest rc=$rc_test compare rc=$rc_py total $(( $(date +%s) - t0 ))s"
