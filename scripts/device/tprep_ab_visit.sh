#!/usr/bin/env bash
# One device step (issue 22, TPrep faster): TPrep's two register budgets side
# by side, 3 blocks per SM (80 registers, the default) and 4 (64 registers,
# GDN_TPREP_BLOCKS_PER_SM=4; kernels/cuda/chunked/tprep.h). For each: the
# TPrep test (float64 reference; tests/gpu/tprep_test.cu), the v8 call on
# route_bench rows 0-2 (16/32 4 x 8192, 16/32 8 x 1024, 16/64 8 x 4096; no
# FLA, no reference), and ncu of TPrep at 16/32 4 x 8192 (duration,
# occupancy, warp states, the hottest SASS lines). About 5 minutes.
#
#   bash scripts/device/bundle.sh tprep_test gdn_capi
#   run carry [".bundle"] command "bash scripts/device/tprep_ab_visit.sh"
#
# Everything goes to ONE file, $OUT/tprep_ab.log (route_bench's rows to
# $OUT/route_b3/ and $OUT/route_b4/).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/tprep_ab.log
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # B, LD_LIBRARY_PATH
tee -a "$LOG" 2>/dev/null < .bundle/COMMIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee -a "$LOG"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)

for blocks in 3 4; do
  export GDN_TPREP_BLOCKS_PER_SM=$blocks

  say "blocks $blocks: tprep_test (timeout 60)"
  tmp=/tmp/tprep_ab_test_$blocks.txt
  timeout 60 "$B/tprep_test" > "$tmp" 2>&1
  echo "tprep_test: rc $? $(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$tmp" | tr '\n' ' ')" | tee -a "$LOG"
  grep -E '^\[ +FAILED +\] |worst err/bound' "$tmp" | tee -a "$LOG"
  grep -E "Failure|Expected|Which is|worst ratio|rror|padding" "$tmp" | head -30 >> "$LOG"

  say "blocks $blocks: route_bench rows 0-2, v8 call (budget 60 s)"
  mkdir -p "$OUT/route_b$blocks"
  PYTHONUNBUFFERED=1 timeout 90 python3 bench/prefill/route_bench.py --capi "$B/libgdn_capi.so" \
    --out "$OUT/route_b$blocks" --rows 0,1,2 --no-fla --ref-len 0 --budget-s 60 \
    > "/tmp/tprep_ab_route_$blocks.txt" 2>&1
  echo "route_bench: rc $?" | tee -a "$LOG"
  grep -E "^ROUTE|Error|error" "/tmp/tprep_ab_route_$blocks.txt" | head -10 | tee -a "$LOG"

  if [ -x "$NCU" ]; then
    say "blocks $blocks: ncu TPrepKernel at 16/32 4 x 8192"
    rep=/tmp/tprep_ab_ncu_$blocks
    timeout 150 "$NCU" --kernel-name "regex:TPrepKernel" --launch-skip 2 --launch-count 1 \
      --section WarpStateStats --section SourceCounters --section SpeedOfLight \
      --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats -o "$rep" -f \
      python3 bench/prefill/route_bench.py --capi "$B/libgdn_capi.so" --out /tmp \
      --rows 0 --no-fla --ref-len 0 --budget-s 60 > "$rep.txt" 2>&1
    echo "rc $?" | tee -a "$LOG"
    if [ -f "$rep.ncu-rep" ]; then
      "$NCU" -i "$rep.ncu-rep" --page details > "$rep.details.txt" 2>&1
      grep -E "Duration|Throughput|Registers Per|Shared Memory Config|Achieved Occupancy|Theoretical Occupancy|Block Limit|Local Memory Spilling|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit" \
        "$rep.details.txt" | head -30 | tee -a "$LOG"
      "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.sass.csv" 2> /dev/null
      python3 scripts/device/ncu_hot_lines.py "$rep.sass.csv" --top 20 2>&1 | tee -a "$LOG"
    else
      tail -5 "$rep.txt" | tee -a "$LOG"
    fi
  fi
done
unset GDN_TPREP_BLOCKS_PER_SM
say "done"
