#!/usr/bin/env bash
# Prefix reuse, measured: the time to first output (TTFO) of sessions that
# share a prompt prefix, with and without reusing it, against one server in
# one run (issue 20).
#
#   baseline  every session prefills the whole prompt (P shared + X own tokens)
#   warm      the shared P tokens were prefilled once by a parent that keeps a
#             state every 64 tokens (--fork_at_checkpoint=64) and stays
#             (--warm_prefix, a cached system prompt); each session forks it at
#             P and prefills its own X tokens: TTFO = fork + X tokens
#   cold      the same, but each unit of F sessions prefills its own parent
#             first (no cache across units): TTFO includes the parent's prefill
#
# Each arm: F sessions at a time (one per lane, --sessions_per_call=1), X own
# tokens and D decode steps each, every server layer, inline tensors over
# the Unix socket. Writes <out>/<arm>.json (gdn-bench), commands.txt and
# summary.md (TTFO P50 / P99 per arm and the ratio to baseline).
#
#   BIN_DIR=build/server ... bash bench/prefix_reuse/run.sh OUT_DIR
#   env: BIN_DIR (gdn-server and gdn-bench; default build-py paths),
#        BACKEND (cuda|cpu, default cpu), LAYERS (12), P (2048), X (128), D (8),
#        F (8), DURATION_S (10), WARMUP_S (2), SERVER_FLAGS (extra)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out=${1:?usage: run.sh OUT_DIR}
mkdir -p "$out"
server_bin=${BIN_DIR:+$BIN_DIR/gdn-server}
server_bin=${server_bin:-$root/build-py/server/gdn-server}
bench_bin=${BIN_DIR:+$BIN_DIR/gdn-bench}
bench_bin=${bench_bin:-$root/build-py/client/bench/gdn-bench}
backend=${BACKEND:-cpu}
layers=${LAYERS:-12}
P=${P:-2048}; X=${X:-128}; D=${D:-8}; F=${F:-8}
duration=${DURATION_S:-10}; warmup=${WARMUP_S:-2}
dir=$(mktemp -d /tmp/gdn_prefix.XXXXXX)
sock=$dir/server.sock
# shellcheck disable=SC2086
"$server_bin" --backend="$backend" --layers="$layers" --listen="unix:$sock" \
  --metrics_listen=127.0.0.1:0 ${SERVER_FLAGS:-} >"$out/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
echo "$server_bin --backend=$backend --layers=$layers --listen=unix:$sock ${SERVER_FLAGS:-}" \
  >"$out/commands.txt"

common=(--server="unix:$sock" --layers=0 --sessions="$F" --sessions_per_call=1
        --decode_steps="$D" --duration_s="$duration" --warmup_s="$warmup" --progress=false)
arm() {  # name, then the arm's own flags
  local name=$1; shift
  echo "$bench_bin ${common[*]} $* --json_out=$out/$name.json" >>"$out/commands.txt"
  "$bench_bin" "${common[@]}" "$@" --json_out="$out/$name.json" >"$out/$name.txt" 2>&1 \
    || { echo "$name failed:"; tail -5 "$out/$name.txt"; }
}
arm baseline --prefill_tokens=$((P + X))
arm warm --prefill_tokens="$X" --shared_prefix_tokens="$P" --fork_fanout="$F" \
  --fork_at_checkpoint=64 --warm_prefix
arm cold --prefill_tokens="$X" --shared_prefix_tokens="$P" --fork_fanout="$F" \
  --fork_at_checkpoint=64

python3 - "$out" "$P" "$X" "$D" "$F" "$layers" "$backend" <<'EOF'
import json, os, sys
out, P, X, D, F, layers, backend = sys.argv[1:]
rows, base = [], None
for arm in ("baseline", "warm", "cold"):
    path = os.path.join(out, arm + ".json")
    if not os.path.exists(path):
        rows.append("| %s | failed | | | | |" % arm)
        continue
    d = json.load(open(path))
    t, lat = d["latency_ms"]["ttfo"], d["latency_ms"]
    if arm == "baseline":
        base = t
    ratio = lambda k: ("%.2f" % (t[k] / base[k])) if base and base[k] else "-"
    rows.append("| %s | %d | %.2f | %.2f | %s / %s | %.3f | %.3f |" % (
        arm, t["count"], t["p50"], t["p99"], ratio("p50"), ratio("p99"),
        lat["fork"]["p50"], lat["decode"]["p50"]))
with open(os.path.join(out, "summary.md"), "w") as f:
    f.write("Shared prefix P = %s tokens, own X = %s, %s decode steps, %s sessions at a time, "
            "%s layers, --backend=%s\n\n" % (P, X, D, F, layers, backend))
    f.write("| arm | sessions | TTFO P50 ms | TTFO P99 ms | ratio to baseline P50 / P99 | "
            "fork P50 ms | decode call P50 ms |\n| --- | --- | --- | --- | --- | --- | --- |\n")
    f.write("\n".join(rows) + "\n")
print(open(os.path.join(out, "summary.md")).read())
EOF
