#!/usr/bin/env bash
# One device visit: GPU facts, a quick GPU test, the decode benchmark, the
# comparison with flash-linear-attention, the full GPU tests (gtest xml),
# compute-sanitizer memcheck and racecheck on a small decode case. Everything
# lands under $OUT (at most 8 files come back: keep it that way).
# Needs .bundle (scripts/device/bundle.sh) and .whl (FLA wheels) carried.
# PARTS=bench,fla,tests,sanitizer (default: all) picks what runs, so a visit
# that must fit 10 minutes can be split in two calls.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT" /tmp/gdn_xml
BUNDLE=$PWD/.bundle
if [ -f .bundle/pack.tar.xz ]; then  # bundle.sh packed bin/ and lib/ (over 60 MiB)
  BUNDLE=/tmp/gdn_bundle
  mkdir -p "$BUNDLE"
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    .bundle/pack.tar.xz "$BUNDLE"
fi
export LD_LIBRARY_PATH=$BUNDLE/lib:$BUNDLE/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # bin: libgdn_capi.so
export PYTHONUNBUFFERED=1
B=$BUNDLE/bin
LOG=$OUT/suite.log
COMMIT=$(head -1 .bundle/COMMIT | awk '{print $2}')
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
PARTS=${PARTS:-bench,fla,tests,sanitizer}
want() { [[ ",$PARTS," == *",$1,"* ]]; }

say "device"
{ nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; cat .bundle/COMMIT; } >>"$LOG" 2>&1

say "quick test: gdn_capi_test"
timeout 40 $B/gdn_capi_test --gtest_output=xml:/tmp/gdn_xml/gdn_capi_test.xml >>"$LOG" 2>&1
echo "rc $?" | tee -a "$LOG"

if want bench; then
  # Every variant, auto and deep also with programmatic dependent launch
  # (+pdl); the last table of decode_bench.md checks issue 4's targets.
  say "decode_bench"
  timeout 170 $B/decode_bench --json="$OUT/decode_bench.json" --md="$OUT/decode_bench.md" \
    --commit="$COMMIT" 2>&1 | tee -a "$LOG" | tail -20
  echo "rc ${PIPESTATUS[0]}" | tee -a "$LOG"
fi

if want fla; then
  say "compare_fla"
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
       --target /tmp/site .whl/*.whl >>"$LOG" 2>&1; then
    export PYTHONPATH=/tmp/site
  fi
  timeout 150 python3 bench/decode/compare_fla.py --lib $B/libgdn_capi.so --hv 32,64 \
    --json "$OUT/compare_fla.json" --md "$OUT/compare_fla.md" 2>&1 | tee -a "$LOG" | tail -40
  echo "rc ${PIPESTATUS[0]}" | tee -a "$LOG"
fi

if want tests; then
  for t in cuda_backend_test cuda_stream_test recurrent_kernel_test recurrent_pdl_test \
           server_cuda_test; do
    [ -x $B/$t ] || { echo "missing $t" | tee -a "$LOG"; continue; }
    say "$t"
    timeout "${TEST_TIMEOUT:-90}" $B/$t --gtest_output=xml:/tmp/gdn_xml/$t.xml >>"$LOG" 2>&1
    echo "rc $?" | tee -a "$LOG"
  done
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|\[chain\]|tests? ran" "$LOG" | tail -40
fi

if want sanitizer; then
  say "compute-sanitizer memcheck + racecheck (small decode case, every variant, with PDL)"
  SAN=$OUT/sanitizer.log
  SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck; do
    timeout 60 "$SANITIZER" --tool $tool --error-exitcode 9 \
      $B/recurrent_kernel_test --gtest_filter='*EveryVariantMatchesOracle*' >>"$SAN" 2>&1
    echo "$tool rc $?" | tee -a "$LOG" "$SAN"
  done
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$SAN" | tee -a "$LOG"
fi

if [ -f "$OUT/decode_bench.md" ]; then
  say "decode_bench.md (targets table last)"
  cat "$OUT/decode_bench.md" | tee -a "$LOG"
fi

tar -czf "$OUT/gtest_xml.tar.gz" -C /tmp/gdn_xml . 2>/dev/null
say "done"
