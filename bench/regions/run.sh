#!/usr/bin/env bash
# Same-host tensors (issue 18): one Forward layer call with its tensors sent
# inline (TCP loopback and a Unix socket), left in a POSIX shared-memory
# region (--transport=shm) and in this process's GPU memory shared through
# CUDA IPC (--transport=cuda_ipc, cuda builds on a GPU), each also through a
# same-host Forward channel (--control=channel), all in one run
# against gdn-servers on the same backend. Per shape and arm: gdn-bench's
# call latency P50 / P99 (4 layers, one session group per call).
#
#   bash bench/regions/run.sh OUT
# Env: BACKEND=cuda|cpu (default cuda when nvidia-smi works), BIN=dir with
#   gdn-server and gdn-bench (default: the first build tree), or GDN_SERVER= and
#   GDN_BENCH= single binaries, ARM_S=1.5, PREFILL_S=3,
#   SHAPES="decode1 decode32 decode256 prefill2048 prefill4096",
#   ARMS="tcp unix channel shm shm_channel" (+ cuda_ipc cuda_ipc_channel on cuda;
#   ARMS_SET=1 keeps ARMS as given), SERVER_FLAGS= extra gdn-server flags.
# Writes OUT/<shape>_<arm>.json, OUT/commands.txt, OUT/results.md.
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/gdn_regions}
mkdir -p "$OUT"
BIN=${BIN:-}
find_bin() { if [ -n "$BIN" ]; then echo "$BIN/$1"; else ls build*/"$2" 2>/dev/null | head -1; fi; }
SERVER=${GDN_SERVER:-$(find_bin gdn-server server/gdn-server)}
BENCH=${GDN_BENCH:-$(find_bin gdn-bench client/bench/gdn-bench)}
if [ -z "${BACKEND:-}" ]; then
  if nvidia-smi >/dev/null 2>&1; then BACKEND=cuda; else BACKEND=cpu; fi
fi
ARM_S=${ARM_S:-1.5}
PREFILL_S=${PREFILL_S:-3}
SHAPES=${SHAPES:-decode1 decode32 decode256 prefill2048 prefill4096}
# *_channel: the same calls through a same-host Forward channel
# (--control=channel: shared memory, no socket round trip).
ARMS=${ARMS:-"tcp unix channel shm shm_channel"}
[ "$BACKEND" = cuda ] && [ -z "${ARMS_SET:-}" ] && ARMS="$ARMS cuda_ipc cuda_ipc_channel"
: > "$OUT/commands.txt"
tmp=$(mktemp -d /tmp/gdn_regions.XXXXXX)
# start_server runs in a command substitution (a subshell): the pids go
# through a file, or the servers would outlive the script.
cleanup() {
  for p in $(cat "$tmp/pids" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
  for p in $(cat "$tmp/pids" 2>/dev/null); do
    while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

start_server() {  # name listen -> prints the gRPC address
  # shellcheck disable=SC2206
  local cmd=("$SERVER" --backend="$BACKEND" --layers=4 --metrics_listen=127.0.0.1:0 --listen="$2"
             ${SERVER_FLAGS:-})
  echo "${cmd[*]}" >> "$OUT/commands.txt"
  "${cmd[@]}" > "$tmp/$1.out" 2> "$tmp/$1.err" &
  echo $! >> "$tmp/pids"
  for _ in $(seq 300); do grep -q listening "$tmp/$1.out" 2>/dev/null && break; sleep 0.1; done
  sed -nE 's/.*grpc=([^ ]+).*/\1/p' "$tmp/$1.out"
}
tcp=$(start_server tcp 127.0.0.1:0)
unix=$(start_server unix "unix:$tmp/server.sock")
[ -n "$tcp" ] && [ -n "$unix" ] || { echo "a server did not start"; cat "$tmp"/*.err; exit 1; }

shape_flags() {
  case $1 in
    decode1) echo "--sessions=1 --sessions_per_call=1 --prefill_tokens=0 --decode_steps=1000000 --duration_s=$ARM_S" ;;
    decode32) echo "--sessions=32 --sessions_per_call=32 --prefill_tokens=0 --decode_steps=1000000 --duration_s=$ARM_S" ;;
    decode256) echo "--sessions=256 --sessions_per_call=256 --prefill_tokens=0 --decode_steps=1000000 --duration_s=$ARM_S" ;;
    prefill2048) echo "--sessions=1 --sessions_per_call=1 --prefill_tokens=2048 --decode_steps=0 --duration_s=$PREFILL_S" ;;
    prefill4096) echo "--sessions=1 --sessions_per_call=1 --prefill_tokens=4096 --decode_steps=0 --duration_s=$PREFILL_S" ;;
  esac
}

for shape in $SHAPES; do
  for arm in $ARMS; do
    control=grpc
    case $arm in
      tcp) target=$tcp; transport=unary ;;
      unix) target=$unix; transport=unary ;;
      channel) target=$unix; transport=unary; control=channel ;;
      *_channel) target=$unix; transport=${arm%_channel}; control=channel ;;
      *) target=$unix; transport=$arm ;;
    esac
    # shellcheck disable=SC2046
    cmd=("$BENCH" --server="$target" --transport="$transport" --control=$control --layers=4 --warmup_s=0.5
         --progress=false --json_out="$OUT/${shape}_${arm}.json" $(shape_flags "$shape"))
    echo "${cmd[*]}" >> "$OUT/commands.txt"
    echo "== $shape $arm"
    timeout 60 "${cmd[@]}" > "$OUT/${shape}_${arm}.txt" 2>&1 || echo "   failed: $(tail -2 "$OUT/${shape}_${arm}.txt")"
  done
done

python3 - "$OUT" "$SHAPES" "$ARMS" "$BACKEND" <<'PY'
import json, os, subprocess, sys, datetime
out, shapes, arms, backend = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]
def fig(shape, arm):
    try:
        d = json.load(open(os.path.join(out, f"{shape}_{arm}.json")))
    except Exception:
        return None
    lat = d["latency_ms"]["prefill" if shape.startswith("prefill") else "decode"]
    if not lat or not lat.get("count"):
        return None
    return lat["p50"] * 1e3, lat["p99"] * 1e3, lat["count"], d["errors"] if "errors" in d else 0
rows = []
head = "| shape | " + " | ".join(f"{a} P50 / P99 us" for a in arms) + " | best same-host ÷ inline unix P50 |"
rows.append(head)
rows.append("|" + "---|" * (len(arms) + 2))
for s in shapes:
    cells, f = [], {a: fig(s, a) for a in arms}
    for a in arms:
        cells.append("-" if f[a] is None else "%.0f / %.0f (n %d)" % f[a][:3])
    region = [f[a][0] for a in ("shm", "cuda_ipc", "shm_channel", "cuda_ipc_channel")
              if a in f and f[a] is not None]
    ratio = "%.2f" % (min(region) / f["unix"][0]) if region and f.get("unix") else "-"
    rows.append(f"| {s} | " + " | ".join(cells) + f" | {ratio} |")
# The binaries' commit: .bundle/COMMIT on the device (the tree's git there
# may be older than what was built), else this tree's HEAD.
try:
    commit = open(".bundle/COMMIT").readline().split()[1]
except (OSError, IndexError):
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
meta = f"backend {backend}, 4 layers, date {datetime.datetime.utcnow().isoformat()}Z, commit {commit}"
text = "# Same-host tensors: one Forward call, inline vs regions\n\n" + meta + "\n\n" + "\n".join(rows) + "\n"
open(os.path.join(out, "results.md"), "w").write(text)
print(text)
PY
