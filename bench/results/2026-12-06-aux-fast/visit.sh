#!/usr/bin/env bash
# Session 32, one device call: the aux warpgroup rebuilt after its profile
# (../2026-12-06-aux-prep/README.md "The profile"): gates, row fixes and
# norms by three producer warps, factored decays, each aux warp inverting
# its own diagonal block.
#   fast/fused_chunk_test            21 float64 cases (every variant incl. the
#                                    aux), timing rows Rows and RoutedRows
#   fast/chunked_prefill_route_test  the aux through ChunkedPrefill
#   fast/tprep_test                  TPrep (its diagonal inverse now reads rows
#                                    four floats at a time)
#   aux/fused_chunk_test Rows        session 31's aux, same run
#   memcheck + racecheck on two cases, then one ncu pass over the aux form
#   bash bench/results/2026-12-06-aux-fast/visit.sh
set -u
RESULTS=${OUT:-/tmp/gdn_out}; mkdir -p "$RESULTS"
W=/tmp/auxfast; rm -rf "$W"; mkdir -p "$W"
. scripts/device/unpack_bundle.sh
F=$BUNDLE/fast
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$W/gpu.txt"
pack() { tar -C "$W" -czf "$RESULTS/auxfast.tgz" .; }
timeout 300 "$F/fused_chunk_test" > "$W/fused_chunk_test.txt" 2>&1
echo "fused_chunk_test rc=$?" | tee -a "$W/gpu.txt"
grep -E "^\[ (timing|routed)" "$W/fused_chunk_test.txt" | cut -c1-300
grep -E "FAILED|PASSED" "$W/fused_chunk_test.txt" | head -30
pack
for t in chunked_prefill_route_test tprep_test; do
  timeout 150 "$F/$t" > "$W/$t.txt" 2>&1
  echo "$t rc=$?" | tee -a "$W/gpu.txt"
  grep -E "FAILED|PASSED" "$W/$t.txt" | head
done
timeout 120 "$BUNDLE/aux/fused_chunk_test" --gtest_filter=FusedChunkTiming.Rows \
  > "$W/old_aux_rows.txt" 2>&1
echo "old aux rows rc=$?" | tee -a "$W/gpu.txt"
grep -E "^\[ timing" "$W/old_aux_rows.txt" | cut -c1-300
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
C='Cases/FusedChunkTest.MatchesFloat64AndV7/len65_bf16:Cases/FusedChunkTest.MatchesFloat64AndV7/varlen_fp16_qwen'
for tool in memcheck racecheck; do
  timeout 200 "$SAN" --tool $tool --error-exitcode 9 "$F/fused_chunk_test" --gtest_filter="$C" \
    > "$W/san_$tool.txt" 2>&1
  echo "$tool rc=$?" | tee -a "$W/gpu.txt"
  tail -3 "$W/san_$tool.txt"
done
pack
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 240 "$NCU" --kernel-name-base mangled -k regex:'Lb1EEEv' -c 1 \
  --section WarpStateStats --section SchedulerStats --section SourceCounters \
  --section LaunchStats --import-source yes -o "$W/aux" \
  "$F/fused_chunk_test" --gtest_filter=FusedChunkTiming.Rows > "$W/ncu_run.txt" 2>&1
echo "ncu rc=$?" | tee -a "$W/gpu.txt"
"$NCU" -i "$W/aux.ncu-rep" --page details > "$W/details.txt" 2>&1
"$NCU" -i "$W/aux.ncu-rep" --page source --csv --print-source sass > "$W/source.csv" 2>/dev/null
rm -f "$W/aux.ncu-rep"
grep -E "Issued Warp|Eligible Warps|Duration" "$W/details.txt" | head
pack
