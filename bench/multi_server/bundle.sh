#!/usr/bin/env bash
# Bundles what bench/multi_server/device_rehearsal.sh needs on the device
# machine, which has no nginx: the CUDA gdn-server and gdn-bench
# (scripts/device/bundle.sh, into .bundle/) and this host's nginx with the
# shared libraries it needs (into .bundle/nginx/, apart from bin/ and lib/,
# which a packed bundle replaces when it is unpacked).
#   BUILD=build-cuda bash bench/multi_server/bundle.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/device/bundle.sh gdn-server gdn-bench
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
mkdir -p .bundle/nginx/lib
cp "$nginx_bin" .bundle/nginx/nginx
bash scripts/device/copy_runtime_libs.sh .bundle/nginx/lib "$nginx_bin"
du -sh .bundle/nginx
