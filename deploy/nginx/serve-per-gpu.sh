#!/usr/bin/env bash
# One gdn-server per GPU of this host behind the nginx consistent-hash proxy
# (gdn-affinity.conf.in), all sharing one --snapshot_dir so a drained
# server's sessions continue on the others. Runs in the foreground until
# SIGTERM / SIGINT, then drains every server (SIGTERM: sessions written to
# the snapshot dir) and stops nginx.
#
# Usage: deploy/nginx/serve-per-gpu.sh [--option=value ...] [-- gdn-server flags]
#   --devices=0,1,2,3   one server per listed CUDA device (--device=N); default:
#                       every GPU nvidia-smi lists (0 when it lists none)
#   --servers=N         with --shared_device or --backend=cpu: N servers
#   --shared_device=D   every server on device D (a rehearsal on one GPU)
#   --backend=cuda|cpu  (default cuda; cpu: N servers on the cpu backend)
#   --state_budget_mib=M  device state budget of the whole host, divided
#                       evenly: each server gets --device_state_budget=M/N MiB
#                       (default: each server's own default)
#   --listen=HOST:PORT  the proxy's address (default 127.0.0.1:50050)
#   --host=HOST         the servers' address (default 127.0.0.1; another
#                       needs --tokens_file or --allow_insecure_remote after --)
#   --first_port=P      servers on P, P+1, ... and metrics on P+1000, ...
#                       (default 0: free ports, read from each start-up line)
#   --run_dir=DIR       logs, nginx files, servers.tsv (default a new temp dir)
#   --snapshot_dir=DIR  the shared hand-off directory (default RUN_DIR/snapshots)
#   --server_bin=PATH   gdn-server (default build/server/gdn-server)
#   --nginx_bin=PATH    nginx (default: on PATH, else /usr/sbin/nginx)
# Once everything listens it writes RUN_DIR/servers.tsv (index, pid, device,
# grpc, metrics; a header line first), RUN_DIR/proxy (HOST:PORT) and then
# RUN_DIR/ready, and prints "serve-per-gpu: ready proxy=HOST:PORT".
# Device numbers are as this process sees them (CUDA_VISIBLE_DEVICES). For
# the copy-free region path across GPUs, start servers and clients with the
# same devices visible (deploy/README.md, "One server per GPU").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
devices="" servers="" shared_device="" backend=cuda budget_mib="" listen=127.0.0.1:50050
host=127.0.0.1 first_port=0 run_dir="" snapshot_dir=""
server_bin="$root/build/server/gdn-server"
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --devices=*) devices="${1#*=}" ;;
    --servers=*) servers="${1#*=}" ;;
    --shared_device=*) shared_device="${1#*=}" ;;
    --backend=*) backend="${1#*=}" ;;
    --state_budget_mib=*) budget_mib="${1#*=}" ;;
    --listen=*) listen="${1#*=}" ;;
    --host=*) host="${1#*=}" ;;
    --first_port=*) first_port="${1#*=}" ;;
    --run_dir=*) run_dir="${1#*=}" ;;
    --snapshot_dir=*) snapshot_dir="${1#*=}" ;;
    --server_bin=*) server_bin="${1#*=}" ;;
    --nginx_bin=*) nginx_bin="${1#*=}" ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "serve-per-gpu: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
say() { echo "serve-per-gpu: $*" >&2; }

# --- which device each server gets -------------------------------------------
placement=()  # one entry per server: a device number, or "cpu"
if [ "$backend" = cpu ]; then
  for ((i = 0; i < ${servers:-1}; i++)); do placement+=(cpu); done
elif [ -n "$shared_device" ]; then
  for ((i = 0; i < ${servers:-1}; i++)); do placement+=("$shared_device"); done
else
  if [ -z "$devices" ]; then
    count="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
    devices="$(seq -s, 0 $((${count:-1} > 0 ? ${count:-1} - 1 : 0)))"
  fi
  IFS=, read -r -a placement <<<"$devices"
