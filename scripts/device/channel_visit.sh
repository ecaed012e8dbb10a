#!/usr/bin/env bash
# One device visit for the same-host Forward channel (issues 16 / 18), the
# GPU tests of the session's other work, and the transformers speed check.
#
#   here:   bash scripts/device/channel_visit.sh prepare   wheels into .whl/ (needs PyPI)
#           BUILD=build bash scripts/device/bundle.sh gdn-server gdn-bench <GPU tests...>
#   device: bash scripts/device/channel_visit.sh           carry .bundle and .whl
#
#  1. GPU tests: every *_test in the bundle (gtest summary lines); then
#     decode_bench --quick (when bundled) and a speculative-draft call (T=4,
#     all accepted) against a plain 4-token decode call at 32 sessions;
#  2. compute-sanitizer memcheck of gdn-server driven by gdn-bench through
#     the channel (inline, shm and CUDA IPC tensors) and the Forward RPC;
#  3. bench/regions/run.sh: one Forward call per arm (TCP, Unix, channel,
#     shm, shm + channel, CUDA IPC, CUDA IPC + channel), decode 1 / 32 / 256
#     x 1 and prefill 1 x 4096, 4 layers; then the channel arms again with
#     --channel_spin_us=0 (the server's channel thread sleeps between calls);
#  4. the Python client's per-call latency through the channel and the RPC
#     (bench/python/client_latency.py, cuda server);
#  5. the Python CUDA-region check (client/python/tests/cuda_region_check.py:
#     bitwise CUDA IPC vs inline, error cases, use_remote_gdn(regions="cuda"));
#  6. bench/python/transformers_speed.py: a small Qwen3-Next (6 GDN layers,
#     Qwen3-Next's GDN shape, bf16) natively with FLA and remote (RPC inline,
#     RPC + CUDA regions, channel + CUDA regions), every arm's logits against
#     the fp32 model's, and a cProfile of 4 decode steps per arm (step "tf");
#  7. bench/python/layer_precision.py: one GDN layer of that model, torch /
#     FLA / server against the float64 oracle (step "precision");
#  8. bench/python/state_dtype_logits.py: the fp32 model with remote GDN on
#     four servers (fp32 / bf16 / int8 / fp8 states), logits over 256 decode
#     steps against the fp32-state server's (step "logits", issue 19);
#  9. bench/prefix_reuse/run.sh: TTFO with a warm / cold shared prefix
#     against prefilling it, 36 layers (step "prefix");
# 10. decode 256 x 1 through the channel with CUDA IPC tensors, split by the
#     server's own metrics (request, queue, kernel), per state dtype and
#     --diagnostic_no_compute (step "d256"; D256_ARMS, default "fp32 bf16
#     no_compute").
# BACKEND=cpu runs steps 3-10 here against cpu servers (a dry run of the
# script; steps 6 and 8 then use the tiny model).
# Writes under $OUT: channel_visit.log, regions.md, regions_spin0.md,
# state_dtype_logits.json, prefix_reuse.md, results.tar.gz.
set -u
cd "$(dirname "$0")/../.."
root=$PWD

# Steps to run (STEPS="tests bench python check tf precision logits prefix d256", all by default).
STEPS=${STEPS:-"tests bench python check tf precision logits prefix d256"}
step() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }

if [ "${1:-}" = "prepare" ]; then
  set -e
  bash scripts/device/python_visit.sh prepare
  python3 -m pip download -q --no-deps -d .whl flash-linear-attention fla-core
  ls -la .whl
  exit 0
fi

OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/channel_visit.log
WORK=/tmp/channel_visit
rm -rf "$WORK" && mkdir -p "$WORK"
t0=$(date +%s)
say() { echo "== $* ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG"; }
. scripts/device/unpack_bundle.sh  # BUNDLE, B, LD_LIBRARY_PATH
B=${BIN_DIR:-$B}  # a dry run here: BIN_DIR=dir with cpu gdn-server and gdn-bench
BACKEND=${BACKEND:-cuda}
# Servers an earlier visit left on a warm machine hold GPU memory.
[ "$BACKEND" = cuda ] && pkill -TERM -f "bin/gdn-server" && sleep 2
say "device ($BACKEND)"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat .bundle/COMMIT
  lscpu | grep -E "Model name|^CPU\(s\)"; } 2>&1 | tee -a "$LOG"

# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_wheels.sh  # PYDIR on PYTHONPATH
# FLA only for the transformers speed step (its native arm): the CUDA region
# check's bound is derived against transformers' fp32 torch core.
FLADIR=/tmp/gdn_fla
rm -rf "$FLADIR" && mkdir -p "$FLADIR"
for whl in .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl; do
  [ -f "$whl" ] && python3 -m zipfile -e "$whl" "$FLADIR"
done
python3 -c "import gdn_serve, grpc, torch, transformers as t; print('torch', torch.__version__,
'transformers', t.__version__, 'grpcio', grpc.__version__)" 2>&1 | tee -a "$LOG"
PYTHONPATH=$FLADIR:$PYTHONPATH python3 -c "import fla; print('fla', fla.__version__)" 2>&1 | tail -1 | tee -a "$LOG"

if [ "$BACKEND" = cuda ] && step tests; then
  for t in $(cd "$B" && ls *_test 2>/dev/null); do
    say "$t"
    timeout 120 "$B/$t" > "$WORK/$t.txt" 2>&1
    echo "rc $?" >> "$WORK/$t.txt"
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|Failure|^rc " "$WORK/$t.txt" | head -20 | tee -a "$LOG"
  done

  SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  say "compute-sanitizer memcheck: gdn-server under channel and RPC calls"
  sock=/tmp/gdn_san.sock; rm -f $sock
  "$SANITIZER" --tool memcheck --error-exitcode 9 $B/gdn-server --backend=cuda --layers=2 \
    --metrics_listen=127.0.0.1:0 --listen=unix:$sock > "$WORK/san_server.out" 2> "$WORK/san_server.err" &
  spid=$!
  for _ in $(seq 600); do grep -q listening "$WORK/san_server.out" 2>/dev/null && break; sleep 0.1; done
  for arm in "unary channel" "shm channel" "cuda_ipc channel" "cuda_ipc grpc"; do
    set -- $arm
    timeout 60 $B/gdn-bench --server=unix:$sock --transport=$1 --control=$2 --layers=2 --rounds=1 \
      --progress=false --sessions=8 --sessions_per_call=8 --prefill_tokens=100 --decode_steps=3 \
      > "$WORK/san_bench_$1_$2.txt" 2>&1
    echo "gdn-bench $arm: rc $? $(grep -E "errors|failed" "$WORK/san_bench_$1_$2.txt" | head -2 | tr '\n' ' ')" | tee -a "$LOG"
  done
  pkill -TERM -f "^$B/gdn-server --backend=cuda --layers=2"
  ( sleep 60; kill -KILL $spid 2>/dev/null ) & watchdog=$!
  wait $spid; echo "sanitizer rc $? (0: no errors; 9: errors)" | tee -a "$LOG"
  kill $watchdog 2>/dev/null
  grep -E "ERROR SUMMARY|Invalid|out of bounds" "$WORK/san_server.out" "$WORK/san_server.err" | head -5 | tee -a "$LOG"
fi

if [ "$BACKEND" = cuda ] && step tests && [ -x "$B/decode_bench" ]; then
  say "decode_bench --quick (the decode kernel after this session's kernel changes)"
  timeout 120 "$B/decode_bench" --quick --json="$WORK/decode_bench.json" --md="$WORK/decode_bench.md" \
    --commit="$(awk '{print $2}' .bundle/COMMIT)" > "$WORK/decode_bench.txt" 2>&1
  echo "rc $?" | tee -a "$LOG"
  tail -14 "$WORK/decode_bench.md" 2>/dev/null | tee -a "$LOG"
fi

