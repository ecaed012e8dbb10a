#!/usr/bin/env bash
# One short device step (v8 prefill, step 0): the Hopper primitives tests
# (kernels/cuda/common mbarrier.cuh, tma.cuh, wgmma.cuh), one binary per
# concept, shared helpers in tests/gpu/hopper_test_support.cuh:
#   tma_test                        TMA round trips on an mbarrier
#   wgmma_layout_test               descriptors and fragment layouts (host)
#   wgmma_test                      wgmma GEMMs against float64
#   warp_specialised_pipeline_test  TMA + mbarrier + setmaxnreg + wgmma
# then each binary under compute-sanitizer memcheck. Under 2 minutes.
#
#   .bundle/bin/<the four>   (bundle.sh tma_test wgmma_layout_test wgmma_test
#                             warp_specialised_pipeline_test)
# A binary missing from the bundle is reported and skipped.
#
# Every result goes to $OUT as soon as it exists: $OUT/hopper.log (pass /
# fail lines, failure excerpts), $OUT/hopper_test.txt (the full gtest output
# with each case's worst error ratio), $OUT/hopper_memcheck.txt (every
# binary's memcheck run, one after the other).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/hopper.log
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # B, LD_LIBRARY_PATH
tee -a "$LOG" 2>/dev/null < .bundle/COMMIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee -a "$LOG"

summary() {  # name, output file, rc
  echo "$1: rc $3 $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$2" | tr '\n' ' ')" | tee -a "$LOG"
  [ "$3" = 0 ] || grep -E "Failure|Expected|Which is|error|FAILED|ERROR|Error|got|want" "$2" \
    | head -40 >> "$LOG"
}

HOPPER_TESTS="tma_test wgmma_layout_test wgmma_test warp_specialised_pipeline_test"

say "Hopper primitives tests, one process per test"
# One process per test: a sticky CUDA error (a bad descriptor can fault) or a
# trapped mbarrier watchdog in one test does not hide the others.
: > "$OUT/hopper_test.txt"
failed=0
for bin in $HOPPER_TESTS; do
  if [ ! -x "$B/$bin" ]; then
    echo "$bin: not in the bundle, skipped" | tee -a "$LOG"
    continue
  fi
  for t in $("$B/$bin" --gtest_list_tests |
             awk '/^[^ ]/ {suite = $1} /^  [^ ]/ {print suite $1}'); do
    timeout 30 "$B/$bin" --gtest_filter="$t" > /tmp/hopper_one.txt 2>&1
    rc=$?
    cat /tmp/hopper_one.txt >> "$OUT/hopper_test.txt"
    verdict=$(grep -oE '^\[ +(OK|SKIPPED|FAILED) +\]' /tmp/hopper_one.txt | head -1 | tr -d '[] ')
    echo "$bin $t: rc $rc ${verdict:-no verdict (crashed or timed out)}" | tee -a "$LOG"
    if [ $rc != 0 ]; then
      failed=$((failed + 1))
      grep -E "Failure|Expected|Which is|error|rror:|timed out|got|want|out of bound" \
        /tmp/hopper_one.txt | head -12 >> "$LOG"
    fi
  done
done
echo "Hopper primitives tests: $failed failing tests" | tee -a "$LOG"
grep -E "worst err" "$OUT/hopper_test.txt" | sort -t= -k2 -g | tail -3 | sed 's/^/largest: /' | tee -a "$LOG"

say "compute-sanitizer memcheck"
SAN=$(command -v compute-sanitizer || find /usr/local -maxdepth 3 -name compute-sanitizer -type f 2>/dev/null | head -1)
if [ -n "$SAN" ]; then
  : > "$OUT/hopper_memcheck.txt"
  for bin in $HOPPER_TESTS; do
    [ -x "$B/$bin" ] || continue
    timeout 90 "$SAN" --tool memcheck --error-exitcode 3 "$B/$bin" > /tmp/hopper_memcheck_one.txt 2>&1
    rc=$?
    cat /tmp/hopper_memcheck_one.txt >> "$OUT/hopper_memcheck.txt"
    summary "memcheck $bin" /tmp/hopper_memcheck_one.txt $rc
    grep -E "ERROR SUMMARY" /tmp/hopper_memcheck_one.txt | tee -a "$LOG"
  done
else
  echo "memcheck: no compute-sanitizer on this machine" | tee -a "$LOG"
fi
say "done"
