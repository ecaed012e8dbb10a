#!/usr/bin/env bash
# Runs gdn-server with its embedded defaults (building it first if needed).
# Flags go to gdn-server, e.g. scripts/serve.sh --backend=cpu --listen=0.0.0.0:50051
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GDN_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" >&2
exec "$build/server/gdn-server" "$@"
