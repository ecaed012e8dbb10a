#!/usr/bin/env bash
# The soak (issue 21): one command, knobs in the environment; writes
# OUT/summary.md and OUT/summary.json (pass/fail per check with numbers) and
# exits 0 only when every check passed. README.md says what is checked.
#
#   BIN_DIR       gdn-server and gdn-bench (default build/server, build/client/bench)
#   BACKEND       cpu (default; a small shape, light load) or cuda (the SLO
#                 search's shape and load: 36 layers, Hqk 16, Hv 32, K=V=128, bf16)
#   DURATION_S    seconds of load (default 150; the issue's soak is 1800)
#   WORKERS, SESSIONS, CALLS_PER_S, CHECK_LAYERS   the oracle-checked traffic
#   SLO_SESSIONS  the SLO search's best concurrency (default 384,
#                 bench/results/2026-12-01-request-path.md); LOAD_SESSIONS
#                 defaults to the multiple of LOAD_SPC nearest 80% of it
#   LOAD_SESSIONS, LOAD_SPC, LOAD_ARGS    gdn-bench's closed-loop load
#   SERVER_ARGS   gdn-server flags beyond listen / backend / snapshot_dir
#   WORK_DIR      the workers' exports and the --snapshot_dir (default OUT;
#                 on a GPU the drains write GBs: keep it out of OUT); removed
#                 at the end unless KEEP_WORK=1 (when it is not OUT)
#   TINY_BYTES    the size of the full snapshot dir's tmpfs
#   STATE_TOL, O_TOL  oracle bounds (max|x - ref| / max|ref|); cpu: the cpu
#                 backend tests' 1e-4 and the Python client tests' bf16 bound;
#                 cuda: 1e-2 both, tests/gpu/chunked_prefill_test.cc's bound
#   FULL_METHOD   auto (default), unshare, unshare-user or enotdir: how the
#                 full snapshot dir is made (README.md)
#   WORKER_KILL_EVERY_S, SOAK_ARGS (more soak.py flags: --min_fault_gap_s,
#                 --settle_timeout_s, --min_tail_s, --kill_during_recovery,
#                 --inject_fake_ack=ack,replay for the negative check), PYTHON, OUT
#   KEEP_FILES    1: leave the logs in OUT as well; by default OUT ends with
#                 summary.md, summary.json and soak-files.tar.gz (everything
#                 else: session logs, server / worker / load logs, epochs,
#                 status) and nothing more, so that a device run returns it all
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
BACKEND="${BACKEND:-cpu}"
PYTHON="${PYTHON:-python3}"
DURATION_S="${DURATION_S:-150}"
OUT="${OUT:-${TMPDIR:-/tmp}/gdn-soak-$(date +%Y%m%d-%H%M%S)}"
SERVER_BIN="${BIN_DIR:+$BIN_DIR/gdn-server}"; SERVER_BIN="${SERVER_BIN:-$root/build/server/gdn-server}"
BENCH_BIN="${BIN_DIR:+$BIN_DIR/gdn-bench}"; BENCH_BIN="${BENCH_BIN:-$root/build/client/bench/gdn-bench}"
if [[ "$BACKEND" == cuda ]]; then
  SERVER_ARGS="${SERVER_ARGS:-}"                  # the defaults: 36 layers, bf16, fp32 state
  LOAD_SPC="${LOAD_SPC:-32}"
  SLO_SESSIONS="${SLO_SESSIONS:-384}"
  LOAD_SESSIONS="${LOAD_SESSIONS:-$(( (SLO_SESSIONS * 8 / 10 + LOAD_SPC / 2) / LOAD_SPC * LOAD_SPC ))}"
  LOAD_ARGS="${LOAD_ARGS:---prefill_tokens=64 --decode_steps=64}"
  WORKERS="${WORKERS:-6}" SESSIONS="${SESSIONS:-24}" CALLS_PER_S="${CALLS_PER_S:-120}"
  CHECK_LAYERS="${CHECK_LAYERS:-0,35}"
  TINY_BYTES="${TINY_BYTES:-$((64 << 20))}"       # a few checked sessions fit, no load session
  STATE_TOL="${STATE_TOL:-1e-2}" O_TOL="${O_TOL:-1e-2}"
else
  # 2 cores shared with everything else: a small shape, a light load.
  SERVER_ARGS="${SERVER_ARGS:---layers=4 --qk_heads=2 --v_heads=4 --head_dim_k=64 --head_dim_v=64 --cpu_threads=1 --device_state_budget=256MiB --host_state_budget=64MiB}"
  LOAD_SPC="${LOAD_SPC:-1}"
  LOAD_SESSIONS="${LOAD_SESSIONS:-2}"
  LOAD_ARGS="${LOAD_ARGS:---prefill_tokens=32 --decode_steps=64 --think_ms=20}"
  WORKERS="${WORKERS:-2}" SESSIONS="${SESSIONS:-8}" CALLS_PER_S="${CALLS_PER_S:-40}"
  CHECK_LAYERS="${CHECK_LAYERS:-0,3}"
  TINY_BYTES="${TINY_BYTES:-262144}"
  STATE_TOL="${STATE_TOL:-1e-4}" O_TOL="${O_TOL:-0}"
fi
WORK_DIR="${WORK_DIR:-$OUT}"
mkdir -p "$OUT" "$WORK_DIR"
cd "$here"
rc=0
set -x
"$PYTHON" soak.py --work_dir="$WORK_DIR" --tiny_bytes="$TINY_BYTES" --full_method="${FULL_METHOD:-auto}" \
  --state_tol="$STATE_TOL" --o_tol="$O_TOL" --server_bin="$SERVER_BIN" --bench_bin="$BENCH_BIN" --backend="$BACKEND" \
  --server_args="$SERVER_ARGS" --out="$OUT" \
  --duration_s="$DURATION_S" --workers="$WORKERS" --sessions="$SESSIONS" \
  --calls_per_s="$CALLS_PER_S" --check_layers="$CHECK_LAYERS" \
  --load_sessions="$LOAD_SESSIONS" --load_args="--sessions_per_call=$LOAD_SPC $LOAD_ARGS" \
  --worker_kill_every_s="${WORKER_KILL_EVERY_S:-20}" ${SOAK_ARGS:-} || rc=$?
set +x
if [[ "$WORK_DIR" != "$OUT" && "${KEEP_WORK:-0}" != 1 ]]; then rm -rf "$WORK_DIR"; fi
# One tarball of everything but the summary (a device run returns few files).
( cd "$OUT" && files=$(ls -A | grep -v -x -e summary.md -e summary.json -e soak-files.tar.gz \
    -e ckpt -e snapshots -e snapshots-real -e probe-mnt || true) \
  && if [[ -n "$files" ]]; then
       tar czf soak-files.tar.gz $files \
       && if [[ "${KEEP_FILES:-0}" != 1 ]]; then rm -rf $files; fi
     fi ) || echo "soak: could not pack the logs in $OUT" >&2
ls -la "$OUT" >&2
exit $rc
