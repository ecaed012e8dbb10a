#!/usr/bin/env bash
# One device visit for the chunked prefill (run from the repo root there, with
# .bundle/prefill and .whl carried; bench/prefill/bundle.sh fills the bundle):
#   1. the GPU gtest (tests/gpu/chunked_prefill_test) against the C++ oracle;
#   2. compare_fla.py: checks against the float64 reference, then the
#      benchmark next to FLA's chunk_gated_delta_rule;
#   3. with SANITIZE=1: compute-sanitizer memcheck on a small gtest case.
# Everything goes to $OUT; the short table prints last.
set -uo pipefail
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT"
b=.bundle/prefill
export LD_LIBRARY_PATH="$PWD/$b/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl >/dev/null 2>&1 \
  && export PYTHONPATH=/tmp/site
rc_test=0
if [[ -x "$b/bin/chunked_prefill_test" ]]; then
  timeout "${GTEST_TIMEOUT:-30}" "$b/bin/chunked_prefill_test" > "$OUT/gtest.txt" 2>&1
  rc_test=$?
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|Failure|max_abs_rel|error" "$OUT/gtest.txt" | head -30
fi
timeout "${BENCH_TIMEOUT:-250}" python3 "$b/compare_fla.py" --lib "$b/lib/libgdn_chunked_prefill.so" \
  --capi "$b/lib/libgdn_capi.so" --out "$OUT" --budget-s "${BUDGET_S:-225}" "$@" \
  > "$OUT/compare.log" 2>&1
rc_py=$?
grep -v '^{' "$OUT/compare.log" | grep -v "^ok  " | tail -60
echo "checks failing: $(grep -c '^FAIL' "$OUT/compare.log")"
if [[ "${SANITIZE:-0}" == 1 ]] && [[ -x "$b/bin/chunked_prefill_test" ]]; then
  timeout "${SANITIZE_TIMEOUT:-40}" compute-sanitizer --tool memcheck --print-limit 5 \
    "$b/bin/chunked_prefill_test" --gtest_filter='*VarlenMixes*' > "$OUT/memcheck.txt" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|Invalid|at 0x" "$OUT/memcheck.txt" | head -12
fi
echo "gtest rc=$rc_test compare rc=$rc_py"
