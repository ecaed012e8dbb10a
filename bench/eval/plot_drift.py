#!/usr/bin/env python3
"""PNG plots of a gdn-state-drift run (drift.csv), one per compressed dtype:

  drift_int8.png, drift_fp8.png   o error (rel_l2 against the float64 recurrence,
                                  mean over each recorded window) against the
                                  decode step, one panel per gating, the fp32 and
                                  bf16 states drawn as references

    python3 bench/eval/plot_drift.py DRIFT_DIR [--out DIR]
"""
import argparse
import collections
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = args.out or args.dir
    series = collections.defaultdict(list)  # (gating, variant) -> [(step, err)]
    dtypes = {}
    with open(os.path.join(args.dir, "drift.csv")) as f:
        for row in csv.DictReader(f):
            key = (row["gating"], row["variant"])
            series[key].append((int(row["step"]), float(row["o_rel_l2_window"])))
            dtypes[row["variant"]] = row["dtype"]
    gatings = sorted({g for g, _ in series})
    for dtype in ("int8", "fp8"):
        variants = [v for v in dtypes if dtypes[v] == dtype]
        if not variants:
            continue
        fig, axes = plt.subplots(1, len(gatings), figsize=(7 * len(gatings), 5), squeeze=False)
        for ax, gating in zip(axes[0], gatings):
            for v in ["fp32", "bf16"] + sorted(variants):
                points = series.get((gating, v))
                if not points:
                    continue
                steps, errs = zip(*points)
                style = "--" if v in ("fp32", "bf16") else "-"
                ax.plot(steps, [max(e, 1e-12) for e in errs], style, label=v)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("decode step")
            ax.set_ylabel("o rel_l2 vs float64 (window mean)")
            ax.set_title(f"{dtype} state, {gating} gating")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out, f"drift_{dtype}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print("wrote", path)


if __name__ == "__main__":
    main()
