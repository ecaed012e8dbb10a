#!/usr/bin/env python3
"""Warp-stall samples, instructions and stall reasons summed over regions of
a kernel's SASS (an ncu source page, as ncu_hot_lines.py reads it). A region
starts at the first line whose text holds its marker (searched in order,
each after the previous region's start) and ends where the next begins, so
a warp-specialised kernel's roles and phases can be told apart:

    python3 scripts/device/ncu_sass_regions.py page.csv \
        "aux=USETMAXREG.DEALLOC.CTAPOOL 0x58" "kk+A=BAR.SYNC.DEFER_BLOCKING 0x4" ...

Markers may repeat (a second "BAR.SYNC.DEFER_BLOCKING 0x4" starts the next
region at the next such line). Prints, per region: samples and their share,
warp instructions executed, and the five leading stall reasons.
"""
import argparse

from ncu_hot_lines import number, read_source_page


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("regions", nargs="+", help="NAME=MARKER, in SASS order")
    args = ap.parse_args()
    names, rows = read_source_page(args.page)
    if names is None:
        raise SystemExit("no SASS table in " + args.page)
    src = names.index("Source")
    samples = names.index("Warp Stall Sampling (All Samples)")
    executed = names.index("Instructions Executed")
    reasons = [i for i, n in enumerate(names) if n.startswith("stall_") and "Not Issued" not in n]
    starts, at = [], 0
    for spec in args.regions:
        name, marker = spec.split("=", 1)
        k = next((k for k in range(at, len(rows)) if marker in rows[k][src]), None)
        if k is None:
            raise SystemExit("marker not found after line %d: %s" % (at, marker))
        starts.append((name, k))
        at = k + 1
    total = sum(number(r[samples]) for r in rows) or 1.0
    print("total samples %d over %d SASS lines" % (total, len(rows)))
    bounds = [k for _, k in starts[1:]] + [len(rows)]
    for (name, a), b in zip(starts, bounds):
        part = rows[a:b]
        s = sum(number(r[samples]) for r in part)
        e = sum(number(r[executed]) for r in part)
        by = {}
        for r in part:
            for i in reasons:
                by[names[i][6:]] = by.get(names[i][6:], 0.0) + number(r[i])
        why = sum(by.values()) or 1.0
        top = ", ".join("%s %.0f%%" % (k, 100 * v / why)
                        for k, v in sorted(by.items(), key=lambda x: -x[1])[:5])
        print("%-16s lines %5d-%5d  samples %7d (%5.1f%%)  instructions %11d  %s"
              % (name, a, b - 1, s, 100 * s / total, e, top))


if __name__ == "__main__":
    main()
