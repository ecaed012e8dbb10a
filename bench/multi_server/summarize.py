#!/usr/bin/env python3
"""bench/multi_server/run.sh's helper (standard library only).

  summarize.py scrape SERVERS_TSV DIR TAG
      each live server's /metrics into DIR/metrics-TAG-<index>.txt
  summarize.py busiest SERVERS_TSV DIR TAG
      prints the index of the server with the most decode tokens in those scrapes
  summarize.py report FILES_DIR OUT_DIR --command=... --commit=... [...]
      OUT_DIR/results.md and OUT_DIR/summary.json from what run.sh left in
      FILES_DIR: nN/bench.json (gdn-bench), nN/metrics-{before,after}-i.txt,
      nN/slo.json, drain/... (see run.sh). Exit 1 when a check failed.

Figures (gdn-bench's JSON report): aggregate decode throughput is
throughput.decode_tokens_per_s (output tokens/s over all sessions); the
P99 per layer call is latency_ms.decode.p99, per output token
latency_ms.decode_step.p99 (one decode step over every layer). The ratio
at N is throughput(N) / (N x throughput(1)); the P99 ratio P99(N) / P99(1).
"""
import argparse
import collections
import datetime
import json
import os
import re
import sys
import urllib.request

TARGET_THROUGHPUT_RATIO = 0.9  # issue 23: >= 0.9 x N x one server's
TARGET_P99_RATIO = 1.2         # P99 per layer call within 1.2x of one server's


def read_servers(tsv):
    rows = []
    with open(tsv) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            if line.strip():
                rows.append(dict(zip(header, line.rstrip("\n").split("\t"))))
    return rows


def scrape(args):
    os.makedirs(args.dir, exist_ok=True)
    for s in read_servers(args.tsv):
        try:
            with urllib.request.urlopen("http://%s/metrics" % s["metrics"], timeout=5) as r:
                text = r.read().decode()
        except OSError as e:  # a drained server is gone: nothing to scrape
            text = "# unreachable: %s\n" % e
        with open(os.path.join(args.dir, "metrics-%s-%s.txt" % (args.tag, s["index"])), "w") as f:
            f.write(text)


def busiest(args):
    """Prints the index of the server with the most decode tokens so far
    (the drain target: it surely holds sessions)."""
    best, best_tokens = 0, -1.0
    for s in read_servers(args.tsv):
        v = metric_sum(os.path.join(args.dir, "metrics-%s-%s.txt" % (args.tag, s["index"])),
                       "gdn_tokens_total", {"phase": "decode"}) or 0.0
        if v > best_tokens:
            best, best_tokens = int(s["index"]), v
    print(best)


