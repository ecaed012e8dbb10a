#!/usr/bin/env bash
# One device step (~2 minutes): the drain of two gdn-server builds, arms
# taking turns: SESSIONS sessions of the default 36-layer shape
# (bench/soak/fill_sessions.py), then SIGTERM with --snapshot_dir on the
# machine's disk; the drain's own report line (sessions, bytes, seconds).
# Needs .bundle (libraries), .bundle/drain/gdn-server-{before,after} and
# .whl (the Python package). Writes $OUT/drain_ab.log.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/drain_ab.log
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # LD_LIBRARY_PATH
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_wheels.sh  # PYDIR on PYTHONPATH
for round in $(seq "${ROUNDS:-2}"); do
  for arm in before after; do
    dir=/tmp/drain_snap; rm -rf "$dir"; mkdir -p "$dir"
    .bundle/drain/gdn-server-$arm --backend=cuda --listen=127.0.0.1:50995 \
      --metrics_listen=127.0.0.1:0 --snapshot_dir="$dir" --device_state_budget=16GiB \
      > /tmp/drain_$arm.out 2> /tmp/drain_$arm.err &
    pid=$!
    for _ in $(seq 150); do grep -q listening /tmp/drain_$arm.out 2>/dev/null && break; sleep 0.2; done
    timeout 60 python3 bench/soak/fill_sessions.py --target 127.0.0.1:50995 \
      --sessions "${SESSIONS:-64}" > /tmp/drain_fill.txt 2>&1
    kill -TERM $pid; wait $pid
    echo "round $round $arm: $(tail -1 /tmp/drain_fill.txt); $(grep 'drain: wrote' /tmp/drain_$arm.err)" | tee -a "$LOG"
  done
done
