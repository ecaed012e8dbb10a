#!/usr/bin/env bash
# One device step (<= ~4 minutes) for a decode-kernel change: the same-run
# A/B of decode_bench against an earlier build's (arms taking turns, twice),
# compute-sanitizer racecheck and synccheck of the quantised-state test (a
# barrier was removed from the int8 / fp8 store), and an ncu profile of the
# bf16-state decode kernel at batch 256 (issue 22: profile first).
# Needs .bundle (scripts/device/bundle.sh, with decode_bench and
# quantized_state_test) and the earlier decode_bench as
# .bundle/before/decode_bench (unpacked next to the bundle's libraries, or
# before/ inside .bundle/pack.tar.xz); EXTRA_ARMS ("a b"): more builds to
# time, each .bundle/<arm>/decode_bench likewise.
# STATES, BATCHES: decode_bench's lists; ROUNDS (2) of the A/B; SAN_TOOLS
# ("racecheck synccheck") and SAN_S (120 s each); NCU_BF16=0 skips ncu. Writes $OUT/decode_ab.tar.gz and
# $OUT/decode_ab.log.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
WORK=/tmp/decode_ab
rm -rf "$WORK" && mkdir -p "$WORK" "$OUT"
LOG=$OUT/decode_ab.log
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # B, LD_LIBRARY_PATH
bin_of() {  # arm -> its decode_bench ("after": the bundle's own)
  case $1 in
    after) echo "$B/decode_bench" ;;
    *) echo "$BUNDLE/$1/decode_bench" ;;
  esac
}
STATES=${STATES:-fp32,bf16,int8,fp8}
BATCHES=${BATCHES:-128,256}

say "decode_bench A/B: $(head -1 .bundle/COMMIT) against $(cat "$BUNDLE/before/COMMIT" 2>/dev/null)"
for round in $(seq "${ROUNDS:-2}"); do
  for arm in before after ${EXTRA_ARMS:-}; do
    bin=$(bin_of "$arm")
    timeout 90 "$bin" --hv=32 --states="$STATES" --batches="$BATCHES" \
      --md="$WORK/decode_${arm}_$round.md" > "$WORK/decode_${arm}_$round.txt" 2>&1
    echo "$arm round $round: rc $?" | tee -a "$LOG"
    tail -12 "$WORK/decode_${arm}_$round.md" 2>/dev/null | tee -a "$LOG"
  done
done

SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# The decode paths of the quantised-state test, the per-token draft states
# (a prefix-state store followed at once by the final store), and every
# block-shape variant forced (the persistent kernel's shared-memory
# pipeline of tiles and first tokens).
for tool in ${SAN_TOOLS:-racecheck synccheck}; do
  for t in "quantized_state_test --gtest_filter=*DecodeChains*:*EveryCompiledVariant*" \
           "draft_states_test" "recurrent_kernel_test --gtest_filter=*EveryVariantMatchesOracle*"; do
    read -r -a args <<< "$t"  # split, never globbed
    say "compute-sanitizer $tool ${args[*]}"
    timeout "${SAN_S:-120}" "$SANITIZER" --tool "$tool" --error-exitcode 9 "$B/${args[0]}" "${args[@]:1}" \
      > "$WORK/san_${tool}_${args[0]}.txt" 2>&1
    echo "rc $?" | tee -a "$LOG"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) " "$WORK/san_${tool}_${args[0]}.txt" | tee -a "$LOG"
  done
done

NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
if [ -x "$NCU" ] && [ "${NCU_BF16:-1}" = 1 ]; then
  say "ncu: the bf16-state decode kernel at batch 256"
  timeout 90 "$NCU" --kernel-name-base mangled --kernel-name "regex:.*Persistent.*" \
    --launch-skip 5 --launch-count 1 --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section InstructionStats \
    "$B/decode_bench" --hv=32 --states=bf16 --batches=256 > "$WORK/ncu_bf16.txt" 2>&1
  echo "rc $?" | tee -a "$LOG"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Eligible Warps|No Eligible|Executed Ipc" \
    "$WORK/ncu_bf16.txt" | head -20 | tee -a "$LOG"
fi
tar -czf "$OUT/decode_ab.tar.gz" -C /tmp decode_ab
say "done"
