#!/usr/bin/env bash
# Past one GPU (issue 23): N gdn-servers, one per device, behind the nginx
# consistent-hash proxy (deploy/nginx/serve-per-gpu.sh), for each N of a
# list; gdn-bench drives a decode-heavy closed loop of N x S sessions
# through the proxy, so every N has the same load per server. Then, at the
# largest N >= 2, the busiest server is drained mid-run (SIGTERM, shared
# --snapshot_dir) and its sessions must continue on the others with
# nothing lost. Writes OUT/results.md (figures, checks, every command line),
# OUT/summary.json and OUT/files.tar.gz (gdn-bench reports, /metrics
# scrapes, server and nginx logs): three files, as a device run returns.
#
# Usage: bench/multi_server/run.sh [--option=value ...] [-- gdn-server flags]
#   --servers=1,2,4,8      the N to run (1 first: the ratios divide by it)
#   --placement=per_device server i on device i (N GPUs) | shared: every
#                          server on --device, sharing it | cpu: cpu backend
#   --device=0             the device of --placement=shared
#   --state_budget_mib=M   device state budget in all, divided by N (shared
#                          and cpu: the one device's memory is split)
#   --sessions_per_server=S (16)  --sessions_per_call=B (4)
#   --prefill_tokens=P (16) --decode_steps=D (100000: decode only, after the
#                          first pass) --warmup_s=W (2) --duration_s=T (10)
#   --bench_layers=L       layers per step (0: all of the server's)
#   --drain=1|0            the drain phase (default 1) --drain_duration_s (15)
#   --slo_p99_ms=MS        also search the highest sessions per N whose P99
#                          per output token meets MS (off by default: slow)
#   --build_dir=DIR        the build tree with gdn-server and gdn-bench
#                          (default build) --bin_dir=DIR: both in DIR (a bundle)
#   --nginx_bin=PATH       --out=DIR (default /tmp/gdn-multi-server)
#   --note=TEXT            a line for results.md (what else ran on the host)
# The gdn-server flags after -- go to every server (the shape: --layers,
# --qk_heads, ...); --placement=cpu without them uses a small shape.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
command_line="bench/multi_server/run.sh $*"
servers_list=1,2 placement=per_device device=0 budget_mib="" sps=16 spc=4 prefill=16
decode=100000 warmup=2 duration=10 bench_layers=0 drain=1 drain_duration=15 slo=""
note="" bin_dir="" build_dir="$root/build" nginx_bin="" out=/tmp/gdn-multi-server
server_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --servers=*) servers_list="${1#*=}" ;;
    --placement=*) placement="${1#*=}" ;;
    --device=*) device="${1#*=}" ;;
    --state_budget_mib=*) budget_mib="${1#*=}" ;;
    --sessions_per_server=*) sps="${1#*=}" ;;
    --sessions_per_call=*) spc="${1#*=}" ;;
    --prefill_tokens=*) prefill="${1#*=}" ;;
    --decode_steps=*) decode="${1#*=}" ;;
    --warmup_s=*) warmup="${1#*=}" ;;
    --duration_s=*) duration="${1#*=}" ;;
    --bench_layers=*) bench_layers="${1#*=}" ;;
    --drain=*) drain="${1#*=}" ;;
    --drain_duration_s=*) drain_duration="${1#*=}" ;;
    --slo_p99_ms=*) slo="${1#*=}" ;;
    --bin_dir=*) bin_dir="${1#*=}" ;;
    --build_dir=*) build_dir="${1#*=}" ;;
    --nginx_bin=*) nginx_bin="${1#*=}" ;;
    --out=*) out="${1#*=}" ;;
    --note=*) note="${1#*=}" ;;
    --) shift; server_flags=("$@"); break ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "multi_server: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
server_bin="${bin_dir:-$build_dir/server}/gdn-server"
bench_bin="${bin_dir:-$build_dir/client/bench}/gdn-bench"
[ -n "$nginx_bin" ] || nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
for b in "$server_bin" "$bench_bin" "$nginx_bin"; do
  [ -x "$b" ] || { echo "multi_server: not found: $b (--bin_dir / --nginx_bin)" >&2; exit 2; }
