#!/usr/bin/env bash
# The next step for the aux warpgroup (README.md "Why"): where its ~11 us per
# chunk go. One ncu pass over one aux-form launch of FusedChunkTiming.Rows
# (16/32 4 x 8192), warp-state and source counters, and the SASS lines with
# the most stall samples (scripts/device/ncu_hot_lines.py); then session 30's
# decode shapes (SHAPES=0 skips them). Same pack as visit.sh (aux/ + the
# decode-shapes arms). Everything goes into $OUT/profile.tgz.
#   bash bench/results/2026-12-06-aux-prep/profile_visit.sh
set -u
RESULTS=${OUT:-/tmp/gdn_out}; mkdir -p "$RESULTS"
W=/tmp/aux_profile; rm -rf "$W"; mkdir -p "$W"
. scripts/device/unpack_bundle.sh
A=$BUNDLE/aux
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$W/gpu.txt"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
# The aux instances end in "Lb1EEEv" (kAuxPrep, the last template argument).
timeout 300 "$NCU" --kernel-name-base mangled -k regex:'Lb1EEEv' -c 1 \
  --section WarpStateStats --section SchedulerStats --section SourceCounters \
  --section LaunchStats --section Occupancy --import-source yes -o "$W/aux" \
  "$A/fused_chunk_test" --gtest_filter=FusedChunkTiming.Rows > "$W/ncu_run.txt" 2>&1
echo "ncu rc=$?" | tee -a "$W/gpu.txt"
"$NCU" -i "$W/aux.ncu-rep" --page details > "$W/details.txt" 2>&1
"$NCU" -i "$W/aux.ncu-rep" --page source --csv --print-source sass > "$W/source.csv" 2>/dev/null
python3 scripts/device/ncu_hot_lines.py "$W/source.csv" --top 60 > "$W/hot_lines.txt" 2>&1
grep -E "Warp Cycles|Issued|Eligible|No Eligible|Active Warps" "$W/details.txt" | head -20
head -70 "$W/hot_lines.txt"
tar -C "$W" -czf "$RESULTS/profile.tgz" .
if [ "${SHAPES:-1}" = 1 ]; then
  OUT=$W/shapes bash bench/results/2026-12-05-decode-shapes/visit.sh > "$W/shapes_stdout.txt" 2>&1
  tail -30 "$W/shapes_stdout.txt"
fi
tar -C "$W" -czf "$RESULTS/profile.tgz" .
