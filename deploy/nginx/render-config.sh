#!/usr/bin/env bash
# Renders gdn-affinity.conf.in to stdout.
# Usage: deploy/nginx/render-config.sh LISTEN RUN_DIR SERVER [SERVER...]
#   LISTEN   what nginx listens on (127.0.0.1:8080, 0.0.0.0:50051, ...)
#   RUN_DIR  absolute directory for pid, logs and temp files (must exist)
#   SERVER   HOST:PORT of each gdn-server (gRPC)
# Then: nginx -t -p RUN_DIR -c FILE; nginx -p RUN_DIR -c FILE -g 'daemon off;'
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,7p' "$0" >&2
  exit 2
fi
listen="$1"
run_dir="$2"
shift 2
case "$run_dir" in
  /*) ;;
  *) echo "render-config: RUN_DIR must be absolute: $run_dir" >&2; exit 2 ;;
esac
servers=""
for s in "$@"; do
  servers+="    server ${s} max_fails=1 fail_timeout=10s;\n"
done
template="$(dirname "${BASH_SOURCE[0]}")/gdn-affinity.conf.in"
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in
    @UPSTREAM_SERVERS@) printf '%b' "$servers" ;;
    *)
      line="${line//@LISTEN@/$listen}"
      line="${line//@RUN_DIR@/$run_dir}"
      printf '%s\n' "$line"
      ;;
  esac
done <"$template"
