#!/usr/bin/env bash
# One device step (<= ~3 minutes) for issue 16's engine-overhead target
# (no-compute server ÷ the same-run protobuf echo, decode 1 x 1 and 32 x 1):
# bench/request_path/run.sh over TCP for those two shapes, then, when perf
# travels in .bundle/tools (the device has none), a profile of the
# no-compute server under decode 32 x 1 over TCP: where the host's time goes
# on that machine, whose ratio differs from the VM's.
# BENCH=0 skips run.sh; PERF_SESSIONS (32) sets the profiled call's sessions.
# Needs .bundle with gdn-server gdn-bench gdn-echo gdn-min-client.
# Writes $OUT/engine_overhead.md, $OUT/engine_overhead.tar.gz, $OUT/engine_overhead.log.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
WORK=/tmp/engine_overhead
rm -rf "$WORK" && mkdir -p "$WORK" "$OUT"
LOG=$OUT/engine_overhead.log
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # B, LD_LIBRARY_PATH

if [ "${BENCH:-1}" = 1 ]; then
  say "request path, decode 1 x 1 and 32 x 1, TCP ($(head -1 .bundle/COMMIT))"
  BACKEND=cuda BIN=$B SHAPES="decode1 decode32" TRANSPORTS=tcp ARM_S=${ARM_S:-2} BEFORE=0 \
    CLIENT_COST=0 timeout 150 bash bench/request_path/run.sh "$WORK/request_path" \
    > "$WORK/request_path.log" 2>&1
  echo "rc $?" | tee -a "$LOG"
  cp "$WORK/request_path/results.md" "$OUT/engine_overhead.md" 2>/dev/null
  grep -E "^\| decode|engine overhead" "$WORK/request_path/results.md" 2>/dev/null | tee -a "$LOG"
fi

PERF=$PWD/.bundle/tools/perf
if [ -x "$PERF" ]; then
  sessions=${PERF_SESSIONS:-32}
  say "perf: the no-compute server under decode $sessions x 1 over TCP"
  tools_lib=$PWD/.bundle/tools/lib  # perf's own libraries, for perf alone
  "$B"/gdn-server --backend=cuda --diagnostic_no_compute --layers=4 --metrics_listen=127.0.0.1:0 \
    --listen=127.0.0.1:50990 > "$WORK/perf_server.out" 2> "$WORK/perf_server.err" &
  spid=$!
  for _ in $(seq 150); do grep -q listening "$WORK/perf_server.out" 2>/dev/null && break; sleep 0.2; done
  timeout 20 "$B"/gdn-bench --server=127.0.0.1:50990 --layers=4 --sessions=$sessions --sessions_per_call=$sessions \
    --prefill_tokens=0 --decode_steps=1000000 --duration_s=6 --warmup_s=0.5 --progress=false \
    --json_out="$WORK/perf_bench.json" > "$WORK/perf_bench.txt" 2>&1 &
  bpid=$!
  sleep 2
  LD_LIBRARY_PATH=$tools_lib timeout 15 "$PERF" record -F 4000 -g -p "$spid" -o "$WORK/server.perf" -- sleep 3 \
    > "$WORK/perf_record.txt" 2>&1
  echo "perf record rc $?" | tee -a "$LOG"
  wait $bpid
  kill -TERM $spid 2>/dev/null; wait $spid 2>/dev/null
  LD_LIBRARY_PATH=$tools_lib "$PERF" report -i "$WORK/server.perf" --no-children --sort dso,symbol -g none 2>/dev/null | \
    grep -E "^ +[0-9]" | head -45 | cut -c1-150 > "$WORK/perf_top.txt"
  LD_LIBRARY_PATH=$tools_lib "$PERF" report -i "$WORK/server.perf" --no-children --sort comm -g none 2>/dev/null | \
    grep -E "^ +[0-9]" | head -8 >> "$WORK/perf_top.txt"
  head -30 "$WORK/perf_top.txt" | tee -a "$LOG"
  rm -f "$WORK/server.perf"
fi
tar -czf "$OUT/engine_overhead.tar.gz" -C /tmp engine_overhead
say "done"
