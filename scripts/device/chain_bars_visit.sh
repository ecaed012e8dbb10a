#!/usr/bin/env bash
# One device visit, <= ~5 minutes: the quantized decode-chain tests' figures
# against their bars (bench/eval/chain_bars_main.cc) for several builds on
# the same seeds, to tell a kernel change that moves roundings from the
# tails of a correct one (bench/results/2026-12-05-quantized-chain-bars).
# Needs .bundle with lib/ (scripts/device/bundle.sh) and, per arm,
# .bundle/<arm>/{gdn-chain-bars,quantized_state_test} from
#   ARM_TARGETS="gdn-chain-bars quantized_state_test" \
#     bash scripts/device/build_decode_arms.sh main=main cand=decode-candidate
# ARMS ("main cand"); SEEDS (15) of cases 0-3 and SEEDS_LARGE (2) of case 4;
# REPLAY: seeds for the device test itself (GDN_TEST_SEED), each arm.
# Writes $OUT/chain_bars.log (the summary) and $OUT/bars_<arm>.txt.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/chain_bars.log
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # BUNDLE, LD_LIBRARY_PATH
for arm in ${ARMS:-main cand}; do
  echo "== $arm: $(cat "$BUNDLE/$arm/COMMIT" 2>/dev/null)" | tee -a "$LOG"
  for s in ${REPLAY:-}; do
    GDN_TEST_SEED=$s timeout 120 "$BUNDLE/$arm/quantized_state_test" --gtest_brief=1 \
      --gtest_filter='*DecodeChains*' > "$OUT/replay_${arm}_$s.txt" 2>&1
    echo "$arm: DecodeChains with GDN_TEST_SEED=$s: rc $?" | tee -a "$LOG"
  done
  { timeout 150 "$BUNDLE/$arm/gdn-chain-bars" --backend=cuda --seeds="${SEEDS:-15}" --cases=0,1,2,3
    timeout 90 "$BUNDLE/$arm/gdn-chain-bars" --backend=cuda --seeds="${SEEDS_LARGE:-2}" --cases=4
  } > "$OUT/bars_$arm.txt" 2>&1
  echo "$arm: gdn-chain-bars rc $?" | tee -a "$LOG"
  grep -c "failed 0/" "$OUT/bars_$arm.txt" | sed "s/^/$arm: combinations without a failure: /" |
    tee -a "$LOG"
  grep "failing seed" "$OUT/bars_$arm.txt" | head -20 | tee -a "$LOG"
done
