#!/usr/bin/env bash
# TLS on the metrics port through the nginx sidecar, end to end (ctest label
# "deploy"):
#   - a throwaway CA, a server certificate for 127.0.0.1 and a client
#     certificate, plus a second CA (with its own client certificate) that
#     nothing trusts, all made here with openssl;
#   - one gdn-server (CPU backend, small shape, free ports, metrics plain HTTP
#     on loopback as in the pod);
#   - two nginx (deploy/nginx/render-metrics-tls.sh), run unprivileged under
#     a temp directory on free ports: TLS only, and TLS with client
#     certificates (mutual TLS);
#   - through the TLS proxy /metrics carries gdn_build_info, the status page
#     and its scripts load, plain HTTP on the TLS port and a non-GET are
#     refused, a client trusting the wrong CA fails verification;
#   - through the mTLS proxy: no client certificate or one from the wrong CA
#     is refused (400, nginx's 496 / 495: its log says verify=NONE / FAILED),
#     the right one scrapes;
#   - deploy/prometheus/scrape-metrics-tls.yml, pointed at these
#     certificates, passes `promtool check config` (where promtool is).
# Usage: metrics_tls_test.sh GDN_SERVER
# Needs nginx, openssl and curl (Debian's packages; scripts/install_deps.sh).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 GDN_SERVER" >&2
  exit 2
fi
server_bin="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
nginx_bin="$(command -v nginx || true)"
[ -n "$nginx_bin" ] || nginx_bin=/usr/sbin/nginx
for tool in "$nginx_bin" openssl curl; do
  if ! command -v "$tool" >/dev/null; then
    echo "metrics_tls_test: $tool not found (scripts/install_deps.sh installs it)" >&2
    exit 1
  fi
done

test_name=metrics_tls_test
log_globs='*.err *.log nginx-*/error.log nginx-*/access.log'
log_lines=20
# shellcheck source=SCRIPTDIR/temp_workspace.sh
. "$(dirname "${BASH_SOURCE[0]}")/temp_workspace.sh"  # $work, $pids, the EXIT trap
trap 'exit 130' INT TERM

fail() {
  echo "metrics_tls_test: FAIL: $*" >&2
  exit 1
}

