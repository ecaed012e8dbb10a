#!/usr/bin/env bash
# One device visit, <= ~4 minutes: client settings of the Python client
# (gdn_serve) against the same servers. One gdn-server with kernels and
# one with --diagnostic_no_compute (NO_COMPUTE=0 leaves it out);
# bench/python/client_latency.py per arm (PY_ARMS: flag sets separated by
# ';', e.g. ";--max_part_bytes=1150000 --connections=4") x server, ROUNDS
# times (arms in the same order each round), CASES (client_latency --cases)
# with numpy inputs, PY_SECONDS per case. TAG prefixes this run's files (a
# visit may run the script more than once: CASES with arms of their own).
# Needs .whl (python_visit.sh prepare) and .bundle (bundle.sh gdn-server).
# Writes under $OUT: python_arms.log (every run's table, appended) and
# ${TAG}python_arms.tar.gz (every run's JSON, the servers' logs).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/python_arms.log
t0=$(date +%s)
say() { echo "== $* ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG"; }

. scripts/device/unpack_bundle.sh  # BUNDLE, B, LD_LIBRARY_PATH
. scripts/device/unpack_wheels.sh || { echo "missing wheels" | tee -a "$LOG"; exit 1; }
say "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat .bundle/COMMIT
  lscpu | grep -E "Model name|^CPU\(s\)"; python3 -c "import grpc, gdn_serve; print('grpcio', grpc.__version__)"; } 2>&1 | tee -a "$LOG"

start() {  # name flags...: ADDR of a started gdn-server
  local name=$1; shift
  "$B/gdn-server" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 "$@" > "/tmp/$name.out" 2> "/tmp/$name.err" &
  for _ in $(seq 150); do grep -q listening "/tmp/$name.out" 2>/dev/null && break; sleep 0.2; done
  ADDR=$(sed -nE 's/.*grpc=([^ ]+).*/\1/p' "/tmp/$name.out")
}
servers=()
start kernels --backend=cuda; servers+=("kernels $ADDR")
if [ "${NO_COMPUTE:-1}" = 1 ]; then
  start no_compute --backend=cuda --diagnostic_no_compute; servers+=("no_compute $ADDR")
fi
say "servers: ${servers[*]}; CASES=${CASES:-decode:256x1,decode:32x1}"

IFS=';' read -r -a arms <<< "${PY_ARMS:-}"
[ ${#arms[@]} -gt 0 ] || arms=("")
mkdir -p /tmp/python_arms
for round in $(seq "${ROUNDS:-1}"); do
  for i in "${!arms[@]}"; do
    for server in "${servers[@]}"; do
      read -r sname saddr <<< "$server"
      say "round $round $sname arm $i: ${arms[$i]:-(defaults)}"
      # shellcheck disable=SC2086  # flag lists split on purpose
      timeout 120 python3 bench/python/client_latency.py --target "$saddr" \
        --cases "${CASES:-decode:256x1,decode:32x1}" --inputs numpy --warmup 10 \
        --seconds "${PY_SECONDS:-2}" --json_out "/tmp/python_arms/${TAG:-}r${round}_arm${i}_$sname.json" \
        ${arms[$i]} 2>&1 | grep "^| [dp]" | tee -a "$LOG"
    done
  done
done
pkill -TERM -f "bin/gdn-server"
tar -czf "$OUT/${TAG:-}python_arms.tar.gz" -C /tmp python_arms kernels.out kernels.err no_compute.out \
  no_compute.err 2>/dev/null
say "done"
