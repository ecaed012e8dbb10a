#!/usr/bin/env bash
# A / B of the engine's lane polling (--engine_spin_us) on one layer call
# through the same-host channel with CUDA IPC tensors (shm on a cpu dry run):
# decode 256 x 1 and prefill 1 x 4096, 4 layers, servers taking turns
# (50 us, the old fixed poll, then the default), ROUNDS times. Then the
# chunked prefill per state dtype, one row at a time (PREFILL_ROWS).
#   device: bash scripts/device/engine_spin_ab.sh      carry .bundle
#   here:   BIN_DIR=build-py/... BACKEND=cpu bash scripts/device/engine_spin_ab.sh
# Writes under $OUT: engine_spin_ab.md (P50 / P99 per arm and round),
# prefill_state_*.md.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
. scripts/device/unpack_bundle.sh
B=${BIN_DIR:-$B}
BACKEND=${BACKEND:-cuda}
transport=cuda_ipc
[ "$BACKEND" = cuda ] || transport=shm
[ "$BACKEND" = cuda ] && pkill -TERM -f "bin/gdn-server" && sleep 2
md=$OUT/engine_spin_ab.md
echo "| round | --engine_spin_us | shape | P50 us | P99 us | calls |" > "$md"
echo "| --- | --- | --- | --- | --- | --- |" >> "$md"
for round in $(seq "${ROUNDS:-2}"); do
  for spin in 50 -1; do
    sock=/tmp/gdn_ab_$spin.sock
    rm -f "$sock"
    "$B/gdn-server" --backend="$BACKEND" --layers=4 --device_state_budget=8GiB \
      --engine_spin_us=$spin --listen="unix:$sock" --metrics_listen=127.0.0.1:0 \
      > /tmp/gdn_ab_server.log 2>&1 &
    server=$!
    for _ in $(seq 150); do grep -q listening /tmp/gdn_ab_server.log && break; sleep 0.2; done
    for shape in decode256 prefill4096; do
      case $shape in
        decode256) args=(--sessions=256 --sessions_per_call=256 --prefill_tokens=0 --decode_steps=1000000) ;;
        prefill4096) args=(--sessions=1 --sessions_per_call=1 --prefill_tokens=4096 --decode_steps=0) ;;
      esac
      json=/tmp/gdn_ab_${round}_${spin}_$shape.json
      timeout 30 "$B/gdn-bench" --server="unix:$sock" --transport=$transport --control=channel \
        --layers=4 "${args[@]}" --duration_s="${ARM_S:-2}" --warmup_s=0.5 --progress=false \
        --json_out="$json" > /dev/null 2>&1
      python3 - "$json" "$round" "$spin" "$shape" >> "$md" <<'EOF'
import json, sys
path, round_, spin, shape = sys.argv[1:]
try:
    lat = json.load(open(path))["latency_ms"]
    d = lat["decode"] if shape.startswith("decode") else lat["prefill"]
    print("| %s | %s | %s | %.0f | %.0f | %d |" % (round_, spin, shape, 1e3 * d["p50"],
                                                   1e3 * d["p99"], d["count"]))
except Exception as e:  # noqa: BLE001
    print("| %s | %s | %s | failed: %s | | |" % (round_, spin, shape, e))
EOF
    done
    kill -TERM $server; wait $server 2>/dev/null
  done
done
cat "$md"
if [ "$BACKEND" = cuda ]; then
  for row in ${PREFILL_ROWS:-16/32/8/1024 16/32/1/8192 16/32/4/8192}; do
    name=$(echo "$row" | tr / _)
    timeout "${PREFILL_S:-60}" "$B/prefill_state_bench" --rows="$row" --calls=10 \
      --md="$OUT/prefill_state_$name.md" > "/tmp/prefill_state_$name.log" 2>&1
    echo "prefill_state_bench $row rc $?"
    cat "$OUT/prefill_state_$name.md" 2>/dev/null || tail -3 "/tmp/prefill_state_$name.log"
  done
fi