done
case "$placement" in per_device|shared|cpu) ;; *) echo "multi_server: --placement?" >&2; exit 2 ;; esac
if [ "$placement" = cpu ] && [ ${#server_flags[@]} -eq 0 ]; then
  server_flags=(--layers=2 --qk_heads=2 --v_heads=4 --head_dim_k=64 --head_dim_v=64
                --activation_dtype=fp32 --cpu_threads=1 --host_state_budget=256MiB)
fi
server_flags+=(--drain_timeout_s=10)

mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d /tmp/gdn-multi-server-work.XXXXXX)"
chmod 755 "$work"
mkdir -p "$work/files"
log="$work/files/run.log"
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$log" >&2; }
deploy_pid=""
# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  local status=$?
  if [ -n "$deploy_pid" ]; then kill -TERM "$deploy_pid" 2>/dev/null || true; wait "$deploy_pid" 2>/dev/null || true; fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_deployment NAME N: serve-per-gpu.sh with N servers as --placement
# says, in $work/NAME; sets deploy_pid, proxy and the servers.tsv path.
start_deployment() {
  local name=$1 n=$2 where=()
  case "$placement" in
    per_device) where=(--devices="$(seq -s, 0 $((n - 1)))") ;;
    shared) where=(--shared_device="$device" --servers="$n") ;;
    cpu) where=(--backend=cpu --servers="$n") ;;
  esac
  [ -n "$budget_mib" ] && where+=(--state_budget_mib="$budget_mib")
  local proxy_port
  proxy_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  deploy_cmd=(deploy/nginx/serve-per-gpu.sh "${where[@]}" --listen="127.0.0.1:$proxy_port"
              --run_dir="$work/$name" --server_bin="$server_bin" --nginx_bin="$nginx_bin"
              -- "${server_flags[@]}")
  echo "${deploy_cmd[*]}" >>"$work/files/commands.txt"
  (cd "$root" && exec bash "${deploy_cmd[@]}") >"$work/$name.deploy.log" 2>&1 &
  deploy_pid=$!
  for _ in $(seq 1800); do
    [ -f "$work/$name/ready" ] && break
    kill -0 "$deploy_pid" 2>/dev/null || { cat "$work/$name.deploy.log" >&2; exit 1; }
    sleep 0.1
  done
  [ -f "$work/$name/ready" ] || { echo "multi_server: $name never came up" >&2; exit 1; }
  proxy="$(cat "$work/$name/proxy")"
  tsv="$work/$name/servers.tsv"
}

stop_deployment() {  # NAME: drains what is left, keeps the logs
  local name=$1
  kill -TERM "$deploy_pid" 2>/dev/null || true
  wait "$deploy_pid" 2>/dev/null || true
  deploy_pid=""
  mkdir -p "$work/files/$name"
  cp "$work/$name"/server*.log "$work/$name/servers.tsv" "$work/$name.deploy.log" "$work/files/$name/"
  cp "$work/$name/nginx/access.log" "$work/files/$name/nginx-access.log" 2>/dev/null || true
}

scrape() {  # NAME TAG: every server's /metrics into files/NAME/metrics-TAG-<i>.txt
  python3 "$here/summarize.py" scrape "$tsv" "$work/files/$1" "$2" || true
}

bench_flags=(--mode=closed --sessions_per_call="$spc" --prefill_tokens="$prefill"
             --decode_steps="$decode" --layers="$bench_layers" --retry_s=15 --progress=false)

