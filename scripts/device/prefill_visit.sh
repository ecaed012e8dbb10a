#!/usr/bin/env bash
# One device visit (<= ~9.5 minutes) for the chunked prefill: the GPU tests
# against the float64 oracle (every kernel-1 variant and V tile), the
# benchmark next to flash-linear-attention on the same tensors with the
# checks (bench/prefill/compare_fla.py), compute-sanitizer memcheck and
# racecheck on small cases, and an Nsight Compute summary of kernels 1 and 2 at
# 16/32 1 x 32768 (SKIP_NCU=1 leaves it out). Everything lands in
# $OUT/visit.tar.gz plus the table; BENCH_END_S (default 430) and CHECKS_S
# (70) bound the benchmark, NCU_ROWS / NCU_PREP / NCU_STATE pick what ncu sees.
# Bundle here with
#   BUILD=build bash scripts/device/bundle.sh chunked_prefill_test gdn_capi_test gdn_capi
# (FLA 0.6.0 wheels in .whl, see bench/prefill/run_device.sh), then
#   run carry [".bundle", ".whl"] command "bash scripts/device/prefill_visit.sh".
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
WORK=/tmp/gdn_visit
mkdir -p "$WORK"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/gdn_bundle && cp -r .bundle /tmp/gdn_bundle
if [ -f /tmp/gdn_bundle/pack.tar.xz ]; then
  python3 -c "import tarfile; tarfile.open('/tmp/gdn_bundle/pack.tar.xz').extractall('/tmp/gdn_bundle')"
fi
B=/tmp/gdn_bundle/bin
export LD_LIBRARY_PATH=/tmp/gdn_bundle/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; cat .bundle/COMMIT; } \
  > "$WORK/gpu.txt" 2>&1
cat "$WORK/gpu.txt"

# 1. GPU tests.
for t in chunked_prefill_test gdn_capi_test; do
  timeout 120 "$B/$t" > "$WORK/$t.txt" 2>&1
  echo "== $t rc=$? at $(elapsed)s"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|Failure|Which is|max_abs_rel" "$WORK/$t.txt" | head -30
done

# 2. The benchmark and the checks, next to FLA.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl >/dev/null 2>&1 \
  && export PYTHONPATH=/tmp/site
left=$(( ${BENCH_END_S:-430} - $(elapsed) ))
[ $left -lt 90 ] && left=90
timeout "$left" python3 bench/prefill/compare_fla.py --capi "$B/libgdn_capi.so" --out "$WORK" \
  --budget-s $(( left - 10 )) --checks-s "${CHECKS_S:-70}" > "$WORK/prefill_compare.log" 2>&1
echo "== compare_fla rc=$? at $(elapsed)s"
grep -v '^{' "$WORK/prefill_compare.log" | grep -v "^ok  " | tail -45

# 3. compute-sanitizer on small cases (the default kernel 1 and both V-tile widths).
timeout 60 compute-sanitizer --tool memcheck --print-limit 5 "$B/chunked_prefill_test" \
  --gtest_filter='*GroupSizes*' > "$WORK/prefill_memcheck.txt" 2>&1
echo "== memcheck rc=$? at $(elapsed)s"
grep -E "ERROR SUMMARY|Invalid|PASSED|FAILED" "$WORK/prefill_memcheck.txt" | head -6
timeout 110 compute-sanitizer --tool racecheck --print-limit 5 "$B/chunked_prefill_test" \
  --gtest_filter='*PrefillThenDecode*:*ExtremeGates*' > "$WORK/prefill_racecheck.txt" 2>&1
echo "== racecheck rc=$? at $(elapsed)s"
grep -E "RACECHECK SUMMARY|ERROR SUMMARY|hazard|PASSED|FAILED" "$WORK/prefill_racecheck.txt" | head -6

# 4. Nsight Compute summary of both kernel-1 variants and kernel 2 at 16/32 1 x 32768.
if [ -z "${SKIP_NCU:-}" ] && [ $(elapsed) -lt 520 ]; then
  timeout $(( 560 - $(elapsed) )) ncu --profile-from-start off --clock-control none \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    -k 'regex:ChunkPrep|StateChain|OutputPass' python3 bench/prefill/profile_kernels.py \
    --capi "$B/libgdn_capi.so" --rows "${NCU_ROWS:-16/32/1/32768}" --prep-variants "${NCU_PREP:-4}" \
    --state-variants "${NCU_STATE:--1}" > "$WORK/ncu_summary.txt" 2>&1
  echo "== ncu rc=$? at $(elapsed)s"
  grep -E "ChunkPrep|StateChain|OutputPass|Duration|Warp Cycles Per Issued|Achieved Occupancy|Issued Ipc|Registers Per|L2 Cache Throughput|Cluster Size" \
    "$WORK/ncu_summary.txt" | head -60
fi

cp "$WORK/prefill_bench.md" "$OUT/" 2>/dev/null
tar -czf "$OUT/visit.tar.gz" -C "$WORK" .
echo "== done at $(elapsed)s"
