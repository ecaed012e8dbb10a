#!/usr/bin/env python3
"""Plots a gdn-bench sweep (or SLO search) report: latency percentiles and
throughput against load.

    python3 client/bench/plot_report.py sweep.json out.png [--phase decode]

Reads the JSON that `gdn-bench --sweep=... --json_out=sweep.json` writes
(README.md in this folder) and draws two panels: the phase's P50 / P90 / P99
latency (ms, log scale) and the throughput (tokens/s and Forward calls/s)
against the sweep's load. Needs matplotlib (python3 -m pip install matplotlib).
"""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="gdn-bench sweep JSON")
    parser.add_argument("png", help="output PNG")
    parser.add_argument("--phase", default="decode",
                        help="latency to plot: decode, prefill, ttfo, decode_step, ...")
    args = parser.parse_args()

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_report.py needs matplotlib: python3 -m pip install matplotlib")

    with open(args.report) as f:
        report = json.load(f)
    if "sweep" not in report:
        sys.exit(f"{args.report}: not a sweep report (run gdn-bench with --sweep or --slo_p99_ms)")
    kind = report["sweep"]["kind"]
    points = sorted(report["sweep"]["points"], key=lambda p: p["load"])
    if not points:
        sys.exit(f"{args.report}: the sweep has no points")
    loads = [p["report"]["config"]["sessions"] if kind == "concurrency" else p["load"]
             for p in points]
    latency = [p["report"]["latency_ms"][args.phase] for p in points]
    throughput = [p["report"]["throughput"] for p in points]
    server = points[0]["report"]["server"]
    config = points[0]["report"]["config"]

    fig, (ax_lat, ax_tput) = plt.subplots(1, 2, figsize=(10, 4), dpi=90)
    for key, style in (("p50", "o-"), ("p90", "s--"), ("p99", "^-")):
        ax_lat.plot(loads, [l[key] for l in latency], style, label=key.upper())
    ax_lat.set_yscale("log")
    ax_lat.set_xlabel("concurrent sessions" if kind == "concurrency" else "sessions / s")
    ax_lat.set_ylabel(f"{args.phase} latency (ms)")
    ax_lat.grid(True, which="both", alpha=0.3)
    if "slo" in report:
        ax_lat.axhline(report["slo"]["p99_ms"], color="red", linestyle=":",
                       label=f"SLO P99 {report['slo']['p99_ms']:g} ms")
    ax_lat.legend()

    ax_tput.plot(loads, [t["tokens_per_s"] for t in throughput], "o-", label="tokens/s")
    ax_tput.set_xlabel(ax_lat.get_xlabel())
    ax_tput.set_ylabel("tokens / s")
    ax_tput.grid(True, alpha=0.3)
    ax_calls = ax_tput.twinx()
    ax_calls.plot(loads, [t["calls_per_s"] for t in throughput], "s--", color="tab:orange",
                  label="Forward calls/s")
    ax_calls.set_ylabel("Forward calls / s")
    lines = ax_tput.get_lines() + ax_calls.get_lines()
    ax_tput.legend(lines, [l.get_label() for l in lines], loc="upper left")
    if kind == "concurrency":
        for ax in (ax_lat, ax_tput):
            ax.set_xscale("log", base=2)

    fig.suptitle(f"gdn-bench: {server['backend']} ({server['device']}), "
                 f"{config['layers']} layers, prefill {config['prefill_tokens']}, "
                 f"decode {config['decode_steps']}, {config['sessions_per_call']}/call",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(args.png)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