if [ "$BACKEND" = cuda ] && step tests; then
  # Issue 20: a draft of 4 tokens (all accepted) against a plain 4-token
  # decode call, 32 sessions per call, arms taking turns twice.
  say "speculative drafts: draft T=4 vs plain T=4 decode, 32 sessions"
  rm -f /tmp/spec.sock
  $B/gdn-server --backend=cuda --layers=4 --metrics_listen=127.0.0.1:0 --listen=unix:/tmp/spec.sock \
    > "$WORK/spec_server.out" 2> "$WORK/spec_server.err" &
  spec_pid=$!
  for _ in $(seq 150); do grep -q listening "$WORK/spec_server.out" 2>/dev/null && break; sleep 0.2; done
  for round in 1 2; do
    for arm in "--decode_tokens=4" "--draft_tokens=4 --acceptance_rate=1"; do
      name=$(echo "$arm" | cut -d' ' -f1 | tr -d '-' | tr '=' '_')_$round
      # shellcheck disable=SC2086
      timeout 40 $B/gdn-bench --server=unix:/tmp/spec.sock --layers=4 --sessions=32 \
        --sessions_per_call=32 --prefill_tokens=0 --decode_steps=1000000 --warmup_s=0.5 \
        --duration_s=3 --progress=false $arm --json_out="$WORK/spec_$name.json" \
        > "$WORK/spec_$name.txt" 2>&1
      echo "$arm round $round: rc $? $(grep -iE '^ *decode' "$WORK/spec_$name.txt" | head -1)" | tee -a "$LOG"
    done
  done
  kill -TERM $spec_pid 2>/dev/null; wait $spec_pid 2>/dev/null
fi

if step bench; then
say "bench/regions/run.sh ($BACKEND)"
BACKEND=$BACKEND BIN=$B ARM_S=${ARM_S:-1.5} PREFILL_S=${PREFILL_S:-2} \
  SHAPES=${SHAPES:-"decode1 decode32 decode256 prefill4096"} timeout ${BENCH_S:-240} \
  bash bench/regions/run.sh "$WORK/regions" > "$WORK/regions.log" 2>&1
echo "rc $?" | tee -a "$LOG"
grep "failed" "$WORK/regions.log" | head -5 | tee -a "$LOG"
cp "$WORK/regions/results.md" "$OUT/regions.md" 2>/dev/null && tee -a "$LOG" < "$OUT/regions.md"

say "channel arms, server polling off (--channel_spin_us=0)"
arms="channel shm_channel"
[ "$BACKEND" = cuda ] && arms="$arms cuda_ipc_channel"
BACKEND=$BACKEND BIN=$B ARM_S=${ARM_S:-1.5} SHAPES="decode1 decode32" ARMS="unix $arms" ARMS_SET=1 \
  SERVER_FLAGS=--channel_spin_us=0 timeout 90 \
  bash bench/regions/run.sh "$WORK/regions_spin0" > "$WORK/regions_spin0.log" 2>&1
cp "$WORK/regions_spin0/results.md" "$OUT/regions_spin0.md" 2>/dev/null && tee -a "$LOG" < "$OUT/regions_spin0.md"
fi

server_pid=""
start_server() {  # name, then flags; sets $grpc (a unix socket: same host)
  local name=$1; shift
  stop_server
  rm -f "/tmp/$name.sock"
  # A budget of its own: a default cuda server takes 60% of free memory.
  $B/gdn-server --backend="$BACKEND" --metrics_listen=127.0.0.1:0 --listen="unix:/tmp/$name.sock" \
    --device_state_budget=8GiB "$@" \
    > "$WORK/$name.out" 2> "$WORK/$name.err" &
  server_pid=$!
  for _ in $(seq 150); do grep -q "listening" "$WORK/$name.out" 2>/dev/null && break; sleep 0.2; done
  grpc="unix:/tmp/$name.sock"
  grep -q listening "$WORK/$name.out" || { tail -5 "$WORK/$name.err" | tee -a "$LOG"; return 1; }
}
stop_server() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  server_pid=""
}
trap stop_server EXIT

inputs=numpy
[ "$BACKEND" = cuda ] && inputs=numpy,torch-cuda
if step python && start_server py_default; then
  for mode in "" --channel; do
    say "python latency ${mode:-(rpc)}"
    timeout 90 python3 bench/python/client_latency.py --target "$grpc" --calls 2000 \
      --prefill_calls 50 --warmup 20 --seconds 2 --inputs $inputs --cases decode:1x1,decode:32x1,prefill:1x2048 \
      --json_out "$WORK/latency${mode:+_channel}.json" $mode 2>&1 | tail -7 | tee -a "$LOG"
  done
fi

if [ "$BACKEND" = cuda ] && step check && start_server py_small --layers=3 --qk_heads=2 --v_heads=4 \
     --head_dim_k=64 --head_dim_v=64 --activation_dtype=fp32; then
  say "python cuda regions check (bitwise, errors, use_remote_gdn regions=cuda)"
  timeout 120 python3 client/python/tests/cuda_region_check.py --target "$grpc" \
    --json_out "$WORK/cuda_regions.json" --transformers 2>&1 | grep -v "^\[transformers\]" | \
    grep -vE '^\s' | tail -25 | tee -a "$LOG"
