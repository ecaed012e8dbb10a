#!/usr/bin/env python3
"""Turns run.sh's per-arm JSON (listed in OUT/manifest.tsv) into OUT/results.md
(a table of P50 / P99 per arm, the ratios the targets name, the commands, the
commit and the date) and OUT/results.json.

    python3 bench/request_path/summarize.py OUT
"""
import json
import os
import sys

SHAPE_NAMES = {"decode1": "decode 1 x 1", "decode32": "decode 32 x 1",
               "decode256": "decode 256 x 1", "prefill2048": "prefill 1 x 2048"}
# Targets (issue "the request path at the transport's limit").
ENGINE = {"shapes": ["decode1", "decode32"], "p50": 1.15, "p99": 1.5}
TRANSPORT = {"shapes": ["decode32", "decode256", "prefill2048"], "p50": 0.6}
CLIENT_COST = 1.10


def phase(shape):
    return "prefill" if shape.startswith("prefill") else "decode"


def load(out):
    arms = {}  # (shape, transport) -> arm -> figures
    costs = {}  # shape -> client_cost.sh's result
    with open(os.path.join(out, "manifest.tsv")) as f:
        for line in f:
            shape, transport, arm, tool, path = line.rstrip("\n").split("\t")
            row = arms.setdefault((shape, transport), {})
            if tool == "cost":
                with open(path) as j:
                    costs[shape] = json.load(j)
                continue
            if tool == "na":
                row[arm] = {"na": path}
                continue
            with open(path) as j:
                d = json.load(j)
            if tool == "min":
                lat = d["latency"]
                row[arm] = {"p50": lat["p50_us"], "p99": lat["p99_us"], "n": lat["count"]}
            else:
                c = d["compare_echo"]["calls"].get(phase(shape))
                if c is None:
                    row[arm] = {"na": "no %s calls" % phase(shape)}
                    continue
                row[arm] = {"p50": c["server"]["p50_ms"] * 1e3, "p99": c["server"]["p99_ms"] * 1e3,
                            "n": c["server"]["count"],
                            "echo": {"p50": c["echo"]["p50_ms"] * 1e3, "p99": c["echo"]["p99_ms"] * 1e3,
                                     "n": c["echo"]["count"]},
                            "p50_ratio": c["p50_ratio"], "p99_ratio": c["p99_ratio"],
                            "stability": d["stability"]["verdict"]}
    return arms, costs


def fig(a):
    if a is None:
        return "-"
    if "na" in a:
        return "n/a"
    return "%.0f / %.0f" % (a["p50"], a["p99"])


def ratio(a, b, key="p50"):
    if not a or not b or "na" in a or "na" in b or not b[key]:
        return None
    return a[key] / b[key]


def fmt(r, limit=None):
    if r is None:
        return "-"
    s = "%.2f" % r
    if limit is not None:
        s += " ok" if r <= limit else " MISS"
    return s


