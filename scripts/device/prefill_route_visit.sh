#!/usr/bin/env bash
# One short device step: ChunkedPrefill's v7 / v8 generation router
# (kernels/cuda/chunked_prefill.h, chunked_prefill_v8.cc). The router's test
# (tests/gpu/chunked_prefill_route_test.cc: auto route to v8 against the
# float64 oracle, refused calls on v7, the threshold, forced generations),
# the existing chunked_prefill_test through the router, v8's span path
# (chunked_prefill_spans_test, span_plan_test) when bundled, server_cuda_test
# when bundled, memcheck on the router's shared workspace and on the span
# path, then FlashQLA's H200 rows routed vs v7 vs v8 vs the span path (vs FLA
# when .whl holds its wheels; bench/prefill/route_bench.py). About 5 minutes
# (ROUTE_BENCH_S, default 110, bounds the benchmark).
#
#   bash scripts/device/bundle.sh chunked_prefill_route_test chunked_prefill_test \
#       chunked_prefill_checkpoints_test \
#       chunked_prefill_spans_test span_plan_test server_cuda_test gdn_capi
#   run carry [".bundle", ".whl"] command "bash scripts/device/prefill_route_visit.sh"
#
# Everything goes to ONE file, $OUT/prefill_route.log (and the benchmark's
# rows to $OUT/prefill_route.json).
#
# A same-run A/B against another build: BEFORE_CAPI=path/to/libgdn_capi.so
# (e.g. .bundle/before/libgdn_capi.so from build_decode_arms.sh
# ARM_TARGETS=gdn_capi) times the same rows with it and then with the bundle's
# again, without the reference (ROUTE_AB_S each, default 60): rows to
# $OUT/before/ and $OUT/after2/, the ROUTE lines to the log. EXTRA_TESTS: more
# bundled gtest binaries to run first (e.g. fused_chunk_test). SKIP_TESTS=1:
# the benchmarks alone (no tests, no sanitizers). SPAN_SAN_FILTER: the span
# tests that memcheck and racecheck run (default the unusable-pages and
# uncut-call cases).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/prefill_route.log
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # B, LD_LIBRARY_PATH
tee -a "$LOG" 2>/dev/null < .bundle/COMMIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee -a "$LOG"
LB=()
command -v stdbuf > /dev/null && LB=(stdbuf -oL -eL)

# gtest binary, timeout, filter: verdict lines, errors and failure excerpts
# to the log, the full output after them.
run_test() {
  local t=$1 limit=$2 filter=${3:-*}
  if [ ! -x "$B/$t" ]; then
    echo "$t: not bundled" | tee -a "$LOG"
    return
  fi
  say "$t (timeout $limit, filter $filter)"
  local tmp=/tmp/route_$t.txt
  timeout "$limit" "${LB[@]}" "$B/$t" --gtest_filter="$filter" > "$tmp" 2>&1
  local rc=$?
  echo "$t: rc $rc (124: timed out) $(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$tmp" | tr '\n' ' ')" | tee -a "$LOG"
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\] |^device |all-equal' "$tmp" | sed -e 's/ ([0-9]* ms)$//' | tee -a "$LOG"
  if [ $rc != 0 ]; then
    {
      echo "-- failure excerpts ($t)"
      grep -E "Failure|Expected|Which is|rror|seed|max_abs_rel" "$tmp" | head -60
      grep -E '^\[ RUN' "$tmp" | tail -1
    } >> "$LOG"
  fi
  echo "-- full output ($t)" >> "$LOG"
  cat "$tmp" >> "$LOG"
}

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  for t in ${EXTRA_TESTS:-}; do run_test "$t" 180; done
  run_test span_plan_test 30
  run_test chunked_prefill_spans_test 180
  run_test chunked_prefill_route_test 180
  run_test chunked_prefill_test 120
  run_test chunked_prefill_checkpoints_test 120
  run_test server_cuda_test 60

  say "memcheck: the router's shared workspace (timeout 60)"
  SAN=$(command -v compute-sanitizer || find /usr/local -maxdepth 3 -name compute-sanitizer -type f 2>/dev/null | head -1)
  if [ -n "$SAN" ] && [ -x "$B/chunked_prefill_route_test" ]; then
    timeout 60 "$SAN" --tool memcheck --error-exitcode 3 "$B/chunked_prefill_route_test" \
      --gtest_filter='*AlternatingGenerations*' > /tmp/route_memcheck.txt 2>&1
    rc=$?
    echo "memcheck: rc $rc $(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' /tmp/route_memcheck.txt | tr '\n' ' ')" | tee -a "$LOG"
    grep -E "ERROR SUMMARY" /tmp/route_memcheck.txt | tee -a "$LOG"
    [ $rc = 0 ] || grep -E "Invalid|Address|at 0x|by thread|rror" /tmp/route_memcheck.txt | head -30 >> "$LOG"
  else
    echo "memcheck: skipped (no compute-sanitizer or no test binary)" | tee -a "$LOG"
  fi
  if [ -n "$SAN" ] && [ -x "$B/chunked_prefill_spans_test" ]; then
    for tool in memcheck racecheck; do
      say "$tool: the span path (timeout 90)"
      timeout 90 "$SAN" --tool "$tool" --error-exitcode 3 "$B/chunked_prefill_spans_test" \
        --gtest_filter="${SPAN_SAN_FILTER:-*UnusablePages*:*CallsItDoesNotCut*}" \
        > "/tmp/spans_$tool.txt" 2>&1
      rc=$?
      echo "$tool (spans): rc $rc $(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "/tmp/spans_$tool.txt" | tr '\n' ' ')" | tee -a "$LOG"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "/tmp/spans_$tool.txt" | tee -a "$LOG"
      [ $rc = 0 ] || grep -E "Invalid|Address|at 0x|by thread|rror|hazard" "/tmp/spans_$tool.txt" | head -30 >> "$LOG"
    done
  fi
