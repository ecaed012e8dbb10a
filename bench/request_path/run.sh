#!/usr/bin/env bash
# The request path's numbers in one command: per shape and transport, the
# echo ceilings (gdn-echo proto and raw), gdn-server --diagnostic_no_compute
# (and with kernels on cuda, or on cpu with KERNELS=1), all through gdn-bench
# --compare_echo against the same run's proto echo, and gdn-min-client against
# each echo (the client's floor); plus one "before" arm with gRPC's default
# transport settings. Writes JSON per arm, results.md (table, ratios the
# targets name, commands, commit, date) and results.json under OUT.
#
#   bench/request_path/run.sh [OUT]            # OUT defaults to /tmp/request_path
#
# Environment (all optional):
#   BACKEND=cpu|cuda     gdn-server's backend (default cpu)
#   KERNELS=1            also gdn-server with kernels on cpu (always on cuda)
#   SHAPES="decode1 decode32 decode256 prefill2048"   which shapes (default all)
#   TRANSPORTS="tcp unix"                              which transports (default both)
#   CALLS="unary stream" how gdn-bench calls Forward (default unary): stream
#                        adds arms over one ForwardStream per lane
#                        (--transport=stream, echo and server alike), labelled
#                        tcp-stream / unix-stream; gdn-min-client is unary only
#   BEFORE=0             skip the gRPC-default-transport arm (default on, TCP only)
#   CLIENT_COST=0        skip client_cost.sh (gdn-bench and gdn-min-client in
#                        alternating turns on the raw echo, TCP; default on for
#                        the decode shapes, CC_ROUNDS=5 turns of CC_S=1 s)
#   LAYERS=4  ARM_S=3  PREFILL_S=6  WARMUP_S=0.5  TURNS=3
#                        layers per step; measured seconds per arm (decode,
#                        prefill); warm-up; turns per arm of --compare_echo
#   SERVER_EXTRA="--flag=v ..."  more flags for every gdn-server arm
#   BIN=DIR              every binary from DIR; else .bundle/bin (with
#                        .bundle/lib), else build-echo/, else build/
#   GDN_SERVER= GDN_ECHO= GDN_BENCH= GDN_MIN_CLIENT=   single binaries
# Works with today's gdn-server and the new one: an arm whose server cannot
# start (e.g. no unix: listen support) is reported as "n/a" with the reason.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${1:-/tmp/request_path}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BACKEND=${BACKEND:-cpu}
SHAPES=${SHAPES:-decode1 decode32 decode256 prefill2048}
TRANSPORTS=${TRANSPORTS:-tcp unix}
CALLS=${CALLS:-unary}
LAYERS=${LAYERS:-4}
ARM_S=${ARM_S:-3}
PREFILL_S=${PREFILL_S:-6}
WARMUP_S=${WARMUP_S:-0.5}
TURNS=${TURNS:-3}
BEFORE=${BEFORE:-1}
CLIENT_COST=${CLIENT_COST:-1}
CC_ROUNDS=${CC_ROUNDS:-5}
CC_S=${CC_S:-1}
KERNELS=${KERNELS:-0}
[ "$BACKEND" = cuda ] && KERNELS=1

# --- binaries ----------------------------------------------------------------
find_bin() {  # name, then relative paths under a build folder
  local name=$1; shift
  if [ -n "${BIN:-}" ]; then echo "$BIN/$name"; return; fi
  if [ -x .bundle/bin/$name ]; then echo "$ROOT/.bundle/bin/$name"; return; fi
  for b in build-echo build; do
    for rel in "$@"; do
      [ -x "$b/$rel" ] && { echo "$ROOT/$b/$rel"; return; }
    done
  done
  echo "missing-$name"
}
GDN_SERVER=${GDN_SERVER:-$(find_bin gdn-server server/gdn-server)}
GDN_ECHO=${GDN_ECHO:-$(find_bin gdn-echo bench/echo/gdn-echo)}
GDN_BENCH=${GDN_BENCH:-$(find_bin gdn-bench client/bench/gdn-bench)}
GDN_MIN_CLIENT=${GDN_MIN_CLIENT:-$(find_bin gdn-min-client bench/echo/gdn-min-client)}
[ -d .bundle/lib ] && export LD_LIBRARY_PATH=$ROOT/.bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for b in "$GDN_SERVER" "$GDN_ECHO" "$GDN_BENCH" "$GDN_MIN_CLIENT"; do
  [ -x "$b" ] || { echo "run.sh: binary not found: $b (build it, or set BIN / GDN_*)" >&2; exit 1; }
done

LOG=$OUT/run.log
MANIFEST=$OUT/manifest.tsv   # shape transport arm tool json
COMMANDS=$OUT/commands.txt
: > "$LOG"; : > "$MANIFEST"; : > "$COMMANDS"
SOCK_DIR=$(mktemp -d /tmp/gdn_rp.XXXXXX)
PIDS=()
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$SOCK_DIR"
}
trap cleanup EXIT

