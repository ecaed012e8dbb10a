#!/usr/bin/env bash
# The Python client (gdn_serve) on the lent H200, one visit.
#
#   here:   bash scripts/device/python_visit.sh prepare   wheels into .whl/ (needs PyPI)
#           (and scripts/device/bundle.sh for .bundle/: gdn-server, gdn-bench, [gdn-echo])
#   device: bash scripts/device/python_visit.sh           carry .whl and .bundle
#
# On the device (no network, python3 with torch and transformers, no grpcio):
#  1. unpacks the wheels (gdn_serve, grpcio for the device's python, protobuf)
#     into /tmp/gdn_py and puts it first on PYTHONPATH (numpy, torch and
#     transformers are the device's own);
#  2. the transformers check (client/python/tests/transformers_check.py): a
#     small random Qwen3-Next on cuda, natively and with use_remote_gdn against
#     gdn-server --backend=cuda (fp32 activations, Hqk 2 / Hv 4 / K = V = 64):
#     logits of a prefill, 16 decode steps and a 16-token generate() within the
#     stated bound -> transformers_check.json;
#  3. per-call latency of the Python client (bench/python/client_latency.py:
#     decode 1x1, 32x1, prefill 1x2048, default shape 16/32/128/128 bf16;
#     numpy, torch cpu and torch cuda inputs) against gdn-server
#     --diagnostic_no_compute (and gdn-echo when the bundle has it), with the
#     client's own overhead beside the transport; and against the real cuda
#     server -> latency_*.json (PY_SECONDS per case, see below);
#  4. gdn-bench's figures for the same three cases against the same servers
#     -> bench_cpp.json (CPP_SECONDS per case);
#  5. CUDA regions (client/python/tests/cuda_region_check.py, skipped without
#     torch.cuda): after step 2 against the small fp32 server (bitwise vs
#     inline, error cases, use_remote_gdn(regions="cuda")), and after step 3
#     against the cuda server (inline vs region per-call latency)
#     -> cuda_regions.json;
#  6. python_visit.md: the tables.
# About 170 s at the defaults (the device call allows 230 s); PY_LATENCY=0
# runs the transformers check only.
# Writes at most 8 files under $OUT.
set -u
cd "$(dirname "$0")/../.."
root=$PWD

if [ "${1:-}" = "prepare" ]; then
  set -e
  rm -rf .whl && mkdir -p .whl
  python3 -m pip wheel -q --no-deps ./client/python -w .whl/
  # The device's python (Ubuntu 24.04: 3.12); the carry limit is 64 MiB in all.
  for py in 3.12; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl grpcio
  done
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    "protobuf>=$(sed -n 's/.*protobuf>=\([0-9.]*\).*/\1/p' <(unzip -p .whl/gdn_serve-*.whl '*/METADATA'))"
  ls -la .whl
  du -sh .whl
  exit 0
fi

OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/python_visit.log
rm -f /tmp/cpp_*.json /tmp/cuda_regions_*.json  # this visit's only
export LD_LIBRARY_PATH=$root/.bundle/lib:$root/.bundle/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$root/.bundle/bin
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }

say "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat .bundle/COMMIT 2>/dev/null
  git log -1 --format='%H %cd' 2>/dev/null; lscpu | grep -E "Model name|^CPU\(s\)"; python3 --version; } 2>&1 | tee -a "$LOG"

say "install gdn_serve from .whl"
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_wheels.sh 2>> "$LOG" || { echo "missing wheels (see $LOG)"; exit 1; }
python3 -c "import gdn_serve, grpc, google.protobuf, numpy, torch, transformers as t
print('gdn_serve', gdn_serve.__version__, 'grpcio', grpc.__version__, 'protobuf', google.protobuf.__version__,
      'numpy', numpy.__version__, 'torch', torch.__version__, 'transformers', t.__version__)" 2>&1 | tee -a "$LOG"

server_pid=""
start_server() {  # name, then the binary and its flags; sets $grpc
  local name=$1; shift
  stop_server
  # gdn-server serves /metrics too; gdn-echo has no such flag (it refuses unknown flags).
  local metrics=()
  [ "$(basename "$1")" = gdn-server ] && metrics=(--metrics_listen=127.0.0.1:0)
  "$@" --listen=127.0.0.1:0 "${metrics[@]}" >/tmp/$name.out 2>/tmp/$name.err &
  server_pid=$!
  for _ in $(seq 150); do grep -q "listening" /tmp/$name.out 2>/dev/null && break; sleep 0.2; done
  grpc=$(sed -nE 's/.*grpc=([^ ]+).*/\1/p' /tmp/$name.out)
  echo "$name: $* -> ${grpc:-FAILED}" | tee -a "$LOG"
  [ -n "$grpc" ] || { tail -20 /tmp/$name.err | tee -a "$LOG"; return 1; }
}
stop_server() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  server_pid=""
}
trap stop_server EXIT