fi  # SKIP_TESTS

say "route_bench: routed vs v7 vs v8 (vs FLA) on FlashQLA's rows (budget ${ROUTE_BENCH_S:-110} s)"
if ls .whl/fla_core-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl > /dev/null 2>&1 \
    && export PYTHONPATH=/tmp/site
fi
if [ -f "$B/libgdn_capi.so" ]; then
  budget=${ROUTE_BENCH_S:-110}
  PYTHONUNBUFFERED=1 timeout $(( budget + 30 )) python3 bench/prefill/route_bench.py \
    --capi "$B/libgdn_capi.so" --out "$OUT" --budget-s "$budget" ${ROUTE_ROWS:+--rows "$ROUTE_ROWS"} \
    ${ROUTE_REF_LEN:+--ref-len "$ROUTE_REF_LEN"} > /tmp/route_bench.txt 2>&1
  echo "route_bench: rc $?" | tee -a "$LOG"
  grep -E "^ROUTE|not importable|Error|error" /tmp/route_bench.txt | head -20 | tee -a "$LOG"
  echo "-- full output (route_bench)" >> "$LOG"
  cat /tmp/route_bench.txt >> "$LOG"
else
  echo "route_bench: libgdn_capi.so not bundled" | tee -a "$LOG"
fi
if [ -n "${BEFORE_CAPI:-}" ] && [ -f "$B/libgdn_capi.so" ]; then
  # before, then the bundle again: a drift of the machine shows as after !=
  # after2.
  for arm in before after2; do
    capi=$B/libgdn_capi.so
    [ "$arm" = before ] && capi=$BEFORE_CAPI
    say "route_bench $arm: $capi (budget ${ROUTE_AB_S:-60} s, no reference)"
    PYTHONUNBUFFERED=1 timeout $(( ${ROUTE_AB_S:-60} + 30 )) python3 bench/prefill/route_bench.py \
      --capi "$capi" --out "$OUT/$arm" --budget-s "${ROUTE_AB_S:-60}" --no-fla --ref-len 0 \
      ${ROUTE_ROWS:+--rows "$ROUTE_ROWS"} > "/tmp/route_bench_$arm.txt" 2>&1
    echo "route_bench $arm: rc $?" | tee -a "$LOG"
    grep -E "^ROUTE|Error|error" "/tmp/route_bench_$arm.txt" | head -20 | tee -a "$LOG"
  done
fi

# PROFILE=1: ncu on v8's two kernels at 16/32 4 x 8192 (route_bench row 0,
# forced v8 by the bench's own v8 arm): TPrep and the fused chunk kernel,
# speed of light, occupancy, warp states and the hottest SASS lines
# (scripts/device/ncu_hot_lines.py); reports in $OUT/prefill_profile.tgz.
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
if [ "${PROFILE:-0}" = 1 ] && [ -x "$NCU" ] && [ -f "$B/libgdn_capi.so" ]; then
  mkdir -p /tmp/prefill_profile
  for kernel in TPrepKernel FusedChunkKernel; do
    say "ncu: $kernel at 16/32 4 x 8192"
    rep=/tmp/prefill_profile/$kernel
    timeout 150 "$NCU" --kernel-name "regex:$kernel" --launch-skip 2 --launch-count 1 \
      --section WarpStateStats --section SourceCounters --section InstructionStats \
      --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis \
      --section LaunchStats -o "$rep" -f \
      python3 bench/prefill/route_bench.py --capi "$B/libgdn_capi.so" --out /tmp/prefill_profile \
      --rows 0 --no-fla --ref-len 0 --budget-s 60 > "$rep.txt" 2>&1
    echo "rc $?" | tee -a "$LOG"
    [ -f "$rep.ncu-rep" ] || { tail -5 "$rep.txt" | tee -a "$LOG"; continue; }
    "$NCU" -i "$rep.ncu-rep" --page details > "$rep.details.txt" 2>&1
    grep -E "Duration|Throughput|Registers Per|Shared Memory Config|Achieved Occupancy|Theoretical Occupancy|Block Limit|Issue Slots Busy|Eligible Warps|No Eligible|Executed Ipc|Stall|Pipe|L1/TEX Hit|L2 Hit" \
      "$rep.details.txt" | head -45 | tee -a "$LOG"
    "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.sass.csv" 2> /dev/null
    python3 scripts/device/ncu_hot_lines.py "$rep.sass.csv" --top 30 2>&1 | tee -a "$LOG"
  done
  tar -czf "$OUT/prefill_profile.tgz" -C /tmp prefill_profile
fi
say "done"
