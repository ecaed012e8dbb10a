#!/usr/bin/env python3
"""PNG plots of a gdn-eval report (report.json), next to it or in --out:

  time_vs_length.png    prefill P50 time per call against length, per series
  scaling.png           scaling efficiency (time ratio / length ratio) per length step
  memory_vs_length.png  peak backend memory over baseline against length
  decode_batch.png      decode time per call and tokens/s against batch
  error_vs_step.png     long decode chains: output error against the oracle over steps

    python3 bench/eval/plot_eval.py REPORT_DIR [--out DIR]
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def ok(row):
    return row.get("status", {}).get("outcome") == "ok"


def series_key(row):
    return f"D={row['head_dim']} {row['input_dtype']}/{row['state_dtype']} B={row['batch']}"


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)
    print("wrote", path)


def plot_time_and_memory(report, out, title):
    rows = [r for r in report["performance"]["prefill"] if ok(r)]
    groups = {}
    for r in rows:
        groups.setdefault(series_key(r), []).append(r)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, rs in sorted(groups.items()):
        rs.sort(key=lambda r: r["length"])
        ax.plot([r["length"] for r in rs], [r["time_s"]["p50"] * 1e3 for r in rs], marker="o", label=key)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per sequence (L)")
    ax.set_ylabel("prefill P50 time per call (ms)")
    ax.set_title(f"Prefill time vs length ({title})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    save(fig, os.path.join(out, "time_vs_length.png"))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, rs in sorted(groups.items()):
        rs.sort(key=lambda r: r["length"])
        ax.plot([r["length"] for r in rs], [r["memory"]["peak_over_baseline_bytes"] / 2**20 for r in rs],
                marker="o", label=key)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per sequence (L)")
    ax.set_ylabel("peak backend memory over baseline (MiB)")
    ax.set_title(f"Memory vs length ({title})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    save(fig, os.path.join(out, "memory_vs_length.png"))


def plot_scaling(report, out, title):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in report["performance"]["scaling"]:
        if not s["steps"]:
            continue
        ax.plot([st["to_length"] for st in s["steps"]], [st["efficiency"] for st in s["steps"]], marker="o",
                label=series_key(s))
    ax.axhline(1.0, color="k", lw=1, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("length after the step")
    ax.set_ylabel("time ratio / length ratio (1 = linear)")
    ax.set_title(f"Scaling efficiency ({title})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    save(fig, os.path.join(out, "scaling.png"))


def plot_decode(report, out, title):
    rows = [r for r in report["performance"]["decode"] if ok(r)]
    groups = {}
    for r in rows:
        groups.setdefault(f"D={r['head_dim']} {r['input_dtype']}/{r['state_dtype']}", []).append(r)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for key, rs in sorted(groups.items()):
        rs.sort(key=lambda r: r["batch"])
        a1.plot([r["batch"] for r in rs], [r["time_s"]["p50"] * 1e6 for r in rs], marker="o", label=key)
        a2.plot([r["batch"] for r in rs], [r["tokens_per_s"] for r in rs], marker="o", label=key)
    for ax, label in ((a1, "P50 time per decode call (us)"), (a2, "tokens/s")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch (sequences per call)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    a1.legend(fontsize=6)
    fig.suptitle(f"Decode vs batch ({title})")
    save(fig, os.path.join(out, "decode_batch.png"))


def plot_error_vs_step(report, out, title):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for ch in report["stability"]["decode_chains"]:
        if not ok(ch):
            continue
        pts = ch["checkpoints"]
        steps = [p["step"] for p in pts]
        ax.plot(steps, [p["error_vs_oracle"]["max_abs_rel"] for p in pts], marker="o",
                label=f"{ch['state_dtype']} state, max_abs_rel")
        ax.plot(steps, [p["error_vs_oracle"]["rel_l2"] for p in pts], marker="x", ls=":",
                label=f"{ch['state_dtype']} state, rel_l2")
        ax.axhline(ch["threshold"]["max_abs_rel"], ls="--", lw=1, color="gray")
        ax.axhline(ch["threshold"]["rel_l2"], ls=":", lw=1, color="gray")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("decode step")
    ax.set_ylabel("output error vs float64 oracle")
    ax.set_title(f"Long decode chain: error vs step ({title})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, os.path.join(out, "error_vs_step.png"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report_dir")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    with open(os.path.join(args.report_dir, "report.json")) as f:
        report = json.load(f)
    out = args.out or args.report_dir
    os.makedirs(out, exist_ok=True)
    env = report["environment"]
    title = f"{env['backend']}, {env['grid']} grid"
    if "performance" in report:
        plot_time_and_memory(report, out, title)
        plot_scaling(report, out, title)
        plot_decode(report, out, title)
    if "stability" in report:
        plot_error_vs_step(report, out, title)


if __name__ == "__main__":
    main()
