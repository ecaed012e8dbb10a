#!/usr/bin/env bash
# One device visit for the request path (issue 16), <= ~9.5 minutes:
#  1. the GPU tests of what the new engine runs on the device (cuda streams
#     and the gather kernel, the whole server with concurrent clients against
#     the oracle, the backend), and compute-sanitizer memcheck on the first two;
#  2. bench/request_path/run.sh BACKEND=cuda: per shape (decode 1x1, 32x1,
#     256x1, prefill 1x2048) and transport (TCP, Unix socket), the echo
#     ceilings, gdn-server --diagnostic_no_compute and gdn-server with kernels
#     through gdn-bench --compare_echo, gdn-min-client, gRPC-default "before";
#  3. the SLO search (36 layers, 32 sessions per call, decode_step P99 <=
#     100 ms per output token) on the cuda server, and the decode batch time
#     at 128 sessions from its metrics;
#  4. the Python client's transformers check (python_visit.sh's first part).
# Needs .bundle and .whl from:
#   bash scripts/device/bundle.sh gdn-server gdn-bench gdn-echo gdn-min-client \
#     cuda_stream_test server_cuda_test cuda_backend_test
#   bash scripts/device/python_visit.sh prepare
# PARTS=tests,bench,pack,lone,slo,python (default all but pack and lone;
# pack: a server-flag A/B, by default --pack_threads (PACK_OFF_FLAGS /
# PACK_ON_FLAGS, PACK_SHAPES, PACK_TRANSPORTS, PACK_ROUNDS, PACK_S); lone:
# decode 1 x 1 kernels against no-compute with the server's metrics;
# LONE_ARMS picks the arms, LONE_SPC the sessions per call, e.g. "1 32 256";
# LONE_S seconds per run, LONE_ROUNDS rounds (3), LONE_BENCH_FLAGS more
# gdn-bench flags, e.g. --transport=stream). CALLS="unary stream" is passed
# to run.sh (bench: stream arms beside the unary ones). TESTS: the GPU tests to run (default the three above),
# TEST_TIMEOUT seconds each (90). Writes under $OUT (few files).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/request_path_visit.log
t0=$(date +%s)
say() { echo "== $* ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG"; }
PARTS=${PARTS:-tests,bench,slo,python}
want() { [[ ",$PARTS," == *",$1,"* ]]; }

. scripts/device/unpack_bundle.sh  # BUNDLE, B, LD_LIBRARY_PATH

say "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat .bundle/COMMIT
  lscpu | grep -E "Model name|^CPU\(s\)"; } 2>&1 | tee -a "$LOG"

if want tests; then
  for t in ${TESTS:-cuda_stream_test server_cuda_test cuda_backend_test}; do
    say "$t"
    timeout ${TEST_TIMEOUT:-90} $B/$t 2>&1 | grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|OK \]|Failure|error|SEED" | tee -a "$LOG"
    echo "rc ${PIPESTATUS[0]}" | tee -a "$LOG"
  done
  SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for t in cuda_stream_test; do
    [ -x "$B/$t" ] || { say "compute-sanitizer memcheck $t: not in the bundle, skipped"; continue; }
    say "compute-sanitizer memcheck $t"
    timeout 100 "$SANITIZER" --tool memcheck --error-exitcode 9 $B/$t > /tmp/san_$t.log 2>&1
    echo "rc $?" | tee -a "$LOG"
    grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED) " /tmp/san_$t.log | tee -a "$LOG"
  done
fi

if want bench; then
  say "request path (bench/request_path/run.sh, cuda)"
  BACKEND=cuda BIN=$B ARM_S=${ARM_S:-1.5} PREFILL_S=${PREFILL_S:-3} BEFORE=0 CLIENT_COST=0 \
    timeout ${BENCH_S:-200} bash bench/request_path/run.sh /tmp/request_path > /tmp/request_path.log 2>&1
  echo "rc $?" | tee -a "$LOG"
  tail -5 /tmp/request_path.log | tee -a "$LOG"
  cp /tmp/request_path/results.md "$OUT/request_path.md" 2>/dev/null
  tar -czf "$OUT/request_path.tar.gz" -C /tmp request_path request_path.log 2>/dev/null
  cat "$OUT/request_path.md" 2>/dev/null | tee -a "$LOG"
fi

if want pack; then
  # A server-flag A/B (by default the copy workers, --pack_threads,
  # server/engine/work_sharing_pool.h): arm "off" runs gdn-server with
  # PACK_OFF_FLAGS (--pack_threads=0), arm "on" with PACK_ON_FLAGS (none);
  # PACK_SHAPES (the shapes whose requests are >= 1 MiB), PACK_TRANSPORTS
  # (tcp); runs taking turns, each run's ratios to its own proto echo.
  for round in $(seq "${PACK_ROUNDS:-2}"); do
    for arm in off on; do
      extra=${PACK_ON_FLAGS:-}; [ $arm = off ] && extra=${PACK_OFF_FLAGS:---pack_threads=0}
      say "pack A/B arm $arm ($extra), round $round"
      SERVER_EXTRA="$extra" BACKEND=cuda BIN=$B ARM_S=1.5 PREFILL_S=3 BEFORE=0 CLIENT_COST=0 \
        SHAPES="${PACK_SHAPES:-decode256 prefill2048}" TRANSPORTS="${PACK_TRANSPORTS:-tcp}" \
        timeout ${PACK_S:-80} bash bench/request_path/run.sh /tmp/pack_${arm}_$round > /tmp/pack_${arm}_$round.log 2>&1
      echo "rc $?" | tee -a "$LOG"
      grep -E "^\| (decode|prefill)" /tmp/pack_${arm}_$round/results.md | tee -a "$LOG"
    done
  done
  tar -czf "$OUT/pack_ab.tar.gz" -C /tmp $(cd /tmp && ls -d pack_*) 2>/dev/null
