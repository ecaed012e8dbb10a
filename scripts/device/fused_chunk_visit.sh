#!/usr/bin/env bash
# One short device step (v8 prefill, step 2): the fused kernel, form P
# (kernels/cuda/chunked/fused_chunk.cuh; tests/gpu/fused_chunk_test.cu:
# float64 oracle, v7 on the same inputs, first timings against v7), then a
# few of its cases under compute-sanitizer memcheck. Under 8 minutes (about
# 2 when nothing hangs).
#
#   bash scripts/device/bundle.sh fused_chunk_test tprep_test
#   run carry [".bundle"] command "bash scripts/device/fused_chunk_visit.sh"
#
# Everything goes to ONE file, $OUT/fused_chunk.log: the commit, the GPU, one
# pass / fail line per case, each case's errors (v8 and v7: o and final
# state, max_abs_rel / rel_l2), the timing lines, failure excerpts, the full
# gtest output, and the memcheck summary.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/fused_chunk.log
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # B, LD_LIBRARY_PATH
tee -a "$LOG" 2>/dev/null < .bundle/COMMIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee -a "$LOG"

# Line-buffered output, so that a run killed by its timeout still shows the
# case it was in ("[ RUN ]" without its "[ OK ]").
LB=()
command -v stdbuf > /dev/null && LB=(stdbuf -oL -eL)
# Smoke first: one small case alone. A kernel that hangs (a barrier whose
# bytes never arrive) stops the step here after 30 s instead of 4 minutes.
say "fused_chunk: smoke (len65_bf16 alone, timeout 30)"
timeout 30 "${LB[@]}" "$B/fused_chunk_test" --gtest_filter='Cases/FusedChunkTest.MatchesFloat64AndV7/len65_bf16' \
  > /tmp/fused_chunk_smoke.txt 2>&1
rc=$?
echo "smoke: rc $rc (124: timed out, i.e. the kernel hangs)" | tee -a "$LOG"
grep -E '^\[ +(RUN|OK|FAILED) +\]|max_abs_rel|Failure|Expected|Which is|rror' /tmp/fused_chunk_smoke.txt \
  | head -30 | tee -a "$LOG"
if [ $rc = 124 ]; then
  say "done (the smoke case hung; nothing else run)"
  exit 0
fi

# The correctness tests, then the timing test in its own process (a crash or
# hang in one does not hide the other's results).
for part in correctness timing; do
  if [ $part = correctness ]; then filter='-FusedChunkTiming.*'; limit=180; else filter='FusedChunkTiming.*'; limit=120; fi
  say "fused_chunk: fused_chunk_test $part (timeout $limit)"
  TMP=/tmp/fused_chunk_test_$part.txt
  timeout $limit "${LB[@]}" "$B/fused_chunk_test" --gtest_filter="$filter" > "$TMP" 2>&1
  rc=$?
  echo "fused_chunk_test $part: rc $rc $(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$TMP" | tr '\n' ' ')" | tee -a "$LOG"
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\] ' "$TMP" | sed -e 's/, where GetParam.*//' -e 's/ ([0-9]* ms)$//' | tee -a "$LOG"
  grep -E '\(max_abs_rel / rel_l2\)|^\[ timing \]|worst o:' "$TMP" | tee -a "$LOG"
  if [ $rc != 0 ]; then
    {
      echo "-- failure excerpts ($part; rc 124: timed out, see the last [ RUN ] below)"
      grep -E "Failure|Expected|Which is|less accurate|rror|non-finite|unwritten" "$TMP" | head -80
      grep -E '^\[ RUN' "$TMP" | tail -1
    } >> "$LOG"
  fi
  echo "-- full gtest output ($part)" >> "$LOG"
  cat "$TMP" >> "$LOG"
done

say "fused_chunk: compute-sanitizer memcheck (timeout 150)"
SAN=$(command -v compute-sanitizer || find /usr/local -maxdepth 3 -name compute-sanitizer -type f 2>/dev/null | head -1)
FILTER='Cases/FusedChunkTest.MatchesFloat64AndV7/len65_bf16:Cases/FusedChunkTest.MatchesFloat64AndV7/varlen_fp16_qwen:Cases/FusedChunkTest.MatchesFloat64AndV7/bf16state_bf16_zero_page:FusedChunkPages.*:FusedChunkLaunch.*'
if [ -n "$SAN" ]; then
  timeout 150 "$SAN" --tool memcheck --error-exitcode 3 "$B/fused_chunk_test" --gtest_filter="$FILTER" \
    > /tmp/fused_chunk_memcheck.txt 2>&1
  rc=$?
  echo "memcheck fused_chunk_test: rc $rc $(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' /tmp/fused_chunk_memcheck.txt | tr '\n' ' ')" | tee -a "$LOG"
  grep -E "ERROR SUMMARY" /tmp/fused_chunk_memcheck.txt | tee -a "$LOG"
  [ $rc = 0 ] || grep -E "Invalid|Address|at 0x|by thread|Saved host|rror" /tmp/fused_chunk_memcheck.txt \
    | head -40 >> "$LOG"
else
  echo "memcheck: no compute-sanitizer on this machine" | tee -a "$LOG"
fi
say "done"
