#!/usr/bin/env bash
# One short device step (v8 prefill, step 0): the Hopper primitives test
# (kernels/cuda/common mbarrier.cuh, tma.cuh, wgmma.cuh;
# tests/gpu/hopper_primitives_test.cu), then the same binary under
# compute-sanitizer memcheck. Under 2 minutes.
#
#   .bundle/bin/hopper_primitives_test   (bundle.sh hopper_primitives_test)
#
# Every result goes to $OUT as soon as it exists: $OUT/hopper.log (pass /
# fail lines, failure excerpts), $OUT/hopper_test.txt (the full gtest output
# with each case's worst error ratio), $OUT/hopper_memcheck.txt.
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

say "hopper_primitives_test, one process per test"
# One process per test: a sticky CUDA error (a bad descriptor can fault) or a
# trapped mbarrier watchdog in one test does not hide the others.
: > "$OUT/hopper_test.txt"
failed=0
for t in $("$B/hopper_primitives_test" --gtest_list_tests |
           awk '/^[^ ]/ {suite = $1} /^  [^ ]/ {print suite $1}'); do
  timeout 30 "$B/hopper_primitives_test" --gtest_filter="$t" > /tmp/hopper_one.txt 2>&1
  rc=$?
  cat /tmp/hopper_one.txt >> "$OUT/hopper_test.txt"
  verdict=$(grep -oE '^\[ +(OK|SKIPPED|FAILED) +\]' /tmp/hopper_one.txt | head -1 | tr -d '[] ')
  echo "$t: rc $rc ${verdict:-no verdict (crashed or timed out)}" | tee -a "$LOG"
  if [ $rc != 0 ]; then
    failed=$((failed + 1))
    grep -E "Failure|Expected|Which is|error|rror:|timed out|got|want|out of bound" \
      /tmp/hopper_one.txt | head -12 >> "$LOG"
  fi
done
echo "hopper_primitives_test: $failed failing tests" | tee -a "$LOG"
grep -E "worst err" "$OUT/hopper_test.txt" | sort -t= -k2 -g | tail -3 | sed 's/^/largest: /' | tee -a "$LOG"

say "compute-sanitizer memcheck"
SAN=$(command -v compute-sanitizer || find /usr/local -maxdepth 3 -name compute-sanitizer -type f 2>/dev/null | head -1)
if [ -n "$SAN" ]; then
  timeout 90 "$SAN" --tool memcheck --error-exitcode 3 "$B/hopper_primitives_test" \
    > "$OUT/hopper_memcheck.txt" 2>&1
  rc=$?
  summary "memcheck hopper_primitives_test" "$OUT/hopper_memcheck.txt" $rc
  grep -E "ERROR SUMMARY" "$OUT/hopper_memcheck.txt" | tee -a "$LOG"
else
  echo "memcheck: no compute-sanitizer on this machine" | tee -a "$LOG"
fi
say "done"
