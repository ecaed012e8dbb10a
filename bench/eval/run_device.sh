#!/usr/bin/env bash
# The one device command of the gdn-eval GPU report (run from the repo root
# there, carrying .bundle and .whl; bench/eval/bundle.sh fills .bundle/eval):
#   1. gdn-eval --grid=full --backend=cuda  -> $OUT/eval/report.{json,md}
#      with GPU utilisation sampled by nvidia-smi (NVML) meanwhile;
#   2. gpu_baselines.py: ours / FLA / PyTorch SDPA -> $OUT/eval/baselines.*
#   3. plot_eval.py when matplotlib is there (else plot here afterwards).
# Budgets (seconds) fit one 10-minute call: EVAL_BUDGET_S (default 380) and
# BASELINE_BUDGET_S (150; 0 skips gpu_baselines.py). SECTIONS (default all)
# is gdn-eval's --sections and EVAL_ARGS more gdn-eval flags (e.g.
# --lengths=131072), so the full grid can take several calls:
#   SECTIONS=correctness EVAL_BUDGET_S=500 BASELINE_BUDGET_S=0
#   SECTIONS=performance EVAL_BUDGET_S=500 BASELINE_BUDGET_S=0
#   SECTIONS=baselines,stability EVAL_BUDGET_S=280 BASELINE_BUDGET_S=200
# At most 8 files come back from a device call: everything is also packed
# into $OUT/eval.tar.gz (report.md stays beside it).
set -uo pipefail
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT/eval"
b=.bundle/eval
export LD_LIBRARY_PATH="$PWD/$b/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/eval/gpu.txt"
nvcc --version 2>/dev/null | tail -2 >> "$OUT/eval/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl >/dev/null 2>&1 \
  && export PYTHONPATH=/tmp/site
commit="$(cat "$b/COMMIT" 2>/dev/null || echo unknown)"

nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used \
  --format=csv -lms 500 > "$OUT/eval/gpu_util.csv" 2>/dev/null &
smi_pid=$!
timeout "$(( ${EVAL_BUDGET_S:-380} + 60 ))" "$b/bin/gdn-eval" --grid=full --backend=cuda \
  --sections="${SECTIONS:-all}" --out_dir="$OUT/eval" --commit="$commit" \
  --time_budget_s="${EVAL_BUDGET_S:-380}" ${EVAL_ARGS:-} > "$OUT/eval/eval.log" 2>&1
rc_eval=$?
kill "$smi_pid" 2>/dev/null
tail -5 "$OUT/eval/eval.log"

rc_base=skipped
if [ "${BASELINE_BUDGET_S:-150}" -gt 0 ]; then
  timeout "$(( ${BASELINE_BUDGET_S:-150} + 60 ))" python3 bench/eval/gpu_baselines.py --out "$OUT/eval" \
    --capi "$b/lib/libgdn_capi.so" --budget-s "${BASELINE_BUDGET_S:-150}" > "$OUT/eval/baselines.log" 2>&1
  rc_base=$?
  tail -30 "$OUT/eval/baselines.log"
fi
python3 bench/eval/plot_eval.py "$OUT/eval" > /dev/null 2>&1 || echo "plots: run plot_eval.py here"
grep -E "All pass|Memory back|Ceilings" "$OUT/eval/report.md" 2>/dev/null
echo "gdn-eval rc=$rc_eval gpu_baselines rc=$rc_base"
tar -czf "$OUT/eval.tar.gz" -C "$OUT" eval && cp "$OUT/eval/report.md" "$OUT/" 2>/dev/null
rm -rf "$OUT/eval"  # only the archive and report.md come back
