#!/usr/bin/env python3
"""The SASS lines with the most warp-stall samples in an ncu source page
(`ncu -i REP --page source --csv --print-source sass > page.csv`), with each
line's top three stall reasons: what a profile visit prints to its log.

    python3 scripts/device/ncu_hot_lines.py page.csv [--top 40]
"""
import argparse
import csv


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read_source_page(path):
    """(column names, rows) of the page's SASS table; (None, []) without one."""
    rows = list(csv.reader(open(path, errors="replace")))
    head = next((i for i, r in enumerate(rows)
                 if any("Address" in c or "Source" in c for c in r)), None)
    if head is None:
        return None, []
    return rows[head], rows[head + 1:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    cols, rows = read_source_page(args.page)
    if cols is None:
        print("no table in the source page")
        return

    def col(*names):
        for n in names:
            for i, c in enumerate(cols):
                if n.lower() in c.lower():
                    return i
        return None

    samples = col("Warp Stall Sampling (All", "Sampling (All", "Stall Sampling")
    src, sass = col("Source Location", "File"), col("Source")
    print("columns:", " | ".join(cols[:40]))
    if samples is None:
        return
    body = [r for r in rows if len(r) > samples]
    total = sum(number(r[samples]) for r in body) or 1.0
    stall_cols = [i for i, c in enumerate(cols)
                  if c.lower().startswith("stall_") or "stall" in c.lower() and i != samples]
    print("total stall samples %d over %d SASS lines" % (total, len(body)))
    for r in sorted(body, key=lambda r: -number(r[samples]))[:args.top]:
        reasons = sorted(((number(r[i]), cols[i]) for i in stall_cols if i < len(r)),
                         reverse=True)[:3]
        print("%5.1f%%  %-40s  %-60s  %s" % (
            100 * number(r[samples]) / total,
            (r[src] if src is not None and src < len(r) else "")[-40:],
            (r[sass] if sass is not None and sass < len(r) else "")[:60],
            ", ".join("%s %d" % (n, v) for v, n in reasons if v)))


if __name__ == "__main__":
    main()
