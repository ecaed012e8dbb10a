#!/usr/bin/env bash
# One device visit: GPU facts, a quick GPU test, the decode benchmark, the
# comparison with flash-linear-attention, the full GPU tests (gtest xml),
# compute-sanitizer memcheck and racecheck on a small decode case. Everything
# lands under $OUT (at most 8 files come back: keep it that way).
# Needs .bundle (scripts/device/bundle.sh) and .whl (FLA wheels) carried.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT" /tmp/gdn_xml
export LD_LIBRARY_PATH=$PWD/.bundle/lib:$PWD/.bundle/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # bin: libgdn_capi.so
export PYTHONUNBUFFERED=1
B=.bundle/bin
LOG=$OUT/suite.log
COMMIT=$(head -1 .bundle/COMMIT | awk '{print $2}')
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }

say "device"
{ nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; cat .bundle/COMMIT; } >>"$LOG" 2>&1

say "quick test: gdn_capi_test"
timeout 40 $B/gdn_capi_test --gtest_output=xml:/tmp/gdn_xml/gdn_capi_test.xml >>"$LOG" 2>&1
echo "rc $?" | tee -a "$LOG"

say "decode_bench"
timeout 80 $B/decode_bench --json="$OUT/decode_bench.json" --md="$OUT/decode_bench.md" \
  --commit="$COMMIT" 2>&1 | tee -a "$LOG" | tail -70
echo "rc ${PIPESTATUS[0]}" | tee -a "$LOG"

say "compare_fla"
if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
     --target /tmp/site .whl/*.whl >>"$LOG" 2>&1; then
  export PYTHONPATH=/tmp/site
fi
timeout 150 python3 bench/decode/compare_fla.py --lib $B/libgdn_capi.so --hv 32,64 \
  --json "$OUT/compare_fla.json" --md "$OUT/compare_fla.md" 2>&1 | tee -a "$LOG" | tail -40
echo "rc ${PIPESTATUS[0]}" | tee -a "$LOG"

for t in cuda_backend_test decode_graph_test recurrent_kernel_test; do
  say "$t"
  timeout 90 $B/$t --gtest_output=xml:/tmp/gdn_xml/$t.xml >>"$LOG" 2>&1
  echo "rc $?" | tee -a "$LOG"
done
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|\[chain\]|tests? ran" "$LOG" | tail -30

say "compute-sanitizer memcheck + racecheck (small decode case)"
SAN=$OUT/sanitizer.log
SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  timeout 45 "$SANITIZER" --tool $tool --error-exitcode 9 \
    $B/recurrent_kernel_test --gtest_filter='*EveryVariantMatchesOracle*' >>"$SAN" 2>&1
  echo "$tool rc $?" | tee -a "$LOG" "$SAN"
done
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$SAN" | tee -a "$LOG"

tar -czf "$OUT/gtest_xml.tar.gz" -C /tmp/gdn_xml . 2>/dev/null
say "done"