fi
n=${#placement[@]}
[ "$n" -ge 1 ] || { say "no server to start"; exit 2; }
[ -x "$server_bin" ] || { say "gdn-server not found: $server_bin (--server_bin)"; exit 2; }
[ -x "$nginx_bin" ] || { say "nginx not found: $nginx_bin (--nginx_bin; apt-get install nginx)"; exit 2; }

[ -n "$run_dir" ] || run_dir="$(mktemp -d /tmp/gdn-per-gpu.XXXXXX)"
mkdir -p "$run_dir/nginx"
run_dir="$(cd "$run_dir" && pwd)"
# nginx started by root runs its workers as nobody: they must reach it.
chmod 755 "$run_dir" "$run_dir/nginx"
[ -n "$snapshot_dir" ] || snapshot_dir="$run_dir/snapshots"
mkdir -p "$snapshot_dir"
rm -f "$run_dir/ready" "$run_dir/proxy"

pids=()
# On SIGTERM / SIGINT (exit 0) or a failed start: every server drains
# (SIGTERM; its sessions go to the snapshot dir), then nginx stops.
stop_all() {
  local status=$?
  trap - EXIT
  [ "${#pids[@]}" -gt 0 ] && say "stopping ${#pids[@]} process(es)"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  exit "$status"
}
trap stop_all EXIT
trap 'exit 0' TERM INT

# --- the servers -----------------------------------------------------------------
budget_flag=()
if [ -n "$budget_mib" ]; then budget_flag=("--device_state_budget=$((budget_mib / n))MiB"); fi
for ((i = 0; i < n; i++)); do
  port=0 mport=0
  if [ "$first_port" -gt 0 ]; then port=$((first_port + i)); mport=$((first_port + 1000 + i)); fi
  dev_flags=(--backend=cuda "--device=${placement[$i]}")
  [ "${placement[$i]}" = cpu ] && dev_flags=(--backend=cpu)
  "$server_bin" "${dev_flags[@]}" --listen="$host:$port" --metrics_listen="$host:$mport" \
    --snapshot_dir="$snapshot_dir" "${budget_flag[@]}" "${extra[@]}" \
    >"$run_dir/server$i.out" 2>"$run_dir/server$i.log" &
  pids+=($!)
done
printf 'index\tpid\tdevice\tgrpc\tmetrics\n' >"$run_dir/servers.tsv.tmp"
grpc_list=()
for ((i = 0; i < n; i++)); do
  line=""
  for _ in $(seq 1200); do  # CUDA start-up and the page pool: up to 2 min
    line="$(grep -m1 '^gdn-server listening ' "$run_dir/server$i.out" || true)"
    [ -n "$line" ] && break
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
      say "server $i (device ${placement[$i]}) exited at start-up:"; tail -5 "$run_dir/server$i.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  [ -n "$line" ] || { say "server $i printed no start-up line"; exit 1; }
  g="${line#*grpc=}"; g="${g%% *}"
  m="${line#*metrics=}"; m="${m%% *}"
  grpc_list+=("$g")
  printf '%s\t%s\t%s\t%s\t%s\n' "$i" "${pids[$i]}" "${placement[$i]}" "$g" "$m" \
    >>"$run_dir/servers.tsv.tmp"
done
mv "$run_dir/servers.tsv.tmp" "$run_dir/servers.tsv"

# --- nginx in front ------------------------------------------------------------------
bash "$root/deploy/nginx/render-config.sh" "$listen" "$run_dir/nginx" "${grpc_list[@]}" \
  >"$run_dir/nginx/nginx.conf"
"$nginx_bin" -t -q -p "$run_dir/nginx" -c "$run_dir/nginx/nginx.conf"
"$nginx_bin" -p "$run_dir/nginx" -c "$run_dir/nginx/nginx.conf" -g 'daemon off;' \
  >"$run_dir/nginx.log" 2>&1 &
pids+=($!)
proxy_host="${listen%:*}" proxy_port="${listen##*:}"
[ "$proxy_host" = 0.0.0.0 ] && proxy_host=127.0.0.1
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/$proxy_host/$proxy_port") 2>/dev/null && break
  kill -0 "${pids[-1]}" 2>/dev/null || { say "nginx exited:"; tail -5 "$run_dir/nginx.log" >&2; exit 1; }
  sleep 0.1
done
echo "$listen" >"$run_dir/proxy"
touch "$run_dir/ready"
echo "serve-per-gpu: ready proxy=$listen servers=${grpc_list[*]} run_dir=$run_dir"
# Until told to stop; a server that ends (a drain) leaves the others serving.
while true; do
  sleep 1 &
  wait $! || true
done