fi

step tf && say "transformers speed (native vs remote)"
if ! step tf; then
  ok=0
elif [ "$BACKEND" = cuda ]; then
  ok=1; start_server tf --layers=6 --activation_dtype=bf16 || ok=0
  # TF_EXTRA: more transformers_speed.py flags (e.g. "--trace_steps 4 --rounds 3").
  # shellcheck disable=SC2206  # split on purpose
  args=(--device cuda --profile_steps 4 --arms "${TF_ARMS:-grpc_inline,grpc_regions,channel_regions}"
        ${TF_EXTRA:-})
else
  ok=1; start_server tf --layers=6 --qk_heads=2 --v_heads=4 --head_dim_k=64 --head_dim_v=64 \
    --activation_dtype=fp32 || ok=0
  args=(--device cpu --small --prompt 32 --steps 4 --repeats 1 --arms grpc_inline,channel_inline \
        --profile_steps 2)
fi
[ $ok = 1 ] && PYTHONPATH=$FLADIR:$PYTHONPATH timeout ${TF_S:-200} python3 bench/python/transformers_speed.py --target "$grpc" "${args[@]}" \
  --json_out "$WORK/transformers_speed.json" 2>&1 | grep -v "^\[transformers\]" | tail -8 | tee -a "$LOG"

if step precision; then
  say "one GDN layer against the float64 oracle"
  if [ "$BACKEND" = cuda ]; then
    args=(--device cuda)
    [ -n "$server_pid" ] || start_server tf --layers=6 --activation_dtype=bf16
  else  # the tf step's small fp32 server
    args=(--device cpu --small --batch 2 --prompt 64)
  fi
  PYTHONPATH=$FLADIR:$PYTHONPATH timeout 120 python3 bench/python/layer_precision.py --target "$grpc" \
    "${args[@]}" --json_out "$WORK/layer_precision.json" 2>&1 | grep -v "^\[transformers\]" | \
    tail -6 | tee -a "$LOG"
fi
stop_server

if step logits; then
  # Issue 19: the model with remote GDN per state dtype, logits against the
  # fp32-state server's over STEPS_LOGITS decode steps (one server each).
  say "state dtypes: model logits against fp32 state"
  if [ "$BACKEND" = cuda ]; then
    shape=(--layers=6 --activation_dtype=fp32); args=(--device cuda)
  else
    shape=(--layers=6 --qk_heads=2 --v_heads=4 --head_dim_k=64 --head_dim_v=64 --activation_dtype=fp32)
    args=(--device cpu --small --prompt 16)
  fi
  targets=""; pids=""
  for d in fp32 bf16 int8 fp8; do
    rm -f "/tmp/sd_$d.sock"
    $B/gdn-server --backend="$BACKEND" --metrics_listen=127.0.0.1:0 --listen="unix:/tmp/sd_$d.sock" \
      --device_state_budget=4GiB --state_dtype=$d "${shape[@]}" > "$WORK/sd_$d.out" 2> "$WORK/sd_$d.err" &
    pids="$pids $!"; targets="$targets${targets:+,}$d=unix:/tmp/sd_$d.sock"
  done
  for d in fp32 bf16 int8 fp8; do
    for _ in $(seq 150); do grep -q listening "$WORK/sd_$d.out" 2>/dev/null && break; sleep 0.2; done
  done
  timeout ${LOGITS_S:-150} python3 bench/python/state_dtype_logits.py --targets "$targets" "${args[@]}" \
    --steps ${STEPS_LOGITS:-256} --json_out "$WORK/state_dtype_logits.json" 2>&1 | \
    grep -v "^\[transformers\]" | tail -6 | tee -a "$LOG"
  cp "$WORK/state_dtype_logits.json" "$OUT/" 2>/dev/null
  for p in $pids; do kill -TERM $p 2>/dev/null; done; wait $pids 2>/dev/null
fi