def main(out):
    arms, costs = load(out)
    meta = open(os.path.join(out, "meta.txt")).read().strip().splitlines()
    commands = open(os.path.join(out, "commands.txt")).read().strip()
    cores = next((int(l.split()[2]) for l in meta if l.startswith("host ")), 0)
    order = ["tcp", "tcp-stream", "unix", "unix-stream", "before"]
    keys = sorted(arms, key=lambda k: (list(SHAPE_NAMES).index(k[0]) if k[0] in SHAPE_NAMES else 9,
                                      order.index(k[1]) if k[1] in order else 9))
    lines = ["# Request path: one Forward call, server vs echo", ""]
    lines += ["    " + l for l in meta]
    lines.append("")
    if cores and cores <= 4:
        lines.append("**Shared %d-core VM**: other work runs on the same cores, so every figure is noisy "
                     "(read ratios of arms measured in the same run, in alternating turns)." % cores)
        lines.append("")
    lines += [
        "Latency of one Forward call in microseconds, P50 / P99. *echo proto*: gdn-echo --mode=proto "
        "(protobuf parses and serializes); *echo raw*: --mode=raw (scanned and encoded in place); "
        "*server*: gdn-server. Every gdn-bench arm ran with --compare_echo against the proto echo; "
        "its ratios are to that same-run echo. *min client*: gdn-min-client, one request built once. "
        "*before*: every end at gRPC's default transport settings. *-stream*: gdn-bench --transport=stream, "
        "one ForwardStream per lane against the server and both echoes alike (raw bytes on the client).",
        "",
        "| shape | transport | echo proto | echo raw | raw ÷ proto P50 | min client proto | min client raw "
        "| gdn-bench ÷ min client P50 (raw; not interleaved) | server no-compute | ÷ proto echo P50 / P99 "
        "| server kernels | ÷ proto echo P50 / P99 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    summary = []
    for key in keys:
        shape, transport = key
        row = arms[key]
        raw = row.get("echo_raw")
        proto = raw.get("echo") if raw and "na" not in raw else None
        nc, k = row.get("server_no_compute"), row.get("server_kernels")
        r = {"shape": shape, "transport": transport, "echo_proto": proto, "echo_raw": raw,
             "min_proto": row.get("min_proto"), "min_raw": row.get("min_raw"),
             "server_no_compute": nc, "server_kernels": k,
             "raw_over_proto_p50": ratio(raw, proto),
             "bench_over_min_raw_p50": ratio(raw, row.get("min_raw")),
             "bench_over_min_proto_p50": ratio(proto, row.get("min_proto"))}
        summary.append(r)
        pair = lambda a: "-" if not a or "na" in a else "%s / %s" % (fmt(a["p50_ratio"]), fmt(a["p99_ratio"]))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            SHAPE_NAMES.get(shape, shape), transport, fig(proto), fig(raw), fmt(r["raw_over_proto_p50"]),
            fig(row.get("min_proto")), fig(row.get("min_raw")),
            fmt(r["bench_over_min_raw_p50"], CLIENT_COST), fig(nc), pair(nc), fig(k), pair(k)))
    na = [(k, a, v["na"]) for k, row in arms.items() for a, v in row.items() if "na" in v]
    if na:
        lines.append("")
        for (shape, transport), arm, why in sorted(set(na)):
            lines.append("- n/a %s %s %s: %s" % (shape, transport, arm, why or "did not start"))
    lines += ["", "## Targets", ""]
    for shape in ENGINE["shapes"]:
        for tcp, name in (("tcp", "TCP"), ("tcp-stream", "TCP stream")):
            a = arms.get((shape, tcp), {}).get("server_no_compute")
            if a and "na" not in a:
                lines.append("- engine overhead, %s, %s: no-compute ÷ proto echo P50 %s (<= %.2f), P99 %s (<= %.2f)" % (
                    SHAPE_NAMES[shape], name, fmt(a["p50_ratio"], ENGINE["p50"]), ENGINE["p50"],
                    fmt(a["p99_ratio"], ENGINE["p99"]), ENGINE["p99"]))
    for shape in TRANSPORT["shapes"]:
        for tcp, unix, name in (("tcp", "unix", ""), ("tcp-stream", "unix-stream", " (stream)")):
            a = arms.get((shape, tcp), {}).get("server_no_compute")
            u = arms.get((shape, unix), {}).get("server_no_compute")
            if a and "na" not in a:
                lines.append("- transport%s, %s: no-compute ÷ proto echo P50, TCP %s (<= %.2f); Unix socket %s" % (
                    name, SHAPE_NAMES[shape], fmt(a["p50_ratio"], TRANSPORT["p50"]), TRANSPORT["p50"],
                    fmt(u["p50_ratio"]) if u and "na" not in u else "n/a"))
    for shape, c in sorted(costs.items(), key=lambda kv: list(SHAPE_NAMES).index(kv[0])):
        med = c["median"]
        lines.append("- client cost, %s, TCP, client_cost.sh (%d alternating turns on the raw echo): gdn-bench "
                     "÷ gdn-min-client P50 %s (<= %.2f), P99 %s; P50 %.0f / %.0f us; client CPU a call "
                     "%.1f / %.1f us (ratio %s)" % (
                         SHAPE_NAMES[shape], len(c["turns"]), fmt(c["p50_ratio"], CLIENT_COST), CLIENT_COST,
                         fmt(c["p99_ratio"]), med[0], med[2], med[4], med[5], fmt(c["cpu_ratio"])))
    for r in summary:
        if r["bench_over_min_raw_p50"] is not None:
            lines.append("- (indicative, not interleaved) %s, %s: gdn-bench ÷ gdn-min-client P50 on the raw echo "
                         "%s (<= %.2f), on the proto echo %s" % (SHAPE_NAMES.get(r["shape"], r["shape"]), r["transport"],
                                                   fmt(r["bench_over_min_raw_p50"], CLIENT_COST), CLIENT_COST,
                                                   fmt(r["bench_over_min_proto_p50"])))
    lines += ["", "## Commands", "", "```", commands, "```", ""]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "rows": summary}, f, indent=1)
    print("\n".join(lines[:len(lines)]))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/request_path")