# Same-host tensors through CUDA regions (client/python/tests/cuda_region_check.py):
# bitwise against the inline path, the error cases, and (--transformers) the
# tiny model with use_remote_gdn(regions="cuda"), or (--latency) inline vs
# region per call -> /tmp/cuda_regions_<name>.json, merged into cuda_regions.json.
# PY_REGIONS=0 skips it; skipped by itself where torch sees no CUDA device.
cuda_regions() {  # name, then the check's flags
  local name=$1; shift
  [ "${PY_REGIONS:-1}" = 0 ] && return 0
  if ! python3 -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    say "cuda regions: skipped (torch.cuda unavailable)"; return 0
  fi
  say "cuda regions: $name"
  timeout 90 python3 client/python/tests/cuda_region_check.py --target "$grpc" \
    --json_out "/tmp/cuda_regions_$name.json" "$@" 2>&1 | grep -v "^\[transformers\]" | \
    grep -vE '^\s' | tail -40 | tee -a "$LOG"
}
say "transformers check (cuda model, cuda server, fp32)"
small="--layers=3 --qk_heads=2 --v_heads=4 --head_dim_k=64 --head_dim_v=64 --activation_dtype=fp32"
if start_server tf_server $B/gdn-server --backend=cuda $small; then
  timeout 300 python3 - "$grpc" "$OUT/transformers_check.json" <<'EOF' 2>&1 | grep -v "^\[transformers\]" | tail -20 | tee -a "$LOG"
import json, sys
sys.path.insert(0, "client/python/tests")
import torch, gdn_serve, transformers_check
client = gdn_serve.Client(sys.argv[1], timeout=300)
results = transformers_check.compare(client, device="cuda" if torch.cuda.is_available() else "cpu")
results["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
json.dump(results, open(sys.argv[2], "w"), indent=2)
print(json.dumps(results, indent=2))
print("TRANSFORMERS CHECK", "PASSED" if results["passed"] else "FAILED")
EOF
  cuda_regions small --transformers
fi

# Durations (the whole visit must fit the device call: <= 200 s at these defaults):
# PY_SECONDS per latency case and input kind (3 cases x 3 kinds per server),
# at most PY_CALLS decode / PY_PREFILL_CALLS prefill calls per case;
# CPP_SECONDS per gdn-bench case; PY_SERVERS: which servers the latency runs against;
# PY_MODEL_LAYERS: see the no-compute server's step below.
PY_SECONDS=${PY_SECONDS:-1.5}
PY_CALLS=${PY_CALLS:-2000}
PY_PREFILL_CALLS=${PY_PREFILL_CALLS:-100}
PY_INPUTS=${PY_INPUTS:-numpy,torch,torch-cuda}
PY_SERVERS=${PY_SERVERS:-nocompute echo cuda}
CPP_SECONDS=${CPP_SECONDS:-3}
latency() {  # name, extra client_latency args
  local name=$1; shift
  say "python latency: $name"
  # 9 cases of PY_SECONDS each, plus warmup, session setup and imports.
  local limit
  limit=$(python3 -c "print(int(9 * $PY_SECONDS * 1.5 + 30))")
  timeout "$limit" python3 bench/python/client_latency.py --target "$grpc" --calls "$PY_CALLS" \
    --prefill_calls "$PY_PREFILL_CALLS" --warmup 10 --seconds "$PY_SECONDS" --inputs "$PY_INPUTS" \
    --json_out "$OUT/latency_$name.json" "$@" 2>&1 | tail -12 | tee -a "$LOG"
}
cpp_bench() {  # name -> /tmp/cpp_<name>_<case>.json
  local name=$1
  say "gdn-bench: $name"
  local t  # CPP_SECONDS may be fractional (bash arithmetic is integer only)
  t=$(awk "BEGIN { print int($CPP_SECONDS + 20) }")
  timeout $t $B/gdn-bench --server="$grpc" --layers=1 --sessions=1 --sessions_per_call=1 --prefill_tokens=1 \
    --decode_steps=400 --warmup_s=0.5 --duration_s=$CPP_SECONDS --json_out=/tmp/cpp_${name}_decode1x1.json 2>&1 | tail -3 | tee -a "$LOG"
  timeout $t $B/gdn-bench --server="$grpc" --layers=1 --sessions=32 --sessions_per_call=32 --prefill_tokens=1 \
    --decode_steps=400 --warmup_s=0.5 --duration_s=$CPP_SECONDS --json_out=/tmp/cpp_${name}_decode32x1.json 2>&1 | tail -3 | tee -a "$LOG"
  timeout $t $B/gdn-bench --server="$grpc" --layers=1 --sessions=1 --sessions_per_call=1 --prefill_tokens=2048 \
    --decode_steps=1 --warmup_s=0.5 --duration_s=$CPP_SECONDS --json_out=/tmp/cpp_${name}_prefill1x2048.json 2>&1 | tail -3 | tee -a "$LOG"
}
has_server() { case " $PY_SERVERS " in *" $1 "*) return 0 ;; esac; return 1; }

