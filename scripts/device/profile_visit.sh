#!/usr/bin/env bash
# One short device visit: Nsight Compute on the chunked prefill's two kernels
# (bench/prefill/profile_kernels.py) at the rows that miss FLA, the details
# page (occupancy, warp stalls, memory) and the hottest SASS lines by stall
# samples, into $OUT. Bundle here with
#   BUILD=build bash scripts/device/bundle.sh gdn_capi
# (and the FLA wheels in .whl, as bench/prefill/run_device.sh says)
# then run carry [".bundle", ".whl"] command "bash scripts/device/profile_visit.sh".
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gdn_out}
WORK=/tmp/gdn_profile
mkdir -p "$WORK"
B=/tmp/gdn_bundle/bin
rm -rf /tmp/gdn_bundle && cp -r .bundle /tmp/gdn_bundle
if [ -f /tmp/gdn_bundle/pack.tar.xz ]; then
  python3 -c "import tarfile; tarfile.open('/tmp/gdn_bundle/pack.tar.xz').extractall('/tmp/gdn_bundle')"
fi
export LD_LIBRARY_PATH=/tmp/gdn_bundle/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
ROWS=${ROWS:-16/32/1/32768,2/8/1/32768}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$WORK/gpu.txt"
timeout 400 ncu --profile-from-start off --clock-control none --set full \
  --import-source no -k 'regex:ChunkPrep|StateChain|OutputPass' -o "$WORK/prefill" -f \
  python3 bench/prefill/profile_kernels.py --capi "$B/libgdn_capi.so" --rows "$ROWS" \
  > "$WORK/ncu.log" 2>&1
echo "== ncu rc=$?"
tail -5 "$WORK/ncu.log"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl >/dev/null 2>&1 \
  && PYTHONPATH=/tmp/site timeout 150 python3 bench/prefill/profile_kernels.py --capi "$B/libgdn_capi.so" \
  --rows "16/32/1/32768,16/64/1/32768,2/8/1/32768" --fla > "$WORK/fla_kernels.txt" 2>&1
echo "== fla kernel tables rc=$?"
cat "$WORK/fla_kernels.txt" | grep -v Warning | head -80
ncu -i "$WORK/prefill.ncu-rep" --page details > "$WORK/details.txt" 2>&1
ncu -i "$WORK/prefill.ncu-rep" --page source --csv --print-source sass > "$WORK/sass.csv" 2>&1
python3 - "$WORK/sass.csv" > "$WORK/hot_sass.txt" <<'EOF'
# The 40 SASS lines of each kernel with the most warp-stall samples.
import csv, sys
blocks, cur = [], []
for line in open(sys.argv[1]):
    first = next(csv.reader([line]), [""])
    if first and "Address" in first[0]:
        if cur:
            blocks.append(cur)
        cur = [line]
    elif cur:
        cur.append(line)
if cur:
    blocks.append(cur)
for b in blocks:
    r = list(csv.reader(b))
    head, body = r[0], r[1:]
    col = next((i for i, h in enumerate(head) if h.startswith("Warp Stall Sampling (All")), None)
    if col is None:
        print("no stall column in", head[:8]); continue
    def num(x):
        try: return float(x)
        except ValueError: return 0.0
    total = sum(num(x[col]) for x in body if len(x) > col)
    print(f"--- block of {len(body)} SASS lines, {total:.0f} samples; columns: {head[:6]}")
    for x in sorted(body, key=lambda x: -num(x[col]) if len(x) > col else 0)[:40]:
        print(f"{num(x[col]):8.0f} {100*num(x[col])/max(total,1):5.1f}% | " + " | ".join(x[:3]))
EOF
grep -E "(Context [0-9]|Duration|Achieved Occupancy|Theoretical Occupancy|Registers|Shared Memory Configuration|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Warp Cycles Per Issued|Issued Ipc|No Eligible|Block Limit)" "$WORK/details.txt" | head -120
head -c 3000 "$WORK/hot_sass.txt"
cp "$WORK/details.txt" "$WORK/hot_sass.txt" "$WORK/gpu.txt" "$OUT/" 2>/dev/null
tar -czf "$OUT/profile.tar.gz" -C "$WORK" details.txt hot_sass.txt ncu.log gpu.txt sass.csv fla_kernels.txt
ls -la "$OUT"
