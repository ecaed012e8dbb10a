#!/usr/bin/env bash
# One device visit, <= ~5 minutes: client-side knobs of a Forward call
# against the same servers. One gdn-server with kernels (SERVER_FLAGS), one
# with --diagnostic_no_compute (NO_COMPUTE=1) and the proto echo; gdn-bench
# runs every shape (SHAPES) x call kind (CALLS: unary, stream) x client arm
# (CLIENT_ARMS, or CLIENT_ARMS_<shape> for one shape: flag sets separated
# by ';', e.g. ";--max_message_bytes=1100000" for the defaults and the part
# size a call is split at) against each server, through
# --compare_echo=<proto echo> (TURNS turns each: server and echo take turns
# with the same requests, so every ratio is to the same run's echo).
# ROUNDS repeats the whole sweep (arms in the same order each round).
# Needs .bundle from:
#   bash scripts/device/bundle.sh gdn-server gdn-bench gdn-echo
# Writes under $OUT: client_arms.log (summary lines of every run) and
# client_arms.tar.gz (each run's full output and JSON, the servers' logs).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/client_arms.log
t0=$(date +%s)
say() { echo "== $* ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG"; }

. scripts/device/unpack_bundle.sh  # BUNDLE, B, LD_LIBRARY_PATH

say "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat .bundle/COMMIT
  lscpu | grep -E "Model name|^CPU\(s\)"; } 2>&1 | tee -a "$LOG"

start() {  # name binary flags...: ADDR (and METRICS) of a started server
  local name=$1 bin=$2; shift 2
  "$B/$bin" --layers=4 --listen=127.0.0.1:0 "$@" > "/tmp/$name.out" 2> "/tmp/$name.err" &
  for _ in $(seq 150); do grep -q listening "/tmp/$name.out" 2>/dev/null && break; sleep 0.2; done
  ADDR=$(sed -nE 's/.*grpc=([^ ]+).*/\1/p' "/tmp/$name.out")
  METRICS=$(sed -nE 's/.*metrics=([^ ]+).*/\1/p' "/tmp/$name.out")
}
start echo gdn-echo --mode=proto
echo_addr=$ADDR
servers=()
# shellcheck disable=SC2086  # flag lists split on purpose
start kernels gdn-server --backend="${BACKEND:-cuda}" --metrics_listen=127.0.0.1:0 ${SERVER_FLAGS:-}
servers+=("kernels $ADDR $METRICS")
if [ "${NO_COMPUTE:-1}" = 1 ]; then
  # shellcheck disable=SC2086
  start no_compute gdn-server --backend="${BACKEND:-cuda}" --metrics_listen=127.0.0.1:0 --diagnostic_no_compute \
    ${SERVER_FLAGS:-}
  servers+=("no_compute $ADDR $METRICS")
fi
say "echo $echo_addr; servers: ${servers[*]}; SERVER_FLAGS=${SERVER_FLAGS:-}"

mkdir -p /tmp/client_arms
for round in $(seq "${ROUNDS:-1}"); do
  for shape in ${SHAPES:-decode256 prefill2048}; do
    shape_arms=CLIENT_ARMS_$shape  # e.g. CLIENT_ARMS_prefill2048: this shape's own arms
    IFS=';' read -r -a arms <<< "${!shape_arms:-${CLIENT_ARMS:-}}"
    [ ${#arms[@]} -gt 0 ] || arms=("")
    case $shape in
      decode*) n=${shape#decode}; work=(--sessions="$n" --sessions_per_call="$n" --prefill_tokens=0
                 --decode_steps=1000000 --duration_s="${ARM_S:-2}") ;;
      prefill*) t=${shape#prefill}; work=(--sessions=1 --sessions_per_call=1 --prefill_tokens="$t"
                  --decode_steps=0 --duration_s="${PREFILL_S:-3}") ;;
    esac
    for call in ${CALLS:-stream unary}; do
      for i in "${!arms[@]}"; do
        for server in "${servers[@]}"; do
          read -r sname saddr smetrics <<< "$server"
          run=/tmp/client_arms/r${round}_${shape}_${call}_arm${i}_$sname
          say "round $round $shape $call $sname arm $i: ${arms[$i]:-(defaults)}"
          # shellcheck disable=SC2086
          timeout 120 "$B/gdn-bench" --server="$saddr" --compare_echo="$echo_addr" \
            --compare_rounds="${TURNS:-3}" --metrics="$smetrics" --transport="$call" --layers=4 \
            "${work[@]}" --warmup_s=0.5 --progress=false --json_out="$run.json" ${arms[$i]} \
            > "$run.txt" 2>&1
          echo "rc $?" | tee -a "$LOG"
          grep -E "queue|server p50|ratio|^ +(decode|prefill) +[0-9]" "$run.txt" | tee -a "$LOG"
        done
      done
    done
  done
done
pkill -TERM -f "bin/gdn-server"
pkill -TERM -f "bin/gdn-echo"
tar -czf "$OUT/client_arms.tar.gz" -C /tmp client_arms echo.out echo.err kernels.out kernels.err \
  no_compute.out no_compute.err 2>/dev/null
say "done"
