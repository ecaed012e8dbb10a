#!/usr/bin/env bash
# The single-GPU rehearsal of issue 23 on the device machine (one H200):
# 1, 2 and 4 gdn-servers all on device 0, the device state budget divided
# between them, behind nginx; gdn-bench at the default Qwen3-Next shape (36
# layers), then a drain at N = 4. About 2-3 minutes; results under $OUT.
# Needs .bundle from bench/multi_server/bundle.sh; run from the repository
# root:  run carry [".bundle"] command "bash bench/multi_server/device_rehearsal.sh"
# SERVERS (1,2,4), BUDGET_MIB (32768 in all) and SESSIONS (64 per server)
# override the defaults.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # B, LD_LIBRARY_PATH
export LD_LIBRARY_PATH=$PWD/.bundle/nginx/lib:$LD_LIBRARY_PATH
OUT=${OUT:-/tmp/gdn_out}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
exec timeout 540 bash bench/multi_server/run.sh --servers="${SERVERS:-1,2,4}" --placement=shared \
  --device=0 --state_budget_mib="${BUDGET_MIB:-32768}" --sessions_per_server="${SESSIONS:-64}" \
  --sessions_per_call=8 --prefill_tokens=16 --warmup_s=2 --duration_s=10 --drain_duration_s=15 \
  --bin_dir="$B" --nginx_bin="$PWD/.bundle/nginx/nginx" --out="$OUT" \
  -- --host_state_budget=2GiB --io_buffer_bytes=1GiB