if step prefix; then
  say "prefix reuse: TTFO warm / cold prefix vs prefilling it"
  if [ "$BACKEND" = cuda ]; then
    BIN_DIR=$B BACKEND=cuda LAYERS=36 SERVER_FLAGS=--device_state_budget=24GiB timeout 150 \
      bash bench/prefix_reuse/run.sh "$WORK/prefix" > "$WORK/prefix.log" 2>&1
  else
    BIN_DIR=$B BACKEND=cpu LAYERS=4 P=256 X=32 D=2 F=4 DURATION_S=3 WARMUP_S=1 timeout 150 \
      bash bench/prefix_reuse/run.sh "$WORK/prefix" > "$WORK/prefix.log" 2>&1
  fi
  echo "rc $?" | tee -a "$LOG"
  cp "$WORK/prefix/summary.md" "$OUT/prefix_reuse.md" 2>/dev/null && tee -a "$LOG" < "$OUT/prefix_reuse.md"
fi

if step d256; then
  say "decode 256 x 1 through the channel, split by the server's metrics"
  transport=cuda_ipc
  [ "$BACKEND" = cuda ] || transport=shm
  for arm in ${D256_ARMS:-fp32 bf16 no_compute}; do  # a state dtype, or no_compute
    flags=(--layers=4 --metrics_listen=127.0.0.1:19464)
    if [ $arm = no_compute ]; then flags+=(--diagnostic_no_compute); else flags+=(--state_dtype=$arm); fi
    start_server d256 "${flags[@]}" || continue
    timeout 30 $B/gdn-bench --server="$grpc" --transport=$transport --control=channel --layers=4 \
      --sessions=256 --sessions_per_call=256 --prefill_tokens=0 --decode_steps=1000000 \
      --duration_s=2 --warmup_s=0.5 --progress=false --json_out="$WORK/d256_$arm.json" \
      > "$WORK/d256_$arm.txt" 2>&1
    if [ "$arm" = fp32 ] && [ "${PERF_D256:-1}" = 1 ] && command -v perf > /dev/null; then
      # Where the server's host time goes (decode 256 x 1 is host-bound past its kernel).
      timeout 20 $B/gdn-bench --server="$grpc" --transport=$transport --control=channel --layers=4 \
        --sessions=256 --sessions_per_call=256 --prefill_tokens=0 --decode_steps=1000000 \
        --duration_s=4 --warmup_s=0.5 --progress=false > /dev/null 2>&1 &
      bench_pid=$!
      sleep 1
      timeout 10 perf record -F 4000 -g -p "$server_pid" -o "$WORK/d256.perf" -- sleep 2 > /dev/null 2>&1
      wait $bench_pid
      perf report -i "$WORK/d256.perf" --no-children -g none --sort dso,symbol 2>/dev/null | \
        grep -E "^ +[0-9]" | head -45 | cut -c1-150 > "$WORK/d256_perf.txt"
      echo "d256 perf (server, top symbols):" | tee -a "$LOG"; head -30 "$WORK/d256_perf.txt" | tee -a "$LOG"
    fi
    python3 - "$arm" "$WORK/d256_$arm.json" <<'PYEOF' 2>&1 | tee -a "$LOG"
import json, re, sys, urllib.request
arm, path = sys.argv[1:]
text = urllib.request.urlopen("http://127.0.0.1:19464/metrics", timeout=5).read().decode()
sums = {}
for line in text.splitlines():
    m = re.match(r'(gdn_(?:request|queue|kernel)_duration_seconds|gdn_batch_size)_(sum|count)\{?([^}]*)\}? (\S+)', line)
    if m:
        key = (m.group(1), m.group(3))
        sums.setdefault(key, {})[m.group(2)] = float(m.group(4))
parts = []
for (name, labels), v in sorted(sums.items()):
    if v.get("count"):
        scale = 1 if name == "gdn_batch_size" else 1e6
        parts.append("%s{%s} %.1f" % (name.replace("gdn_", "").replace("_seconds", ""), labels,
                                       scale * v["sum"] / v["count"]))
d = json.load(open(path))["latency_ms"]["decode"]
print("d256 %s: client P50 %.0f us P99 %.0f us (%d calls); server means (us; batch: sequences): %s"
      % (arm, 1e3 * d["p50"], 1e3 * d["p99"], d["count"], "; ".join(parts)))
PYEOF
  done
fi
stop_server

tar -czf "$OUT/results.tar.gz" -C /tmp channel_visit 2>/dev/null
say "done"