fi

if want lone; then
  # A lone decode 1 x 1 call with kernels against the no-compute server
  # (fresh servers, taking turns, TCP), and with kernels through the
  # same-host channel (inline tensors, no socket), with the server's own
  # view of each run (gdn-bench --metrics: queue time, and "kernel" time from
  # the batch's launch to its completion being seen): where the kernels
  # arm's extra time over no-compute goes.
  for round in $(seq "${LONE_ROUNDS:-3}"); do
    for spc in ${LONE_SPC:-1}; do
    for arm in ${LONE_ARMS:-kernels channel no_compute}; do
      # An arm: kernels | channel | no_compute, "_poll" added:
      # --engine_poll_us=1000, "_nopoll": 0 (else the server's default).
      flags=""; listen=127.0.0.1:0; control=grpc
      case $arm in no_compute*) flags="--diagnostic_no_compute" ;; esac
      case $arm in *_poll) flags="$flags --engine_poll_us=1000" ;; *_nopoll) flags="$flags --engine_poll_us=0" ;; esac
      case $arm in channel*) rm -f /tmp/lone.sock; listen=unix:/tmp/lone.sock; control=channel ;; esac
      $B/gdn-server --backend=cuda --layers=4 --listen=$listen --metrics_listen=127.0.0.1:0 \
        $flags > /tmp/lone_server.out 2>/tmp/lone_server.err &
      spid=$!
      for _ in $(seq 150); do grep -q listening /tmp/lone_server.out 2>/dev/null && break; sleep 0.2; done
      grpc=$(sed -nE 's/.*grpc=([^ ]+).*/\1/p' /tmp/lone_server.out)
      metrics=$(sed -nE 's/.*metrics=([^ ]+).*/\1/p' /tmp/lone_server.out)
      say "lone decode $spc x 1, $arm, round $round"
      run=lone_${arm}_${spc}_$round
      timeout 30 $B/gdn-bench --server="$grpc" --control=$control --metrics="$metrics" --layers=4 \
        --sessions=$spc --sessions_per_call=$spc --prefill_tokens=0 --decode_steps=1000000 \
        --duration_s=${LONE_S:-2} --warmup_s=0.5 --progress=false --json_out=/tmp/$run.json \
        ${LONE_BENCH_FLAGS:-} > /tmp/$run.txt 2>&1
      grep -E "^ +decode +[0-9]|queue|kernel calls" /tmp/$run.txt | head -6 | tee -a "$LOG"
      kill -TERM $spid 2>/dev/null; wait $spid 2>/dev/null
    done
    done
  done
  tar -czf "$OUT/lone.tar.gz" -C /tmp $(cd /tmp && ls lone_*) 2>/dev/null
fi

if want slo; then
  say "SLO search: decode_step (one token over 36 layers) P99 <= 100 ms, 32 sessions per call"
  $B/gdn-server --backend=cuda --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 >/tmp/slo_server.out 2>/tmp/slo_server.err &
  spid=$!
  for _ in $(seq 150); do grep -q listening /tmp/slo_server.out 2>/dev/null && break; sleep 0.2; done
  grpc=$(sed -nE 's/.*grpc=([^ ]+).*/\1/p' /tmp/slo_server.out)
  metrics=$(sed -nE 's/.*metrics=([^ ]+).*/\1/p' /tmp/slo_server.out)
  WORK=(--sessions_per_call=32 --prefill_tokens=64 --decode_steps=64 --progress=false)
  timeout 100 $B/gdn-bench --server="$grpc" "${WORK[@]}" --slo_p99_ms=100 --slo_phase=decode_step \
    --slo_load=concurrency:96:1024 --slo_max_probes=6 --warmup_s=1 --duration_s=5 \
    --json_out="$OUT/slo.json" 2>&1 | tail -14 | tee -a "$LOG"
  say "128 sessions, 36 layers: decode batch time from the server's metrics"
  python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('http://$metrics/metrics').read().decode())" \
    > /tmp/metrics_before.txt 2>/dev/null
  timeout 40 $B/gdn-bench --server="$grpc" --metrics="$metrics" "${WORK[@]}" --sessions=128 \
    --warmup_s=2 --duration_s=8 --json_out="$OUT/decode128.json" 2>&1 | tail -30 | tee -a "$LOG"
  kill -TERM $spid 2>/dev/null; wait $spid 2>/dev/null
fi

if want python; then
  say "python: transformers check"
  PY_LATENCY=0 OUT=/tmp/py timeout ${PY_S:-120} bash scripts/device/python_visit.sh > /tmp/py.log 2>&1
  echo "rc $?" | tee -a "$LOG"
  grep -E "TRANSFORMERS CHECK|max_|passed|Error|error" /tmp/py.log | head -20 | tee -a "$LOG"
  cp /tmp/py/transformers_check.json "$OUT/" 2>/dev/null
fi
say "done"
