#!/usr/bin/env python3
"""scripts/device/ncu_sass_regions.py on a small source page in ncu's CSV
form: regions start at their markers in order (a repeated marker starts the
next region at its next line), samples, instructions and stall reasons sum
per region, and a marker that is not there fails with a message.

    python3 tests/scripts/ncu_sass_regions_test.py scripts/device/ncu_sass_regions.py
"""
import csv
import io
import os
import subprocess
import sys
import tempfile

COLUMNS = ["Address", "Source", "Warp Stall Sampling (All Samples)",
           "Instructions Executed", "stall_barrier", "stall_barrier (Not Issued)",
           "stall_short_sb"]
# (source, samples, instructions, barrier, short scoreboard)
LINES = [
    ("USETMAXREG.DEALLOC.CTAPOOL 0x58", 1, 10, 0, 0),
    ("LDS.128 R4, [R2]", 9, 10, 0, 9),
    ("BAR.SYNC.DEFER_BLOCKING 0x4, 0x80", 30, 10, 30, 0),
    ("FFMA R1, R2, R3, R1", 10, 20, 0, 10),
    ("BAR.SYNC.DEFER_BLOCKING 0x4, 0x80", 40, 10, 40, 0),
    ("EXIT", 10, 5, 0, 0),
]


def page():
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(["Kernel Name", "void Kernel(int)"])
    w.writerow(COLUMNS)
    for k, (src, s, e, bar, ssb) in enumerate(LINES):
        w.writerow(["0x%x" % (16 * k), "      " + src, s, e, bar, bar, ssb])
    return out.getvalue()


def run(script, path, *regions):
    return subprocess.run([sys.executable, script, path, *regions], capture_output=True,
                          text=True)


def main():
    script = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "page.csv")
        with open(path, "w") as f:
            f.write(page())
        r = run(script, path, "aux=USETMAXREG.DEALLOC.CTAPOOL 0x58",
                "first=BAR.SYNC.DEFER_BLOCKING 0x4", "second=BAR.SYNC.DEFER_BLOCKING 0x4")
        assert r.returncode == 0, r.stderr
        rows = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
        assert r.stdout.startswith("total samples 100 over 6 SASS lines"), r.stdout
        # aux: lines 0-1; first: 2-3; second: 4-5 (to the end).
        assert "lines     0-    1  samples      10 ( 10.0%)  instructions          20" in rows["aux"], rows
        assert "short_sb 100%" in rows["aux"], rows["aux"]
        assert "lines     2-    3  samples      40 ( 40.0%)  instructions          30" in rows["first"], rows
        assert "barrier 75%, short_sb 25%" in rows["first"], rows["first"]
        assert "lines     4-    5  samples      50 ( 50.0%)" in rows["second"], rows
        bad = run(script, path, "aux=USETMAXREG.DEALLOC.CTAPOOL 0x58", "gone=HGMMA")
        assert bad.returncode != 0 and "marker not found" in bad.stderr, bad
    print("ncu_sass_regions_test: ok")


if __name__ == "__main__":
    main()
