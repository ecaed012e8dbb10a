#!/usr/bin/env bash
# One device call, or two (PART=tests, then PART=bench; ~5 minutes each): a
# v8 chunked-prefill change against main in the same run. The bundle
# (scripts/device/bundle.sh fused_chunk_test chunked_prefill_route_test
# chunked_prefill_spans_test span_plan_test chunked_prefill_test
# chunked_prefill_checkpoints_test quantized_state_test server_cuda_test
# prefill_state_bench gdn_capi) with main's libgdn_capi.so and
# prefill_state_bench in .bundle/before/ (ARM_TARGETS="gdn_capi
# prefill_state_bench" scripts/device/build_decode_arms.sh before=main):
#   tests  prefill_route_visit.sh: the tests (EXTRA_TESTS too), memcheck and
#          racecheck on the router's workspace and on the span path
#          (SPAN_SAN_FILTER: its quantized pages too), a short route_bench;
#   bench  route_bench on ROUTE_ROWS for the bundle, main's library and the
#          bundle's again (BEFORE_CAPI), then prefill_state_bench of main and
#          of the bundle: prefill time by state dtype (issue 19: int8 / fp8
#          within 5% of the fp32-state time).
# Writes $OUT/prefill_route.log (+ its json files) and $OUT/pstate_{before,
# after}.md; prints the verdict lines.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
PART=${PART:-all}
if [ "$PART" = all ] || [ "$PART" = tests ]; then
  OUT=$OUT EXTRA_TESTS=${EXTRA_TESTS:-"fused_chunk_test quantized_state_test"} \
    SPAN_SAN_FILTER=${SPAN_SAN_FILTER:-"*UnusablePages*:*QuantizedPages*"} \
    ROUTE_ROWS=6 ROUTE_REF_LEN=8192 ROUTE_BENCH_S=30 \
    bash scripts/device/prefill_route_visit.sh > /dev/null 2>&1
  echo "prefill_route_visit (tests): rc $?"
fi
[ "$PART" = tests ] && { grep -E ": rc |ROUTE|SUMMARY|state-only" "$OUT/prefill_route.log"; exit 0; }
OUT=$OUT SKIP_TESTS=1 BEFORE_CAPI=.bundle/before/libgdn_capi.so \
  ROUTE_ROWS=${ROUTE_ROWS:-3,4,7,6} ROUTE_REF_LEN=${ROUTE_REF_LEN:-0} \
  ROUTE_BENCH_S=${ROUTE_BENCH_S:-60} ROUTE_AB_S=${ROUTE_AB_S:-60} \
  bash scripts/device/prefill_route_visit.sh > /dev/null 2>&1
echo "prefill_route_visit (bench): rc $?"
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # B, LD_LIBRARY_PATH
for arm in before after; do
  bin=$B/prefill_state_bench
  [ "$arm" = before ] && bin=.bundle/before/prefill_state_bench
  timeout 100 "$bin" --rows="${PSTATE_ROWS:-16/32/8/1024,16/32/1/8192}" \
    --states=fp32,int8,fp8 --calls=10 --md="$OUT/pstate_$arm.md" > "/tmp/pstate_$arm.txt" 2>&1
  echo "prefill_state_bench $arm: rc $?"
done
grep -E ": rc |ROUTE|SUMMARY|state-only" "$OUT/prefill_route.log" | head -60
cat "$OUT"/pstate_*.md 2>/dev/null
