#!/usr/bin/env bash
# One device visit: gdn-bench sweep and SLO search against gdn-server on the
# cuda backend (default Qwen3-Next shape, 36 layers, 32 sessions per call like
# a model runner's decode batch), plus the transport ceiling from a second
# server in --diagnostic_no_compute mode (cpu backend: it runs no kernel).
# Needs .bundle (scripts/device/bundle.sh gdn-server gdn-bench). Writes $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:$PWD/.bundle/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=.bundle/bin
LOG=$OUT/server_sweep.log
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }

start_server() {  # name, flags...; sets ${name}_grpc and ${name}_metrics
  local name=$1; shift
  $B/gdn-server --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 "$@" \
    >/tmp/$name.out 2>/tmp/$name.err &
  for _ in $(seq 150); do grep -q listening /tmp/$name.out 2>/dev/null && break; sleep 0.2; done
  local line; line=$(grep listening /tmp/$name.out)
  echo "$name: $line" | tee -a "$LOG"
  eval "${name}_grpc=$(echo "$line" | sed -E 's/.*grpc=([^ ]+).*/\1/')"
  eval "${name}_metrics=$(echo "$line" | sed -E 's/.*metrics=([^ ]+).*/\1/')"
}

start_server real --backend=cuda
start_server ceiling --backend=cpu --diagnostic_no_compute --device_state_budget=24GiB
WORK=(--sessions_per_call=32 --prefill_tokens=64 --decode_steps=64 --progress=false)

say "sweep over concurrent sessions"
timeout 150 $B/gdn-bench --server="$real_grpc" --metrics="$real_metrics" "${WORK[@]}" \
  --sweep=concurrency:32,64,128,256,512 --warmup_s=2 --duration_s=8 \
  --json_out="$OUT/sweep.json" --csv_out="$OUT/sweep.csv" --plot="$OUT/sweep.png" 2>&1 | tail -12 | tee -a "$LOG"

say "SLO search: decode_step (one token over 36 layers) P99 <= 100 ms"
timeout 120 $B/gdn-bench --server="$real_grpc" "${WORK[@]}" --slo_p99_ms=100 --slo_phase=decode_step \
  --slo_load=concurrency:32:1024 --slo_max_probes=7 --warmup_s=1 --duration_s=6 \
  --json_out="$OUT/slo.json" 2>&1 | tail -14 | tee -a "$LOG"

say "transport ceiling at 128 sessions"
timeout 60 $B/gdn-bench --server="$real_grpc" --compare_ceiling="$ceiling_grpc" "${WORK[@]}" \
  --sessions=128 --warmup_s=2 --duration_s=8 --json_out="$OUT/ceiling.json" 2>&1 | tail -30 | tee -a "$LOG"

kill -TERM %1 %2 2>/dev/null; wait
say "done"
