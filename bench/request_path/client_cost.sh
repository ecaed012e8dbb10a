#!/usr/bin/env bash
# gdn-bench's own per-call cost, shown: gdn-bench and gdn-min-client (the
# cheapest client: one request built once, bench/echo/min_client.cc) run the
# same shape against the same gdn-echo, taking turns ROUNDS times (so drift
# and neighbours weigh on both alike); prints each turn's P50 / P99 and the
# ratio of the medians of their P50s, gdn-bench / min client (target: <= 1.10),
# and of their CPU per call (each process's user + system time over its calls:
# the cost itself, which a shared machine's noise does not hide).
#
#   bench/request_path/client_cost.sh [OUT]     # OUT defaults to /tmp/client_cost
#
# Environment: MODE=raw|proto (the echo, default raw), SESSIONS=32 TOKENS=1
# (one Forward call of SESSIONS x TOKENS), ROUNDS=5, ARM_S=2, TRANSPORT=tcp|unix,
# and the binaries as in run.sh (BIN, GDN_ECHO, GDN_BENCH, GDN_MIN_CLIENT).
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${1:-/tmp/client_cost}
mkdir -p "$OUT"
MODE=${MODE:-raw}
SESSIONS=${SESSIONS:-32}
TOKENS=${TOKENS:-1}
ROUNDS=${ROUNDS:-5}
ARM_S=${ARM_S:-2}
TRANSPORT=${TRANSPORT:-tcp}
find_bin() {
  local name=$1 rel=$2
  if [ -n "${BIN:-}" ]; then echo "$BIN/$name"; return; fi
  if [ -x .bundle/bin/$name ]; then echo "$ROOT/.bundle/bin/$name"; return; fi
  for b in build-echo build; do [ -x "$b/$rel" ] && { echo "$ROOT/$b/$rel"; return; }; done
  echo "missing-$name"
}
GDN_ECHO=${GDN_ECHO:-$(find_bin gdn-echo bench/echo/gdn-echo)}
GDN_BENCH=${GDN_BENCH:-$(find_bin gdn-bench client/bench/gdn-bench)}
GDN_MIN_CLIENT=${GDN_MIN_CLIENT:-$(find_bin gdn-min-client bench/echo/gdn-min-client)}
[ -d .bundle/lib ] && export LD_LIBRARY_PATH=$ROOT/.bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

listen=127.0.0.1:0
[ "$TRANSPORT" = unix ] && listen=unix:/tmp/gdn_client_cost_$$.sock
"$GDN_ECHO" --mode="$MODE" --layers=1 --listen="$listen" > "$OUT/echo.out" 2> "$OUT/echo.err" &
echo_pid=$!
trap 'kill -TERM $echo_pid 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 100); do grep -q listening "$OUT/echo.out" 2>/dev/null && break; sleep 0.1; done
addr=$(sed -nE 's/.*grpc=([^ ]+).*/\1/p' "$OUT/echo.out")
[ -n "$addr" ] || { echo "gdn-echo did not start: $(cat "$OUT/echo.err")" >&2; exit 1; }

if [ "$TOKENS" = 1 ]; then
  workload=(--prefill_tokens=0 --decode_steps=1000000)
else
  workload=(--prefill_tokens="$TOKENS" --decode_steps=0)
fi
echo "gdn-echo --mode=$MODE at $addr; Forward $SESSIONS x $TOKENS; $ROUNDS turns of ${ARM_S}s each"
for i in $(seq "$ROUNDS"); do
  "$GDN_BENCH" --server="$addr" --sessions="$SESSIONS" --sessions_per_call="$SESSIONS" \
    "${workload[@]}" --layers=1 --warmup_s=0.3 --duration_s="$ARM_S" --progress=false \
    --json_out="$OUT/bench_$i.json" > "$OUT/bench_$i.txt" 2>&1 || { cat "$OUT/bench_$i.txt"; exit 1; }
  "$GDN_MIN_CLIENT" --server="$addr" --sessions="$SESSIONS" --tokens="$TOKENS" --calls=1000000 \
    --warmup_calls=20 --max_seconds="$ARM_S" --json_out="$OUT/min_$i.json" > "$OUT/min_$i.txt" 2>&1 \
    || { cat "$OUT/min_$i.txt"; exit 1; }
done
python3 - "$OUT" "$ROUNDS" "$TOKENS" <<'PY'
import json, statistics, sys
out, rounds, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
phase = "decode" if tokens == 1 else "prefill"
rows = []
for i in range(1, rounds + 1):
    b = json.load(open(f"{out}/bench_{i}.json"))
    m = json.load(open(f"{out}/min_{i}.json"))
    lat = b["latency_ms"][phase]
    # gdn-bench's CPU over its whole run (setup, warm-up, progress thread
    # included) per Forward call: an upper bound of its cost per call.
    calls = b["calls"]["total"] + b["warmup"]["calls"]
    bench_cpu = b["client"]["cpu_s"] * 1e6 / max(1, calls)
    rows.append((lat["p50"] * 1e3, lat["p99"] * 1e3, m["latency"]["p50_us"], m["latency"]["p99_us"],
                 bench_cpu, m["cpu_us_per_call"]))
    print("turn %d: gdn-bench p50 %8.1f p99 %8.1f us | gdn-min-client p50 %8.1f p99 %8.1f us"
          " | client CPU a call %.1f / %.1f us" % (i, *rows[-1]))
med = [statistics.median(r[k] for r in rows) for k in range(6)]
print("median: gdn-bench p50 %.1f p99 %.1f us | gdn-min-client p50 %.1f p99 %.1f us"
      " | client CPU a call %.1f / %.1f us" % tuple(med))
ratio = med[0] / med[2]
print("gdn-bench / gdn-min-client P50: %.3f (target <= 1.10: %s); P99: %.3f; CPU a call: %.3f"
      % (ratio, "ok" if ratio <= 1.10 else "MISS", med[1] / med[3], med[4] / med[5]))
json.dump({"turns": rows, "median": med, "p50_ratio": ratio, "p99_ratio": med[1] / med[3],
           "cpu_ratio": med[4] / med[5]}, open(f"{out}/client_cost.json", "w"), indent=1)
PY