# Starts a server and waits for its start-up line; sets ADDR ("" on failure,
# with the reason in FAIL). Args: name, binary, flags...
start() {
  local name=$1 bin=$2; shift 2
  ADDR=""; FAIL=""
  echo "$bin $*" >> "$COMMANDS"
  "$bin" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err" &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 150); do
    grep -q "listening" "$OUT/$name.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  ADDR=$(sed -nE 's/.*listening grpc=([^ ]+).*/\1/p' "$OUT/$name.out" | head -1)
  if [ -z "$ADDR" ]; then
    FAIL=$(tail -1 "$OUT/$name.err" | tr -d '\n')
    echo "   $name did not start: $FAIL" | tee -a "$LOG"
  fi
  LAST_PID=$pid
}
stop() { kill -TERM "$1" 2>/dev/null; wait "$1" 2>/dev/null; }

listen_for() {  # transport, name
  if [ "$1" = unix ]; then echo "unix:$SOCK_DIR/$2.sock"; else echo "127.0.0.1:0"; fi
}

# gdn-bench flags of a shape; min-client flags of a shape.
bench_shape() {
  case $1 in
    decode1)     echo "--sessions=1 --sessions_per_call=1 --prefill_tokens=0 --decode_steps=1000000 --duration_s=$ARM_S" ;;
    decode32)    echo "--sessions=32 --sessions_per_call=32 --prefill_tokens=0 --decode_steps=1000000 --duration_s=$ARM_S" ;;
    decode256)   echo "--sessions=256 --sessions_per_call=256 --prefill_tokens=0 --decode_steps=1000000 --duration_s=$ARM_S" ;;
    prefill2048) echo "--sessions=1 --sessions_per_call=1 --prefill_tokens=2048 --decode_steps=0 --duration_s=$PREFILL_S" ;;
    *) echo "unknown shape $1" >&2; exit 2 ;;
  esac
}
min_shape() {
  case $1 in
    decode1) echo "--sessions=1 --tokens=1 --max_seconds=$ARM_S" ;;
    decode32) echo "--sessions=32 --tokens=1 --max_seconds=$ARM_S" ;;
    decode256) echo "--sessions=256 --tokens=1 --max_seconds=$ARM_S" ;;
    prefill2048) echo "--sessions=1 --tokens=2048 --max_seconds=$PREFILL_S" ;;
  esac
}

# CALLS: the arm label of a transport and call kind, and gdn-bench's flag.
call_label() { if [ "$2" = stream ]; then echo "$1-stream"; else echo "$1"; fi; }
call_flags() { [ "$1" = stream ] && echo "--transport=stream"; }

# Args: shape transport arm target echo_addr extra-flags...
run_bench() {
  local shape=$1 transport=$2 arm=$3 target=$4 echo_addr=$5; shift 5
  local json=$OUT/${shape}_${transport}_${arm}.json
  local cmd=("$GDN_BENCH" --server="$target" --compare_echo="$echo_addr" --compare_rounds="$TURNS"
             --layers="$LAYERS" --warmup_s="$WARMUP_S" --progress=false --json_out="$json"
             $(bench_shape "$shape") "$@")
  say "gdn-bench $shape $transport $arm"
  echo "${cmd[*]}" >> "$COMMANDS"
  "${cmd[@]}" > "$OUT/${shape}_${transport}_${arm}.txt" 2>&1
  local rc=$?
  tail -8 "$OUT/${shape}_${transport}_${arm}.txt" >> "$LOG"
  [ $rc -eq 0 ] && printf '%s\t%s\t%s\tbench\t%s\n' "$shape" "$transport" "$arm" "$json" >> "$MANIFEST" \
    || echo "   gdn-bench failed (rc $rc): $(grep -m1 "gdn-bench:" "$OUT/${shape}_${transport}_${arm}.txt")" | tee -a "$LOG"
}
run_min() {  # shape transport arm target extra-flags...
  local shape=$1 transport=$2 arm=$3 target=$4; shift 4
  local json=$OUT/${shape}_${transport}_${arm}.json
  local cmd=("$GDN_MIN_CLIENT" --server="$target" --calls=1000000 --warmup_calls=20
             --json_out="$json" $(min_shape "$shape") "$@")
  say "gdn-min-client $shape $transport $arm"
  echo "${cmd[*]}" >> "$COMMANDS"
  "${cmd[@]}" >> "$LOG" 2>&1 && printf '%s\t%s\t%s\tmin\t%s\n' "$shape" "$transport" "$arm" "$json" >> "$MANIFEST"
}
note_na() {  # shape transport arm reason
  printf '%s\t%s\t%s\tna\t%s\n' "$1" "$2" "$3" "$4" >> "$MANIFEST"
}

server_flags=(--backend="$BACKEND" --layers="$LAYERS" --metrics_listen=127.0.0.1:0)
# cpu: room for 256 sessions x LAYERS states of 2 MiB.
[ "$BACKEND" = cpu ] && server_flags+=(--device_state_budget=3GiB --host_state_budget=256MiB)
# SERVER_EXTRA: more gdn-server flags for every server arm (an A/B of one knob).
# shellcheck disable=SC2206  # split on purpose
[ -n "${SERVER_EXTRA:-}" ] && server_flags+=($SERVER_EXTRA)

