#!/usr/bin/env bash
# Renders gdn-metrics-tls.conf.in (TLS in front of the metrics port) to stdout.
# Usage: deploy/nginx/render-metrics-tls.sh LISTEN RUN_DIR UPSTREAM CERT KEY [CLIENT_CA]
#   LISTEN     what nginx listens on for HTTPS (0.0.0.0:9443, 127.0.0.1:9443, ...)
#   RUN_DIR    absolute directory for pid, logs and temp files (must exist)
#   UPSTREAM   HOST:PORT of gdn-server's --metrics_listen (127.0.0.1:9464)
#   CERT, KEY  absolute paths of the server certificate (PEM, chain after the
#              leaf) and its key
#   CLIENT_CA  optional: absolute path of the CA whose client certificates are
#              accepted; then a client without one is refused (mutual TLS)
# Then: nginx -t -p RUN_DIR -c FILE; nginx -p RUN_DIR -c FILE -g 'daemon off;'
set -euo pipefail
if [ $# -lt 5 ] || [ $# -gt 6 ]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
listen="$1"
run_dir="$2"
upstream="$3"
cert="$4"
key="$5"
client_ca="${6:-}"
# nginx resolves relative paths against its prefix (-p), not the caller's
# directory: insist on absolute ones rather than guess.
for p in "$run_dir" "$cert" "$key" ${client_ca:+"$client_ca"}; do
  case "$p" in
    /*) ;;
    *) echo "render-metrics-tls: paths must be absolute: $p" >&2; exit 2 ;;
  esac
done
verify="    # (no client certificates: any client that trusts CERT may scrape)"
if [ -n "$client_ca" ]; then
  verify="    ssl_client_certificate ${client_ca};
    ssl_verify_client on;
    ssl_verify_depth 2;"
fi
template="$(dirname "${BASH_SOURCE[0]}")/gdn-metrics-tls.conf.in"
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in
    @CLIENT_VERIFY@) printf '%s\n' "$verify" ;;
    *)
      line="${line//@LISTEN@/$listen}"
      line="${line//@RUN_DIR@/$run_dir}"
      line="${line//@UPSTREAM@/$upstream}"
      line="${line//@CERT@/$cert}"
      line="${line//@KEY@/$key}"
      printf '%s\n' "$line"
      ;;
  esac
done <"$template"