def metric_sum(path, name, labels=None):
    """Sum of a counter's samples whose labels include `labels`; None if unreadable."""
    if not os.path.exists(path):
        return None
    total = 0.0
    with open(path) as f:
        text = f.read()
    if text.startswith("# unreachable"):
        return None
    for line in text.splitlines():
        m = re.match(r"^%s(\{[^}]*\})?\s+(\S+)" % re.escape(name), line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(have.get(k) == v for k, v in (labels or {}).items()):
            total += float(m.group(2))
    return total


def per_server_decode_tokens(run_dir, n):
    """Decode tokens each server processed during the run (after - before)."""
    shares = []
    for i in range(n):
        before = metric_sum(os.path.join(run_dir, "metrics-before-%d.txt" % i), "gdn_tokens_total",
                            {"phase": "decode"})
        after = metric_sum(os.path.join(run_dir, "metrics-after-%d.txt" % i), "gdn_tokens_total",
                           {"phase": "decode"})
        shares.append(None if before is None or after is None else after - before)
    return shares


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(x, digits=2):
    return "-" if x is None else ("%.*f" % (digits, x))


def bench_figures(r):
    lat, thr = r["latency_ms"], r["throughput"]
    errors = {k: int(v) for k, v in r.get("errors", {}).items() if int(v) > 0}
    return {
        "decode_tokens_per_s": thr["decode_tokens_per_s"],
        "token_layers_per_s": thr["token_layers_per_s"],
        "decode_call_p50_ms": lat["decode"]["p50"],
        "decode_call_p99_ms": lat["decode"]["p99"],
        "decode_step_p99_ms": lat["decode_step"]["p99"],
        "decode_calls": r["calls"]["decode"],
        "errors": errors,
        "retries": r.get("retries", {}),
        "stable": r.get("stability", {}).get("stable"),
        "client_utilization": r.get("client", {}).get("utilization"),
        "device": r.get("server", {}).get("device"),
    }


def drain_section(files, n):
    d = os.path.join(files, "drain")
    r = load_json(os.path.join(d, "bench.json"))
    res = {"servers": n, "checks": {}}
    try:
        target = int(open(os.path.join(d, "drained_index")).read())
    except (OSError, ValueError):
        target = 0
    res["drained_server"] = target
    log_path = os.path.join(d, "server%d.log" % target)
    log0 = open(log_path).read() if os.path.exists(log_path) else ""
    m = re.search(r"drain: wrote (\d+) session\(s\).*?; (\d+) failed", log0)
    written, failed = (int(m.group(1)), int(m.group(2))) if m else (None, None)
    res["written"], res["write_failed"] = written, failed
    res["stopped_cleanly"] = "gdn-server: stopped" in log0 and "are lost" not in log0
    restored = 0.0
    for i in (i for i in range(n) if i != target):
        v = metric_sum(os.path.join(d, "metrics-after-%d.txt" % i), "gdn_snapshot_sessions_restored_total")
        restored += v or 0.0
    res["restored"] = int(restored)
    try:
        res["leftover_files"] = int(open(os.path.join(d, "leftover_snapshots")).read().strip())
    except (OSError, ValueError):
        res["leftover_files"] = None
    try:
        t0 = float(open(os.path.join(d, "drain_started")).read())
        t1 = float(open(os.path.join(d, "drain_ended")).read())
        res["drain_s"] = t1 - t0
    except (OSError, ValueError):
        res["drain_s"] = None
    # Every call through the proxy answered OK or UNAVAILABLE (retried by
    # the client, not applied): the check of tests/deploy/affinity_test.sh.
    ok = unavailable = 0
    other = collections.Counter()
    access = os.path.join(d, "nginx-access.log")
    if os.path.exists(access):
        for line in open(access):
            hm = re.search(r'" (\d{3}) ', line)
            if not hm:
                continue
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            codes = {fields.get("grpc_status", "-"), fields.get("grpc_header_status", "-")} - {"-", ""}
            if codes == {"0"}:
                ok += 1
            elif codes == {"14"} or (not codes and hm.group(1) in ("502", "503", "504")):
                unavailable += 1
            else:
                other[",".join(sorted(codes)) or "http " + hm.group(1)] += 1
    res["proxy_calls"] = {"ok": ok, "unavailable": unavailable, "other": dict(other)}
    if r is not None:
        res["bench"] = bench_figures(r)
        res["sessions"] = r.get("sessions", {})
    c = res["checks"]
    c["drained server stopped cleanly (exit 0, nothing lost in its drain)"] = bool(
        res["stopped_cleanly"] and failed == 0)
    c["it handed sessions over (wrote >= 1)"] = bool(written)
    c["every written session restored on another server or still on file"] = (
        written is not None and res["leftover_files"] is not None
        and res["restored"] + res["leftover_files"] == written)
    c["gdn-bench: no errors through the drain (lost state would be NOT_FOUND / FAILED_PRECONDITION)"] = (
        r is not None and not res["bench"]["errors"])
    c["every call through the proxy answered OK or UNAVAILABLE (none lost)"] = ok > 0 and not other
    return res


def report(args):
    files = args.files
    ns = [int(x) for x in args.servers.split(",") if x]
    runs = []
    for n in ns:
        r = load_json(os.path.join(files, "n%d" % n, "bench.json"))
        row = {"servers": n, "ok": r is not None}
        if r is not None:
            row.update(bench_figures(r))
            row["per_server_decode_tokens"] = per_server_decode_tokens(os.path.join(files, "n%d" % n), n)
        slo = load_json(os.path.join(files, "n%d" % n, "slo.json"))
        if slo is not None and "slo" in slo:
            row["slo"] = {k: slo["slo"].get(k) for k in ("phase", "p99_ms", "best_load", "converged", "goodput")}
        runs.append(row)
    base = next((r for r in runs if r["servers"] == 1 and r["ok"]), None)
    for row in runs:
        if base and row["ok"] and base["decode_tokens_per_s"] > 0:
            row["throughput_ratio"] = row["decode_tokens_per_s"] / (row["servers"] * base["decode_tokens_per_s"])
            row["p99_call_ratio"] = row["decode_call_p99_ms"] / base["decode_call_p99_ms"]
    drain = drain_section(files, args.drain_n) if args.drain_n >= 2 else None
    summary = {"command": args.command, "commit": args.commit, "host": args.host,
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "placement": args.placement, "runs": runs, "drain": drain}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(markdown(summary, args, files))
    failed = drain is not None and not all(drain["checks"].values())
    failed = failed or not all(r["ok"] for r in runs)
    print(open(os.path.join(args.out, "results.md")).read())
    return 1 if failed else 0


def markdown(s, args, files):
    out = []
    w = out.append
    w("# Several gdn-servers behind the affinity proxy (bench/multi_server)\n")
    w("- date: %s; commit: %s" % (s["date"], s["commit"]))
    w("- host: %s; placement: `%s` (%s)" % (s["host"], s["placement"], {
        "per_device": "server i on CUDA device i",
        "shared": "every server on one device, the state budget divided",
        "cpu": "cpu backend, every server on the same cores"}[s["placement"]]))
    w("- load: closed loop through nginx, %s sessions per server, decode-heavy; gdn-server flags: `%s`"
      % (args.sessions_per_server, args.server_flags))
    if args.note:
        w("- note: %s" % args.note)
    w("- command: `%s`\n" % s["command"])
    w("Aggregate decode throughput against N x one server's (target >= %.1f), P99 per layer call "
      "against one server's (target <= %.1fx), P99 per output token (one decode step over every "
      "layer); `share` is each server's part of the decode tokens (from its /metrics):\n"
      % (TARGET_THROUGHPUT_RATIO, TARGET_P99_RATIO))
    w("| N | decode tok/s | / (N x one) | call P50 ms | call P99 ms | P99 / one | token P99 ms | errors | share | stable |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in s["runs"]:
        if not r["ok"]:
            w("| %d | (no report) | | | | | | | | |" % r["servers"])
            continue
        shares = r.get("per_server_decode_tokens") or []
        total = sum(x for x in shares if x) or 0
        share = " / ".join("-" if x is None else "%.0f%%" % (100 * x / total) if total else "-" for x in shares)
        w("| %d | %.1f | %s | %.3f | %.3f | %s | %.2f | %s | %s | %s |" % (
            r["servers"], r["decode_tokens_per_s"], fmt(r.get("throughput_ratio")),
            r["decode_call_p50_ms"], r["decode_call_p99_ms"], fmt(r.get("p99_call_ratio")),
            r["decode_step_p99_ms"], sum(r["errors"].values()), share,
            {True: "yes", False: "UNSTABLE", None: "-"}[r["stable"]]))
    if any("slo" in r for r in s["runs"]):
        w("\nSLO search (highest concurrency whose P99 per output token meets the objective):\n")
        w("| N | objective ms | sessions | converged | goodput tok/s |")
        w("| --- | --- | --- | --- | --- |")
        for r in s["runs"]:
            if "slo" in r:
                g = r["slo"].get("goodput") or {}
                w("| %d | %s | %s | %s | %s |" % (r["servers"], r["slo"]["p99_ms"], r["slo"]["best_load"],
                                                r["slo"]["converged"], fmt(g.get("tokens_per_s"), 1)))
    d = s["drain"]
    if d:
        w("\n## Drain hand-off at N = %d\n" % d["servers"])
        w("Server %d (the one with the most decode tokens so far) got SIGTERM a third of the way "
          "into the run (shared `--snapshot_dir`); its " % d["drained_server"])
        w(
          "sessions' next calls were answered UNAVAILABLE, retried by gdn-bench through nginx, "
          "which sent them to the next server on the ring, where each session was restored from "
          "its file.\n")
        b = d.get("bench") or {}
        w("- drain took %s s; the drained server wrote %s session(s), %s failed; restored on the others: %s; "
          "files left (sessions not called since): %s" % (fmt(d["drain_s"]), d["written"],
                                                             d["write_failed"], d["restored"],
                                                             d["leftover_files"]))
        w("- gdn-bench: %s decode calls, errors %s, retried tries %s, call P99 %s ms, token P99 %s ms"
          % (b.get("decode_calls"), b.get("errors") or "none", b.get("retries") or "none",
             fmt(b.get("decode_call_p99_ms"), 3), fmt(b.get("decode_step_p99_ms"))))
        p = d["proxy_calls"]
        w("- calls through the proxy: %d OK, %d UNAVAILABLE (retried), other: %s\n"
          % (p["ok"], p["unavailable"], p["other"] or "none"))
        w("| check | result |")
        w("| --- | --- |")
        for name, ok in d["checks"].items():
            w("| %s | %s |" % (name, "pass" if ok else "**FAIL**"))
    commands = os.path.join(files, "commands.txt")
    if os.path.exists(commands):
        w("\n## Commands run\n")
        w("```")
        out.extend(line.rstrip("\n") for line in open(commands))
        w("```")
    w("\nEvery gdn-bench report, /metrics scrape, server and nginx log: `files.tar.gz`.")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="what", required=True)
    for what in ("scrape", "busiest"):
        s = sub.add_parser(what)
        s.add_argument("tsv")
        s.add_argument("dir")
        s.add_argument("tag")
    r = sub.add_parser("report")
    r.add_argument("files")
    r.add_argument("out")
    for name in ("command", "commit", "host", "placement", "servers", "sessions_per_server",
                 "server_flags", "note"):
        r.add_argument("--" + name, default="")
    r.add_argument("--drain_n", type=int, default=0)
    args = p.parse_args()
    if args.what in ("scrape", "busiest"):
        (scrape if args.what == "scrape" else busiest)(args)
        return 0
    return report(args)


if __name__ == "__main__":
    sys.exit(main())
