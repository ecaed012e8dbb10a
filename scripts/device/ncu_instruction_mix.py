#!/usr/bin/env python3
"""Where a kernel's issued instructions go, from an ncu source page
(`ncu -i REP --page source --csv --print-source sass > page.csv`): the warp
instructions executed in total, by opcode, and by straight-line region of the
SASS (a region ends at a branch or a branch target), the hottest regions with
their leading opcodes. Divided by a unit count (--per, e.g. the number of work
items) the totals read as instructions per item.

    python3 scripts/device/ncu_instruction_mix.py page.csv [--per N] [--top 30]
"""
import argparse
import collections
import re

from ncu_hot_lines import number, read_source_page


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--per", type=float, default=1.0, help="divide counts by this")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    cols, rows = read_source_page(args.page)
    if cols is None or "Instructions Executed" not in cols:
        print("no table with instruction counts in the source page")
        return
    addr, src = cols.index("Address"), cols.index("Source")
    execd = cols.index("Instructions Executed")
    body = [r for r in rows if len(r) > execd]
    total = sum(number(r[execd]) for r in body)
    print("warp instructions executed: %.3f M (%.1f per unit)" % (total / 1e6, total / args.per))

    def opcode(text):
        words = re.sub(r"^@!?U?P\w+\s+", "", text.strip()).split()
        return words[0].split(".")[0] if words else "?"

    by_op = collections.Counter()
    for r in body:
        by_op[opcode(r[src])] += number(r[execd])
    print("by opcode (per unit):")
    for op, n in by_op.most_common(args.top):
        print("  %-10s %9.1f  %5.1f%%" % (op, n / args.per, 100 * n / max(total, 1)))

    # Straight-line regions: split after a branch / barrier-like control
    # instruction and where the execution count changes.
    regions = []
    cur = None
    for r in body:
        n = number(r[execd])
        text = r[src].strip()
        if cur is None or n != cur["count"]:
            cur = {"start": r[addr], "count": n, "ops": [], "total": 0.0}
            regions.append(cur)
        cur["ops"].append(opcode(text))
        cur["total"] += n
        if re.search(r"\b(BRA|EXIT|RET|BAR|BSYNC|WARPSYNC)\b", text):
            cur = None
    print("hottest straight-line regions (start, executions per unit, "
          "instructions, share, opcodes):")
    for g in sorted(regions, key=lambda g: -g["total"])[:args.top]:
        mix = collections.Counter(g["ops"]).most_common(6)
        print("  %s  x%8.2f  %4d  %5.1f%%  %s" % (
            g["start"], g["count"] / args.per, len(g["ops"]), 100 * g["total"] / max(total, 1),
            " ".join("%s:%d" % kv for kv in mix)))


if __name__ == "__main__":
    main()