say "request path: backend $BACKEND, shapes [$SHAPES], transports [$TRANSPORTS], $LAYERS layers, ${ARM_S}s arms"
for transport in $TRANSPORTS; do
  start echo_proto_$transport "$GDN_ECHO" --mode=proto --layers="$LAYERS" --listen="$(listen_for "$transport" echo_proto)"
  proto=$ADDR
  start echo_raw_$transport "$GDN_ECHO" --mode=raw --layers="$LAYERS" --listen="$(listen_for "$transport" echo_raw)"
  raw=$ADDR
  start server_nc_$transport "$GDN_SERVER" "${server_flags[@]}" --diagnostic_no_compute \
    --listen="$(listen_for "$transport" server_nc)"
  nc=$ADDR; nc_fail=$FAIL; nc_pid=$LAST_PID
  [ -z "$proto" ] || [ -z "$raw" ] && { echo "echo did not start" | tee -a "$LOG"; exit 1; }
  for shape in $SHAPES; do
    for call in $CALLS; do
      label=$(call_label "$transport" "$call")
      # shellcheck disable=SC2046  # no flags or one
      run_bench "$shape" "$label" echo_raw "$raw" "$proto" $(call_flags "$call")
      if [ "$call" = unary ]; then
        run_min "$shape" "$transport" min_proto "$proto"
        run_min "$shape" "$transport" min_raw "$raw"
      fi
      if [ -n "$nc" ]; then
        # shellcheck disable=SC2046
        run_bench "$shape" "$label" server_no_compute "$nc" "$proto" $(call_flags "$call")
      else
        note_na "$shape" "$label" server_no_compute "$nc_fail"
      fi
    done
  done
  stop "$nc_pid"
  if [ "$KERNELS" = 1 ]; then
    start server_k_$transport "$GDN_SERVER" "${server_flags[@]}" --listen="$(listen_for "$transport" server_k)"
    k=$ADDR; k_fail=$FAIL; k_pid=$LAST_PID
    for shape in $SHAPES; do
      for call in $CALLS; do
        label=$(call_label "$transport" "$call")
        # shellcheck disable=SC2046
        if [ -n "$k" ]; then run_bench "$shape" "$label" server_kernels "$k" "$proto" $(call_flags "$call")
        else note_na "$shape" "$label" server_kernels "$k_fail"; fi
      done
    done
    stop "$k_pid"
  fi
done

if [ "$BEFORE" = 1 ]; then
  # Before: every end at gRPC's default window, frame and read sizes (TCP).
  start echo_proto_before "$GDN_ECHO" --mode=proto --layers="$LAYERS" --default_transport --listen=127.0.0.1:0
  proto=$ADDR
  start echo_raw_before "$GDN_ECHO" --mode=raw --layers="$LAYERS" --default_transport --listen=127.0.0.1:0
  raw=$ADDR
  for shape in $SHAPES; do
    run_bench "$shape" before echo_raw "$raw" "$proto" --default_transport
    run_min "$shape" before min_proto "$proto" --default_transport
    run_min "$shape" before min_raw "$raw" --default_transport
  done
fi

if [ "$CLIENT_COST" = 1 ]; then
  # The judged client cost: the two clients in alternating turns, one echo.
  for shape in $SHAPES; do
    case $shape in decode1) n=1 ;; decode32) n=32 ;; decode256) n=256 ;; *) continue ;; esac
    say "client_cost.sh $shape"
    echo "SESSIONS=$n ROUNDS=$CC_ROUNDS ARM_S=$CC_S bench/request_path/client_cost.sh $OUT/client_cost_$shape" >> "$COMMANDS"
    GDN_ECHO=$GDN_ECHO GDN_BENCH=$GDN_BENCH GDN_MIN_CLIENT=$GDN_MIN_CLIENT SESSIONS=$n \
      ROUNDS=$CC_ROUNDS ARM_S=$CC_S bash bench/request_path/client_cost.sh "$OUT/client_cost_$shape" \
      >> "$LOG" 2>&1 \
      && printf '%s\ttcp\tclient_cost\tcost\t%s\n' "$shape" "$OUT/client_cost_$shape/client_cost.json" >> "$MANIFEST"
  done
fi

{
  echo "commit $(git rev-parse HEAD 2>/dev/null || cat .bundle/COMMIT 2>/dev/null || echo unknown)"
  [ -n "$(git status --porcelain 2>/dev/null | head -1)" ] && echo "working tree had uncommitted changes"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host $(hostname) $(nproc) cores"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^/gpu /'
  echo "backend $BACKEND layers $LAYERS arm_s $ARM_S prefill_s $PREFILL_S turns $TURNS calls $CALLS"
} > "$OUT/meta.txt"
python3 bench/request_path/summarize.py "$OUT" | tee -a "$LOG"
say "done: $OUT/results.md"
