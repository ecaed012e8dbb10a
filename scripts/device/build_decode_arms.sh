#!/usr/bin/env bash
# Builds decode_bench at several commits, for a same-run A/B of decode-kernel
# variants on the device (scripts/device/decode_ab_visit.sh: "before" and
# EXTRA_ARMS read .bundle/<arm>/decode_bench):
#
#   bash scripts/device/build_decode_arms.sh before=main units=decode-quant-units~3 t64=decode-quant-units
#
# One worktree and one build directory (under ARMS_DIR, default
# /tmp/decode_arms) serve every arm in turn, so each arm after the first
# recompiles only the kernel files that differ. Each decode_bench (or each
# of ARM_TARGETS, e.g. ARM_TARGETS="gdn-chain-bars quantized_state_test" for
# scripts/device/chain_bars_visit.sh; a library target such as gdn_capi
# as lib<target>.so) lands stripped in .bundle/<arm>/ with
# its commit in .bundle/<arm>/COMMIT; run it
# after scripts/device/bundle.sh (which recreates .bundle/), then pack as
# bundle.sh does when the bundle is over the carry limit:
#   tar -C .bundle -cf - bin lib <arms> | xz -6 -T2 > .bundle/pack.tar.xz
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
DIR=${ARMS_DIR:-/tmp/decode_arms}
WT=$DIR/worktree
BUILD=$DIR/build
TARGETS=${ARM_TARGETS:-decode_bench}
[ $# -gt 0 ] || { echo "usage: $0 NAME=REV [NAME=REV ...]" >&2; exit 2; }
mkdir -p "$DIR"
if [ ! -d "$WT" ]; then
  git worktree add --detach "$WT" HEAD >/dev/null
fi
for arm in "$@"; do
  name=${arm%%=*}
  rev=${arm#*=}
  [ -n "$name" ] && [ "$name" != "$arm" ] || { echo "bad arm '$arm' (NAME=REV)" >&2; exit 2; }
  commit=$(git rev-parse --verify "$rev^{commit}")
  git -C "$WT" checkout -q --detach "$commit"
  log=$DIR/build_$name.log
  if ! { cmake -S "$WT" -B "$BUILD" -G Ninja -DGDN_WITH_CUDA=ON -DGDN_CUDA_ARCHITECTURES=90a &&
         cmake --build "$BUILD" --target $TARGETS -j2; } > "$log" 2>&1; then
    tail -30 "$log" >&2
    echo "$name ($rev): build failed, log in $log" >&2
    exit 1
  fi
  mkdir -p "$ROOT/.bundle/$name"
  for t in $TARGETS; do
    f=$(find "$BUILD/bench" "$BUILD/tests" -type f -name "$t" | head -1)
    [ -n "$f" ] || f=$(find "$BUILD" -type f -name "lib$t.so" | head -1)  # e.g. gdn_capi
    [ -n "$f" ] || { echo "$name: no build output for $t" >&2; exit 1; }
    cp "$f" "$ROOT/.bundle/$name/"
    strip --strip-debug "$ROOT/.bundle/$name/$(basename "$f")"
  done
  echo "commit $commit ($rev)" > "$ROOT/.bundle/$name/COMMIT"
  echo "$name: $(cat "$ROOT/.bundle/$name/COMMIT")"
done
