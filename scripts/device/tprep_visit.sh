#!/usr/bin/env bash
# One short device step (v8 prefill, step 1): the TPrep test
# (kernels/cuda/chunked/tprep.cuh; tests/gpu/tprep_test.cu, float64
# reference), then the same binary under compute-sanitizer memcheck.
# Under 3 minutes.
#
#   bash scripts/device/bundle.sh tprep_test
#   run carry [".bundle"] command "bash scripts/device/tprep_visit.sh"
#
# Everything goes to ONE file, $OUT/tprep.log: the commit, the GPU, the
# step "tprep" with one pass / fail line per case and its worst
# err/bound ratios, failure excerpts, the full gtest output, and the
# memcheck summary.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/tprep.log
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # B, LD_LIBRARY_PATH
tee -a "$LOG" 2>/dev/null < .bundle/COMMIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee -a "$LOG"

say "tprep: tprep_test (timeout 60)"
TMP=/tmp/tprep_test.txt
timeout 60 "$B/tprep_test" > "$TMP" 2>&1
rc=$?
echo "tprep_test: rc $rc $(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$TMP" | tr '\n' ' ')" | tee -a "$LOG"
# One line per case: verdict, then its worst err/bound ratios.
grep -E '^\[ +(OK|FAILED|SKIPPED) +\] ' "$TMP" | sed -e 's/, where GetParam.*//' -e 's/ ([0-9]* ms)$//' | tee -a "$LOG"
grep -E 'worst err/bound' "$TMP" | tee -a "$LOG"
if [ $rc != 0 ]; then
  echo "-- failure excerpts" >> "$LOG"
  grep -E "Failure|Expected|Which is|worst ratio|rror|timed out|padding" "$TMP" | head -60 >> "$LOG"
fi
echo "-- full gtest output" >> "$LOG"
cat "$TMP" >> "$LOG"

say "tprep: compute-sanitizer memcheck (timeout 90)"
SAN=$(command -v compute-sanitizer || find /usr/local -maxdepth 3 -name compute-sanitizer -type f 2>/dev/null | head -1)
if [ -n "$SAN" ]; then
  timeout 90 "$SAN" --tool memcheck --error-exitcode 3 "$B/tprep_test" > /tmp/tprep_memcheck.txt 2>&1
  rc=$?
  echo "memcheck tprep_test: rc $rc $(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' /tmp/tprep_memcheck.txt | tr '\n' ' ')" | tee -a "$LOG"
  grep -E "ERROR SUMMARY" /tmp/tprep_memcheck.txt | tee -a "$LOG"
  [ $rc = 0 ] || grep -E "Invalid|Address|at 0x|by thread|Saved host|rror" /tmp/tprep_memcheck.txt \
    | head -40 >> "$LOG"
else
  echo "memcheck: no compute-sanitizer on this machine" | tee -a "$LOG"
fi
say "done"
