#!/usr/bin/env bash
# Where the decode kernel's warps wait, by source line (issues 22 and 19:
# bf16 pages at 74-76% of copy bandwidth, int8 / fp8 at 49-51%; more warps
# and other tile shapes did not help, 2026-12-02-decode-shapes and
# 2026-12-03-kernels-channel). One ncu collection per state dtype of the
# persistent kernel at batch 256, Hv 32 (WarpStateStats, SourceCounters,
# InstructionStats), on a decode_bench built with -lineinfo; then the
# source page as CSV and the 40 SASS lines with the most stall samples,
# each with its CUDA file:line and its top stall reasons.
#
#   here:   cmake -S . -B build-lineinfo -G Ninja -DGDN_WITH_CUDA=ON -DGDN_CUDA_ARCHITECTURES=90a \
#             -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_FLAGS=-lineinfo
#           ninja -C build-lineinfo decode_bench   (bundled as lineinfo/decode_bench)
#   device: OUT=... bash scripts/device/decode_profile_visit.sh
# PROFILE_STATES (default "bf16 int8"); PROFILE_ITEMS: the launch's work
# items, for the instruction mix per item (default 16384). Writes $OUT/decode_profile.log and
# $OUT/decode_profile.tgz (reports and CSVs).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/decode_profile.log
WORK=/tmp/decode_profile
rm -rf "$WORK" && mkdir -p "$WORK"
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # BUNDLE, B, LD_LIBRARY_PATH
BENCH=${DECODE_BENCH:-$BUNDLE/lineinfo/decode_bench}
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
if [ ! -x "$BENCH" ] || [ ! -x "$NCU" ]; then
  say "skipped: decode_bench ($BENCH) or ncu ($NCU) missing"
  exit 0
fi
"$NCU" --version | tail -1 | tee -a "$LOG"

for state in ${PROFILE_STATES:-bf16 int8}; do
  say "ncu: persistent decode kernel, $state pages, batch 256, Hv 32"
  rep=$WORK/decode_$state
  timeout 150 "$NCU" --kernel-name-base mangled --kernel-name "regex:.*Persistent.*" \
    --launch-skip 5 --launch-count 1 --import-source yes \
    --section WarpStateStats --section SourceCounters --section InstructionStats \
    --section SpeedOfLight --section Occupancy -o "$rep" -f \
    "$BENCH" --hv=32 --states="$state" --batches=256 > "$rep.txt" 2>&1
  echo "rc $?" | tee -a "$LOG"
  [ -f "$rep.ncu-rep" ] || { tail -5 "$rep.txt" | tee -a "$LOG"; continue; }
  "$NCU" -i "$rep.ncu-rep" --page details > "$rep.details.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Eligible Warps|No Eligible|Executed Ipc|Stall" \
    "$rep.details.txt" | head -30 | tee -a "$LOG"
  "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.sass.csv" 2> "$rep.sass.err"
  echo "source page: $(wc -l < "$rep.sass.csv") lines ($(head -c 300 "$rep.sass.err"))" | tee -a "$LOG"
  python3 scripts/device/ncu_hot_lines.py "$rep.sass.csv" 2>&1 | tee -a "$LOG"
  # Instructions per work item (batch 256 x Hv 32 x V / 64-column tiles).
  python3 scripts/device/ncu_instruction_mix.py "$rep.sass.csv" --per "${PROFILE_ITEMS:-16384}" \
    2>&1 | tee -a "$LOG"
  "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source cuda,sass > "$rep.cuda_sass.csv" 2>&1
done
tar -czf "$OUT/decode_profile.tgz" -C /tmp decode_profile
say "done"
