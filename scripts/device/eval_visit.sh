#!/usr/bin/env bash
# One device visit (<= ~9.5 minutes): the gdn-eval H200 report
# (bench/eval/run_device.sh: full grid, GPU baselines, plots) plus short
# re-checks of what changed since the kernels visit (PDL chain test, chunked
# prefill test) and the server's decode path
# (gdn-bench at 32 and 128 sessions, 32 per call, 36 layers). Everything goes
# into $OUT/eval.tar.gz plus report.md (the tool brings back at most 8 files).
# Bundle here with:
#   BUILD=build-decode bash scripts/device/bundle.sh gdn-eval gdn_capi \
#     recurrent_pdl_test chunked_prefill_test gdn-server gdn-bench
# then run carry [".bundle", ".whl"] command "bash scripts/device/eval_visit.sh".
set -u
cd "$(dirname "$0")/../.."
OUT_FINAL=${OUT:-/tmp/gdn_out}
WORK=/tmp/gdn_eval_visit
mkdir -p "$WORK" "$OUT_FINAL"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }

BUNDLE=$PWD/.bundle
if [ -f .bundle/pack.tar.xz ]; then  # bundle.sh packed bin/ and lib/
  BUNDLE=/tmp/gdn_bundle
  mkdir -p "$BUNDLE"
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    .bundle/pack.tar.xz "$BUNDLE"
fi
B=$BUNDLE/bin
export LD_LIBRARY_PATH=$BUNDLE/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# 1. Re-checks (seconds).
for t in recurrent_pdl_test chunked_prefill_test; do
  timeout 90 "$B/$t" > "$WORK/$t.txt" 2>&1
  echo "== $t rc=$? at $(elapsed)s"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" "$WORK/$t.txt" | head -10
done

# 2. Server decode under gdn-bench.
start_server() {  # name, flags...; sets ${name}_grpc and ${name}_metrics
  local name=$1; shift
  "$B/gdn-server" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 "$@" \
    >"$WORK/$name.out" 2>"$WORK/$name.err" &
  for _ in $(seq 150); do grep -q listening "$WORK/$name.out" 2>/dev/null && break; sleep 0.2; done
  local line; line=$(grep listening "$WORK/$name.out")
  echo "$name: $line"
  eval "${name}_grpc=$(echo "$line" | sed -E 's/.*grpc=([^ ]+).*/\1/')"
  eval "${name}_metrics=$(echo "$line" | sed -E 's/.*metrics=([^ ]+).*/\1/')"
}
WORKLOAD=(--sessions_per_call=32 --prefill_tokens=64 --decode_steps=64 --progress=false
          --sweep=concurrency:32,128 --warmup_s=2 --duration_s=6)
start_server server --backend=cuda
timeout 60 "$B/gdn-bench" --server="$server_grpc" --metrics="$server_metrics" "${WORKLOAD[@]}" \
  --json_out="$WORK/server.json" > "$WORK/server.txt" 2>&1
echo "== gdn-bench rc=$? at $(elapsed)s"
tail -8 "$WORK/server.txt"
python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('http://$server_metrics/metrics').read().decode())" \
  > "$WORK/server_metrics.txt" 2>/dev/null
kill -TERM %1 2>/dev/null; wait

# 3. gdn-eval + GPU baselines in the time left (run_device.sh's layout).
mkdir -p .bundle/eval/bin .bundle/eval/lib
cp "$B/gdn-eval" .bundle/eval/bin/
cp "$BUNDLE"/lib/* "$B/libgdn_capi.so" .bundle/eval/lib/
head -1 .bundle/COMMIT | awk '{print $2}' > .bundle/eval/COMMIT
left=$(( 540 - $(elapsed) ))
eval_s=$(( (left - 100) * 3 / 4 )); base_s=$(( (left - 100) / 4 ))
echo "== gdn-eval budget ${eval_s}s, baselines ${base_s}s"
OUT=$WORK EVAL_BUDGET_S=$eval_s BASELINE_BUDGET_S=$base_s bash bench/eval/run_device.sh 2>&1 | tail -25

cp "$WORK/report.md" "$OUT_FINAL/" 2>/dev/null  # run_device.sh packed the rest into eval.tar.gz
tar -czf "$OUT_FINAL/eval.tar.gz" -C "$WORK" .
echo "== done at $(elapsed)s"
