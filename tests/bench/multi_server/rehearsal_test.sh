#!/usr/bin/env bash
# bench/multi_server/run.sh's CPU rehearsal, short (ctest bench_multi_server,
# labels bench and deploy): two cpu gdn-servers behind nginx, gdn-bench
# through the proxy for a few seconds, then the busiest drained mid-run. run.sh
# exits 0 only when every drain check passed (nothing lost); this test also
# checks that it wrote its three files with the figures in them.
# Usage: rehearsal_test.sh BUILD_DIR   (skipped, 77, without nginx)
set -euo pipefail
build_dir="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
if [ ! -x "$nginx_bin" ]; then
  echo "rehearsal_test: nginx not found (scripts/install_deps.sh): skipped"
  exit 77
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
bash "$root/bench/multi_server/run.sh" --servers=2 --placement=cpu --sessions_per_server=4 \
  --sessions_per_call=2 --warmup_s=0.5 --duration_s=3 --drain_duration_s=6 \
  --build_dir="$build_dir" --nginx_bin="$nginx_bin" --out="$out" >"$out/stdout.txt" 2>&1 || {
  cat "$out/stdout.txt"
  echo "rehearsal_test: FAIL: run.sh exited non-zero" >&2
  exit 1
}
for f in results.md summary.json files.tar.gz; do
  [ -s "$out/$f" ] || { echo "rehearsal_test: FAIL: no $f" >&2; exit 1; }
done
python3 - "$out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
run = s["runs"][0]
assert run["ok"] and run["servers"] == 2 and run["decode_tokens_per_s"] > 0, run
assert not run["errors"], run["errors"]
d = s["drain"]
assert d and all(d["checks"].values()), d["checks"]
print("rehearsal_test: N=2 %.0f decode tok/s; drain wrote %d, restored %d, %d left on file"
      % (run["decode_tokens_per_s"], d["written"], d["restored"], d["leftover_files"]))
PY
grep -q "## Drain hand-off at N = 2" "$out/results.md"
echo "rehearsal_test: passed"