# --- certificates ------------------------------------------------------------
# P-256 keys (fast to make), valid 2 days; openssl's chatter goes to a log.
certs="$work/certs"
mkdir -p "$certs"
make_ca() {  # NAME
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=$1" -keyout "$certs/$1.key" -out "$certs/$1.crt" \
    -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign >>"$work/openssl.log" 2>&1
}
make_leaf() {  # NAME CA EXTENSIONS...
  local name="$1" ca="$2"
  shift 2
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -keyout "$certs/$name.key" -out "$certs/$name.csr" >>"$work/openssl.log" 2>&1
  printf '%s\n' "$@" >"$certs/$name.ext"
  openssl x509 -req -in "$certs/$name.csr" -CA "$certs/$ca.crt" -CAkey "$certs/$ca.key" \
    -set_serial "0x$(openssl rand -hex 8)" -days 2 -extfile "$certs/$name.ext" \
    -out "$certs/$name.crt" >>"$work/openssl.log" 2>&1
}
make_ca ca
make_ca other-ca
# The proxy's certificate names the address clients dial (curl checks it).
make_leaf server ca "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  "extendedKeyUsage=serverAuth" "keyUsage=critical,digitalSignature"
make_leaf client ca "extendedKeyUsage=clientAuth" "keyUsage=critical,digitalSignature"
make_leaf stranger other-ca "extendedKeyUsage=clientAuth" "keyUsage=critical,digitalSignature"
# nginx's master reads the keys (as root or as the user running the test).
chmod 644 "$certs"/*.key

# --- gdn-server: metrics plain HTTP on loopback ----------------------------------
# The shape of small_server.sh (the status page tests'); this test makes no
# calls, it only reads the metrics port.
"$server_bin" --backend=cpu --cpu_threads=1 --layers=2 --qk_heads=1 --v_heads=2 \
  --head_dim_k=64 --head_dim_v=64 --activation_dtype=fp32 --state_dtype=fp32 \
  --device_state_budget=16MiB --host_state_budget=16MiB --drain_timeout_s=1 \
  --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
  >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
pids+=("$server_pid")
line=""
for _ in $(seq 300); do
  line="$(grep -m1 '^gdn-server listening ' "$work/server.out" || true)"
  [ -n "$line" ] && break
  kill -0 "$server_pid" 2>/dev/null || fail "gdn-server exited at start-up"
  sleep 0.1
done
[ -n "$line" ] || fail "gdn-server printed no start-up line in 30 s"
# gdn-server listening grpc=HOST:PORT metrics=HOST:PORT
grpc="${line#*grpc=}"
grpc="${grpc%% *}"
metrics="${line#*metrics=}"
metrics="${metrics%% *}"
echo "metrics_tls_test: gdn-server grpc=$grpc metrics=$metrics"

# --- nginx ---------------------------------------------------------------------
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# start_nginx NAME [CLIENT_CA]: renders and starts one nginx in $work/nginx-NAME
# and sets $port once it accepts connections.
start_nginx() {
  local dir="$work/nginx-$1" pid
  mkdir -p "$dir"
  port=""
  for _ in 1 2 3; do  # a free port can be taken before nginx binds it: try again
    local p
    p="$(free_port)"
    bash "$root/deploy/nginx/render-metrics-tls.sh" "127.0.0.1:$p" "$dir" "$metrics" \
      "$certs/server.crt" "$certs/server.key" ${2:+"$2"} >"$dir/nginx.conf"
    "$nginx_bin" -t -q -p "$dir" -c "$dir/nginx.conf"
    "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' >"$work/nginx-$1.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 50); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
        port="$p"
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  done
  fail "nginx ($1) did not start"
}

# get URL OUT [CURL ARGS...]: the HTTP status (000: no answer) and curl's exit
# status in $code and $rc, the body in OUT. Never fails by itself.
get() {
  local url="$1" out="$2"
  shift 2
  rc=0
  code="$(curl -sS --max-time 5 -o "$out" -w '%{http_code}' "$@" "$url" 2>"$out.err")" || rc=$?
}

start_nginx tls
tls="127.0.0.1:$port"
start_nginx mtls "$certs/ca.crt"
mtls="127.0.0.1:$port"
echo "metrics_tls_test: nginx TLS on $tls, mutual TLS on $mtls -> $metrics"

# --- TLS only ------------------------------------------------------------------
get "https://$tls/metrics" "$work/m.txt" --cacert "$certs/ca.crt"
[ "$rc" = 0 ] && [ "$code" = 200 ] || fail "https /metrics: curl $rc, HTTP $code: $(cat "$work/m.txt.err")"
grep -q '^gdn_build_info{' "$work/m.txt" || fail "https /metrics has no gdn_build_info"
# The same registry as the server's own port: the build line is identical.
direct="$(curl -sS --max-time 5 "http://$metrics/metrics" | grep '^gdn_build_info{')"
[ "$direct" = "$(grep '^gdn_build_info{' "$work/m.txt")" ] ||
  fail "gdn_build_info differs through the proxy"
echo "metrics_tls_test: https://$tls/metrics OK ($(wc -l <"$work/m.txt") lines)"

for path in /status / /status_page.js; do
  get "https://$tls$path" "$work/s.txt" --cacert "$certs/ca.crt"
  [ "$rc" = 0 ] && [ "$code" = 200 ] || fail "https $path: curl $rc, HTTP $code"
done
get "https://$tls/status" "$work/s.txt" --cacert "$certs/ca.crt"
grep -q '<title>gdn-server status' "$work/s.txt" || fail "https /status is not the status page"
echo "metrics_tls_test: status page and its scripts OK through TLS"

# Plain HTTP on the TLS port: nginx's 400 ("plain HTTP request was sent to
# HTTPS port"; nginx's code 497, logged as the 400 it sends), never the
# metrics, which are not fetched (no upstream in the log line).
get "http://$tls/metrics" "$work/p.txt"
[ "$code" = 400 ] || fail "plain HTTP on the TLS port answered HTTP $code (curl $rc)"
if grep -q gdn_ "$work/p.txt"; then fail "plain HTTP on the TLS port got metrics"; fi
grep -q '"GET /metrics HTTP/1.1" 400 tls=- .* upstream=-$' "$work/nginx-tls/access.log" ||
  fail "nginx did not log the plain HTTP request as refused"

# A client trusting another CA: the handshake fails verification (curl 60).
get "https://$tls/metrics" "$work/w.txt" --cacert "$certs/other-ca.crt"
[ "$rc" = 60 ] || fail "wrong CA: curl exit $rc (want 60), HTTP $code"
# The name checked too: a certificate for 127.0.0.1/localhost only.
get "https://gdn-metrics.invalid:${tls##*:}/metrics" "$work/n.txt" --cacert "$certs/ca.crt" \
  --resolve "gdn-metrics.invalid:${tls##*:}:127.0.0.1"
[ "$rc" = 60 ] || fail "wrong host name: curl exit $rc (want 60), HTTP $code"
# Read-only: no method but GET/HEAD reaches the server.
get "https://$tls/metrics" "$work/x.txt" --cacert "$certs/ca.crt" -X POST -d x
[ "$code" = 403 ] || fail "POST answered HTTP $code (want 403)"
echo "metrics_tls_test: plain HTTP 400, wrong CA and wrong name fail verification, POST 403"

# --- mutual TLS ------------------------------------------------------------------
get "https://$mtls/metrics" "$work/c0.txt" --cacert "$certs/ca.crt"
[ "$code" = 400 ] || fail "mTLS without a client certificate: HTTP $code (want 400), curl $rc"
if grep -q gdn_ "$work/c0.txt"; then fail "mTLS without a client certificate got metrics"; fi
get "https://$mtls/metrics" "$work/c1.txt" --cacert "$certs/ca.crt" \
  --cert "$certs/stranger.crt" --key "$certs/stranger.key"
# TLS 1.3 (curl and nginx on Debian 12) lets nginx finish the handshake and
# answer 400 (its 495) rather than fail it.
[ "$code" = 400 ] || fail "mTLS with a foreign client certificate: HTTP $code (want 400), curl $rc"
if grep -q gdn_ "$work/c1.txt"; then fail "mTLS with a foreign client certificate got metrics"; fi
get "https://$mtls/metrics" "$work/c2.txt" --cacert "$certs/ca.crt" \
  --cert "$certs/client.crt" --key "$certs/client.key"
[ "$rc" = 0 ] && [ "$code" = 200 ] || fail "mTLS with the client certificate: curl $rc, HTTP $code"
grep -q '^gdn_build_info{' "$work/c2.txt" || fail "mTLS /metrics has no gdn_build_info"
log="$work/nginx-mtls/access.log"
grep -q ' 400 .* verify=NONE upstream=-$' "$log" ||
  fail "nginx did not log the refusal of the missing certificate"
grep -q ' 400 .*client="CN=stranger" verify=FAILED:.* upstream=-$' "$log" ||
  fail "nginx did not log the refusal of the foreign certificate"
grep -q ' 200 .*client="CN=client" verify=SUCCESS' "$log" || fail "nginx did not log the client"
echo "metrics_tls_test: mTLS: no certificate 400, foreign certificate 400, client 200"

# The Prometheus example (deploy/prometheus/scrape-metrics-tls.yml) with this
# test's certificates in place of its paths: promtool parses it and checks the
# files exist. promtool is scripts/check_deploy.sh's (or one on PATH); skipped
# without one.
promtool="${GDN_DEPLOY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/gdn-serve/deploy-tools}/bin/promtool"
[ -x "$promtool" ] || promtool="$(command -v promtool || true)"
if [ -n "$promtool" ]; then
  sed "s#/etc/prometheus/gdn-metrics-tls/#$certs/#" \
    "$root/deploy/prometheus/scrape-metrics-tls.yml" >"$work/prometheus.yml"
  "$promtool" check config "$work/prometheus.yml" >"$work/promtool.log" 2>&1 ||
    fail "promtool check config on scrape-metrics-tls.yml: $(cat "$work/promtool.log")"
  echo "metrics_tls_test: deploy/prometheus/scrape-metrics-tls.yml passes promtool check config"
else
  echo "metrics_tls_test: no promtool (scripts/check_deploy.sh tools): scrape config not checked"
fi

kill -0 "$server_pid" 2>/dev/null || fail "gdn-server died"
echo "metrics_tls_test: passed"