# PY_LATENCY=0: the transformers check only.
if [ "${PY_LATENCY:-1}" = 0 ]; then
  stop_server
  [ -f /tmp/cuda_regions_small.json ] && cp /tmp/cuda_regions_small.json "$OUT/cuda_regions.json"
  say "done (PY_LATENCY=0)"; exit 0
fi
if has_server nocompute && start_server nocompute $B/gdn-server --backend=cuda --diagnostic_no_compute; then
  latency nocompute
  # PY_MODEL_LAYERS=36: numpy decode again, walking 36 layers as a model does
  # (client_latency.py --layers), -> latency_nocompute-layers<N>.json.
  if [ -n "${PY_MODEL_LAYERS:-}" ]; then
    latency "nocompute-layers$PY_MODEL_LAYERS" --layers "$PY_MODEL_LAYERS" \
      --cases decode:1x1,decode:32x1 --inputs numpy
  fi
  cpp_bench nocompute
fi
if has_server echo && [ -x $B/gdn-echo ] && start_server echo $B/gdn-echo --mode=raw; then
  latency echo
fi
if has_server cuda && start_server cuda $B/gdn-server --backend=cuda; then
  latency cuda
  cpp_bench cuda
  cuda_regions default --latency
fi
stop_server

say "summary"
python3 - "$OUT" <<'EOF' 2>&1 | tee -a "$LOG"
import glob, json, os, sys
out = sys.argv[1]
cpp = {os.path.basename(p)[4:-5]: json.load(open(p)) for p in sorted(glob.glob("/tmp/cpp_*.json"))}
json.dump(cpp, open(os.path.join(out, "bench_cpp.json"), "w"), indent=1)
lines = ["# Python client (gdn_serve) on the H200", ""]
tc = os.path.join(out, "transformers_check.json")
if os.path.exists(tc):
    r = json.load(open(tc))
    lines += ["## transformers check: %s" % ("PASSED" if r["passed"] else "FAILED"), "",
              "| quantity | value |", "| --- | --- |"]
    lines += ["| %s | %s |" % (k, v) for k, v in r.items()]
    lines.append("")
lines += ["## Per-call latency (ms)", "",
          "| server | case | inputs | end-to-end P50 / P99 | transport P50 / P99 | overhead P50 | overhead / transport | work P50 / P99 | gdn-bench P50 / P99 |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
for path in sorted(glob.glob(os.path.join(out, "latency_*.json"))):
    name = os.path.basename(path)[8:-5]
    for c in json.load(open(path))["cases"]:
        if "error" in c:
            lines.append("| %s | %s | %s | %s |" % (name, c["case"], c["inputs"], c["error"][:80]))
            continue
        case = c["case"].replace(":", "")
        phase = "prefill" if case.startswith("prefill") else "decode"
        b = cpp.get("%s_%s" % (name, case), {}).get("latency_ms", {}).get(phase, {})
        lines.append("| %s | %s | %s | %.3f / %.3f | %.3f / %.3f | %.3f | %.1f%% | %.3f / %.3f | %s |" % (
            name, c["case"], c["inputs"], c["end_to_end_p50_ms"], c["end_to_end_p99_ms"],
            c["transport_p50_ms"], c["transport_p99_ms"], c["overhead_p50_ms"],
            100 * c["overhead_over_transport_p50"], c["work_p50_ms"], c["work_p99_ms"],
            "%.3f / %.3f" % (b["p50"], b["p99"]) if b else "-"))
regions = {os.path.basename(p)[13:-5]: json.load(open(p))
           for p in sorted(glob.glob("/tmp/cuda_regions_*.json"))}
if regions:
    json.dump(regions, open(os.path.join(out, "cuda_regions.json"), "w"), indent=1)
    lines += ["", "## CUDA regions (cuda_region_check.py)", ""]
    for name, r in regions.items():
        failed = [c["check"] for c in r.get("checks", []) if not c["passed"]]
        lines.append("- %s (%s, %s): %s%s" % (name, r.get("server"), r.get("activation_dtype"),
                     "PASSED" if r.get("passed") else "FAILED", (": " + ", ".join(failed)) if failed else ""))
        for case, v in r.get("latency", {}).items():
            lines.append("  - %s: inline %.3f ms, region %.3f ms P50 (torch cuda inputs)"
                         % (case, v["inline_p50_ms"], v["region_p50_ms"]))
open(os.path.join(out, "python_visit.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
say "done"