# --- throughput at each N ----------------------------------------------------------
IFS=, read -r -a ns <<<"$servers_list"
for n in "${ns[@]}"; do
  name="n$n"
  say "N=$n: starting $n server(s) ($placement) behind nginx"
  start_deployment "$name" "$n"
  mkdir -p "$work/files/$name"
  scrape "$name" before
  cmd=("$bench_bin" --server="$proxy" --sessions=$((n * sps)) "${bench_flags[@]}"
       --warmup_s="$warmup" --duration_s="$duration" --json_out="$work/files/$name/bench.json")
  echo "${cmd[*]}" >>"$work/files/commands.txt"
  say "N=$n: ${cmd[*]}"
  "${cmd[@]}" >"$work/files/$name/bench.txt" 2>&1 || say "N=$n: gdn-bench exited $?"
  scrape "$name" after
  if [ -n "$slo" ]; then
    cmd=("$bench_bin" --server="$proxy" "${bench_flags[@]}" --warmup_s=1 --duration_s=4
         --slo_p99_ms="$slo" --slo_phase=decode_step --slo_load="concurrency:$((n * spc)):$((n * sps * 8))"
         --slo_max_probes=8 --json_out="$work/files/$name/slo.json")
    echo "${cmd[*]}" >>"$work/files/commands.txt"
    say "N=$n: SLO search: ${cmd[*]}"
    "${cmd[@]}" >"$work/files/$name/slo.txt" 2>&1 || say "N=$n: SLO search exited $?"
  fi
  stop_deployment "$name"
done

# --- the drain hand-off at the largest N >= 2 ------------------------------------------
drain_n=0
for n in "${ns[@]}"; do [ "$n" -ge 2 ] && [ "$n" -gt "$drain_n" ] && drain_n=$n; done
if [ "$drain" = 1 ] && [ "$drain_n" -ge 2 ]; then
  name=drain
  say "drain: $drain_n servers; the busiest drained a third of the way in"
  start_deployment "$name" "$drain_n"
  mkdir -p "$work/files/$name"
  cmd=("$bench_bin" --server="$proxy" --sessions=$((drain_n * sps)) "${bench_flags[@]}"
       --warmup_s=0 --duration_s="$drain_duration" --json_out="$work/files/$name/bench.json")
  echo "${cmd[*]}" >>"$work/files/commands.txt"
  say "drain: ${cmd[*]}"
  "${cmd[@]}" >"$work/files/$name/bench.txt" 2>&1 &
  bench_pid=$!
  sleep "$(python3 -c "print(max(2.0, $drain_duration / 3))")"
  kill -0 "$bench_pid" 2>/dev/null || say "drain: gdn-bench ended before the drain"
  scrape "$name" before
  # The server that has done the most decoding surely holds sessions (with
  # few routing keys the hash can leave one with none).
  target="$(python3 "$here/summarize.py" busiest "$tsv" "$work/files/$name" before)"
  echo "$target" >"$work/files/$name/drained_index"
  target_pid="$(awk -F'\t' -v t="$target" '$1 == t {print $2}' "$tsv")"
  say "drain: SIGTERM to server $target (pid $target_pid)"
  date -u +%s.%N >"$work/files/$name/drain_started"
  kill -TERM "$target_pid"
  for _ in $(seq 600); do kill -0 "$target_pid" 2>/dev/null || break; sleep 0.1; done
  date -u +%s.%N >"$work/files/$name/drain_ended"
  bench_status=0
  wait "$bench_pid" || bench_status=$?
  echo "$bench_status" >"$work/files/$name/bench_status"
  scrape "$name" after
  find "$work/$name/snapshots" -name '*.gdnsnap' | wc -l >"$work/files/$name/leftover_snapshots"
  stop_deployment "$name"
fi

# --- the report ---------------------------------------------------------------------------
commit="$(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(cd "$root" && git status --porcelain 2>/dev/null | head -1)" ]; then
  commit="$commit with uncommitted changes"
fi
[ -f "$root/.bundle/COMMIT" ] && commit="$commit; bundle: $(tr '\n' ' ' <"$root/.bundle/COMMIT")"
gpus="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *//' | paste -sd';' || true)"
cpu_model="$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | xargs || true)"
host_desc="$(nproc) cores ($cpu_model); GPUs: ${gpus:-none}"
status=0
python3 "$here/summarize.py" report "$work/files" "$out" \
  --command="$command_line" --commit="$commit" --host="$host_desc" \
  --placement="$placement" --servers="$servers_list" --sessions_per_server="$sps" \
  --server_flags="${server_flags[*]}" --note="$note" --drain_n="$([ "$drain" = 1 ] && echo "$drain_n" || echo 0)" || status=$?
tar -C "$work/files" -czf "$out/files.tar.gz" .
say "wrote $out/results.md, summary.json, files.tar.gz"
exit "$status"
