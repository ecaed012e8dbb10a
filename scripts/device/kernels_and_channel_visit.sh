#!/usr/bin/env bash
# One device visit for new kernels and the same-host channel (issues 18, 19,
# 22), every part optional by what the bundle holds, cheapest and most
# informative first; each part prints into $OUT/visit.log as it goes:
#  1. hopper_primitives_visit.sh (TMA, mbarrier, wgmma against the CPU),
#     when any of tma_test, wgmma_layout_test, wgmma_test,
#     warp_specialised_pipeline_test is bundled;
#  2. tprep_visit.sh (the v8 prefill's T'' / P preparation against float64),
#     when tprep_test is bundled, fused_chunk_visit.sh (v8 step 2, the fused
#     kernel against float64 and v7) when fused_chunk_test is bundled, and
#     chunked_prefill_test (v7) when bundled;
#  3. cuda_regions_test (CheckValues), when bundled;
#  4. prefill_state_bench: the long rows by state dtype (issue 19's
#     prefill within 5% of fp32), when bundled (PREFILL_ROWS);
#  5. bench/regions/run.sh, the CUDA IPC channel arm only, ROUNDS times
#     (issue 18's decode 1 / 32 / 256 x 1 and prefill 1 x 4096), when
#     gdn-server and gdn-bench are bundled;
#  6. channel_visit.sh's d256 step: decode 256 x 1 through the channel split
#     by the server's own metrics (queue, kernel), fp32 and no-compute;
#  7. bench/request_path/run.sh, decode 1 / 32 x 1 over TCP (issue 16's
#     engine overhead: no-compute ÷ the same run's protobuf echo), when
#     gdn-echo and gdn-min-client are bundled too;
#  8. decode_shapes_visit.sh: candidate decode block shapes (SHAPE_ARMS, each
#     a directory of the bundle with its decode_bench and
#     recurrent_kernel_test; `before` holds the current decode_bench)
#     against the current ones, SHAPE_STATES at batches 32 / 128 / 256.
# PARTS="primitives tprep regions prefill channel d256 engine shapes" (default: all).
# The device returns at most 8 files: visit.log (everything the parts print)
# and parts.tgz (their own files).
#   here:   BUILD=build-cuda bash scripts/device/bundle.sh <targets>
#   device: run carry [".bundle"] command "bash scripts/device/kernels_and_channel_visit.sh"
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gdn_out}
mkdir -p "$OUT"
LOG=$OUT/visit.log
PARTS_DIR=/tmp/visit_parts  # the parts' own files, packed into $OUT/parts.tgz
rm -rf "$PARTS_DIR" && mkdir -p "$PARTS_DIR"
t0=$(date +%s)
say() { echo "== $* ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG"; }
# shellcheck disable=SC1091  # sourced from the repository root
. scripts/device/unpack_bundle.sh  # BUNDLE, B, LD_LIBRARY_PATH
PARTS=${PARTS:-"primitives tprep regions prefill channel d256 engine shapes"}
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  cat .bundle/COMMIT; echo "nsys: $(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null || echo none)"; } 2>&1 | tee -a "$LOG"

hopper_bundled() {  # any of the Hopper primitives tests
  local t
  for t in tma_test wgmma_layout_test wgmma_test warp_specialised_pipeline_test; do
    [ -x "$B/$t" ] && return 0
  done
  return 1
}
if part primitives && hopper_bundled; then
  say "hopper primitives"
  OUT=$PARTS_DIR/primitives bash scripts/device/hopper_primitives_visit.sh >> "$LOG" 2>&1
fi

if part tprep && [ -x "$B/tprep_test" ]; then
  say "tprep"
  OUT=$PARTS_DIR/tprep bash scripts/device/tprep_visit.sh >> "$LOG" 2>&1
fi
# v8 step 2: the fused kernel, form P, against float64 and v7, with timings.
if part tprep && [ -x "$B/fused_chunk_test" ]; then
  say "fused_chunk"
  OUT=$PARTS_DIR/fused_chunk bash scripts/device/fused_chunk_visit.sh >> "$LOG" 2>&1
fi
# The v7 chunked prefill (its chunk table moved to chunked/chunk_table.cuh).
if part tprep && [ -x "$B/chunked_prefill_test" ]; then
  say "chunked_prefill_test"
  timeout 150 "$B/chunked_prefill_test" > "$PARTS_DIR/chunked_prefill_test.log" 2>&1
  echo "rc $?" | tee -a "$LOG"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" "$PARTS_DIR/chunked_prefill_test.log" \
    | head -20 | tee -a "$LOG"
fi

if part regions && [ -x "$B/cuda_regions_test" ]; then
  say "cuda_regions_test"
  timeout 90 "$B/cuda_regions_test" > /tmp/cuda_regions_test.log 2>&1
  echo "rc $?" | tee -a "$LOG"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|Expected|Which" /tmp/cuda_regions_test.log \
    | head -20 | tee -a "$LOG"
fi

if part prefill && [ -x "$B/prefill_state_bench" ]; then
  say "prefill_state_bench"
  timeout 240 "$B/prefill_state_bench" --rows="${PREFILL_ROWS:-16/32/4/8192,16/32/1/32768}" \
    --calls=10 --md="$PARTS_DIR/prefill_state.md" > "$PARTS_DIR/prefill_state.log" 2>&1
  echo "rc $?" | tee -a "$LOG"
  tee -a "$LOG" < "$PARTS_DIR/prefill_state.md" 2>/dev/null
fi

if part channel && [ -x "$B/gdn-server" ] && [ -x "$B/gdn-bench" ]; then
  for round in $(seq "${ROUNDS:-3}"); do
    say "regions: cuda_ipc_channel, round $round"
    BIN=$B BACKEND=cuda ARMS="cuda_ipc_channel" ARMS_SET=1 ARM_S=${ARM_S:-2} \
      SHAPES=${SHAPES:-"decode1 decode32 decode256 prefill4096"} \
      bash bench/regions/run.sh "$PARTS_DIR/channel_$round" >> "$LOG" 2>&1
  done
fi
if part d256 && [ -x "$B/gdn-server" ] && [ -x "$B/gdn-bench" ]; then
  say "d256 split"
  STEPS=d256 D256_ARMS=${D256_ARMS:-"fp32 no_compute"} PERF_D256=0 OUT=$PARTS_DIR/d256 \
    bash scripts/device/channel_visit.sh >> "$LOG" 2>&1
fi
if part engine && [ -x "$B/gdn-echo" ] && [ -x "$B/gdn-min-client" ]; then
  say "request path: engine overhead"
  BIN=$B BACKEND=cuda SHAPES="decode1 decode32" TRANSPORTS=tcp ARM_S=2 BEFORE=0 CLIENT_COST=0 \
    timeout 200 bash bench/request_path/run.sh "$PARTS_DIR/request_path" >> "$LOG" 2>&1
  grep -E "^\| decode|overhead" "$PARTS_DIR/request_path/results.md" 2>/dev/null | tee -a "$LOG"
fi
if part shapes && [ -n "${SHAPE_ARMS:-}" ] && [ -x "$BUNDLE/before/decode_bench" ]; then
  say "decode shapes: $SHAPE_ARMS"
  ARMS=$SHAPE_ARMS STATES=${SHAPE_STATES:-bf16} BATCHES=32,128,256 OUT=$PARTS_DIR/shapes \
    bash scripts/device/decode_shapes_visit.sh >> "$LOG" 2>&1
fi
tar -czf "$OUT/parts.tgz" -C "$PARTS_DIR" .
say "done"
