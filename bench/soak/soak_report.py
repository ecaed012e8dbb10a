"""summary.json and summary.md of a soak run: one pass/fail line per check
with its numbers (README.md: what each check means)."""

import json
import os
import re
import statistics
from collections import Counter

from soak_common import read_log, session_id


def go_seconds(text):
    """A Go duration ("1m0.28s", "232.938us", "170.8ms") in seconds, or None."""
    if not text:
        return None
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "ns": 1e-9}
    total, found = 0.0, False
    for value, unit in re.findall(r"([0-9.]+)(h|ms|us|\u00b5s|ns|m|s)", text):
        total += float(value) * units[unit]
        found = True
    return round(total, 6) if found else None


def _outcomes(logs, epoch, sids):
    """Per session, what its worker found on the server of `epoch`: lost (NOT_FOUND),
    found (every layer where the log says), violation, or unseen."""
    out = {}
    for sid in sids:
        kinds = [r for r in logs[sid]["records"] if r.get("ep") == epoch]
        if any(r["e"] == "violation" for r in kinds):
            out[sid] = "violation"
        elif any(r["e"] == "lost" for r in kinds):
            out[sid] = "lost"
        elif any(r["e"] == "check" for r in kinds):
            out[sid] = "found"
        else:
            out[sid] = "unseen"
    return out


def _fault_checks(d, logs):
    """One check per fault, judged on the sessions that were caught up on the
    server it ended (the driver's settle barrier), with what the workers saw
    on the next server once it had settled."""
    checks = []
    settles = {s["epoch"]: s for s in d.settles}
    for f in d.faults:
        settle = settles.get(f["epoch"], {})
        judged = f["judged"]
        outcome = _outcomes(logs, f["epoch"], judged)
        count = Counter(outcome.values())
        lost = sorted(s for s, o in outcome.items() if o == "lost")
        unobserved = settle.get("unobserved", ["(no settle record)"])
        info = {"epoch": f["epoch"], "nominal_s": f["nominal_s"], "fired_s": f["fired_s"],
                "late_s": f["late_s"], "rc": f["rc"], "stop_s": f["stop_s"],
                "settle_s": settle.get("settle_s"), "judged": len(judged),
                "not_judged": f["not_judged"], "outcomes": dict(count),
                "unobserved_after_restart": unobserved}
        settled_ok = not settle.get("timed_out", True) and count["unseen"] == 0
        fair = bool(judged)  # a check on no session checks nothing
        if f["how"] == "sigkill":
            name = "server SIGKILL + restart"
            ok = fair and f["rc"] == -9 and count["violation"] == 0 and settled_ok
            contract = ("nothing written; a session comes back only from an older drain's file, "
                        "then exactly at its acked position; else NOT_FOUND and the client "
                        "re-imports its own export and replays its acked calls")
        else:
            ours = {s for s in f["lost_ids"] if s.startswith("soak-")}
            info.update(said_lost=f["said_lost"], named_lost=len(f["lost_ids"]),
                        wrote=f["wrote"], failed=f["failed"], drain_time=f["drain_time"],
                        drain_s=go_seconds(f["drain_time"]), drain_bytes=f["drain_bytes"],
                        checked_named_lost=len(ours))
            if f.get("full_dir"):
                name = "full snapshot dir (%s) + SIGTERM" % f["full_dir"]
                ok = (fair and f["rc"] == 3 and f["said_lost"] > 0
                      and f["said_lost"] == len(f["lost_ids"]) == f["failed"]
                      and set(lost) == ours & set(judged) and count["violation"] == 0
                      and settled_ok)
                if set(lost) != ours & set(judged):
                    info["lost_not_named"] = sorted(set(lost) - ours)
                    info["named_not_lost"] = sorted((ours & set(judged)) - set(lost))
                contract = ("exit status 3 naming every session not written; exactly those are "
                            "NOT_FOUND after the restart, every written one is back exactly")
            else:
                name = "server SIGTERM drain + restart"
                ok = (fair and f["rc"] == 0 and f["failed"] == 0 and not lost
                      and count["violation"] == 0 and settled_ok)
                contract = ("exit 0, every session that was caught up on the drained server "
                            "restored at exactly its acked positions")
        checks.append({"check": name, "ok": ok, "contract": contract, **info})
    not_run = getattr(d, "not_run", [])
    checks.append({"check": "every scheduled server fault ran", "ok": not not_run,
                   "ran": [f["name"] for f in d.faults],
                   "not_run": [(x["name"], x["why"]) for x in not_run],
                   "contract": "each fault fires at its nominal time or, when the previous "
                               "one has not settled yet, once it has and --min_fault_gap_s "
                               "passed; one that no longer fits before the tail is not fired"})
    return checks


def _observations(d):
    """Numbers worth a note that no check judges."""
    notes = []
    for f in d.faults:
        if f.get("full_dir") and f.get("failed"):
            drain_s = go_seconds(f["drain_time"])
            notes.append("full snapshot dir drain: %s s for %d sessions written and %d failed "
                         "(%s), %.3f s per failed session; the driver waited %s s for the "
                         "server to stop%s" % (drain_s, f["wrote"] or 0, f["failed"],
                                               f.get("full_dir"),
                                               (drain_s or 0) / max(f["failed"], 1), f["stop_s"],
                                               " (of which %s s SIGSTOPped by "
                                               "--stall_full_drain_s)" % f["stalled_s"]
                                               if f.get("stalled_s") else ""))
        if f["late_s"] > 1:
            notes.append("%s fired %.1f s after its nominal %.1f s (waiting for the previous "
                         "restart to settle + %s s gap)" % (f["name"], f["late_s"],
                                                           f["nominal_s"],
                                                           d.a.min_fault_gap_s))
    for s in d.settles:
        notes.append("server %d: every session seen caught up %s s after its start%s" % (
            s["epoch"], s.get("settle_s"),
            "; never seen: %s" % s["unobserved"] if s.get("unobserved") else ""))
    return notes


def _flat(samples, key, tol):
    """The last incarnation's samples: the first third is warm-up; the median
    of the last third within tol of the middle third's."""
    if not samples:
        return None
    last = [s for s in samples if s["epoch"] == samples[-1]["epoch"] and s[key] is not None]
    if len(last) < 9:
        return {"ok": False, "why": "%d samples in the last incarnation (< 9)" % len(last)}
    third = len(last) // 3
    middle = statistics.median(s[key] for s in last[third:2 * third])
    end = statistics.median(s[key] for s in last[2 * third:])
    growth = (end - middle) / max(middle, 1)
    return {"ok": growth <= tol, "middle": middle, "last": end, "growth": round(growth, 4),
            "tol": tol, "samples": len(last), "span_s": [last[0]["t"], last[-1]["t"]],
            "max": max(s[key] for s in last)}


def _load(d):
    runs = []
    for run in d.load_runs:
        try:
            with open(run["json"]) as f:
                r = json.load(f)
        except (OSError, ValueError):
            runs.append({"started_s": run["t"], "report": "missing"})
            continue
        runs.append({"started_s": run["t"], "elapsed_s": r.get("elapsed_s"),
                     "throughput": r.get("throughput"), "errors": r.get("errors"),
                     "retries": r.get("retries")})
    return runs


def write(d, final):
    a = d.a
    layers = [int(x) for x in a.check_layers.split(",")]
    logs = {session_id(i): read_log(os.path.join(d.out, "logs", session_id(i) + ".jsonl"), layers)
            for i in range(a.sessions)}
    records = [r for st in logs.values() for r in st["records"]]
    violations = [r for r in records if r["e"] == "violation"]
    acks = Counter(r["how"] for r in records if r["e"] == "ack")
    takeovers = Counter(v for r in records if r["e"] == "check" and r["reason"] == "takeover"
                        for v in r["verdicts"])
    recovering = sum(1 for r in records if r["e"] == "check" and r.get("recovering")
                     and r["reason"].startswith("takeover"))
    restarted = sum(1 for r in records if r["e"] == "lost" and "recovering" in r["reason"])
    kills = sum(1 for e in d.events if e["kind"] == "worker_sigkill")
    kills_in_recovery = sum(1 for e in d.events if e["kind"] == "worker_sigkill"
                            and e.get("mid_recovery"))
    crashed = [e for e in d.events if e["kind"] == "worker_crashed"]
    final_stop = [e for e in d.events if e["kind"] == "server_final_sigterm"][-1]
    bad = [r for r in final if not r["ok"]]
    checks = _fault_checks(d, logs)
    checks.append({"check": "client kill -9 mid-stream + takeover",
                   "ok": kills > 0 and not any("takeover" in r["what"] for r in violations),
        "contract": "server position == acked, or acked + the one dangling call (resent: "
                    "applied once either way); mid-recovery: == the replay's progress, or + "
                    "the one dangling replay call, then the replay goes on",
        "kills": kills, "kills_during_recovery": kills_in_recovery,
        "takeovers_mid_recovery": recovering, "recoveries_restarted_before_import": restarted,
        "takeover_verdicts": dict(takeovers)})
    checks.append({"check": "no lost acknowledged call", "ok": not violations and not any(
        r.get("broken") for r in final), "violations": [r["what"] for r in violations][:20],
        "acks_by_kind": dict(acks)})
    checks.append({"check": "oracle: every session's state and next o", "ok": not bad,
                   "sessions": len(final), "failed": [(r["sid"], r["problems"]) for r in bad][:20],
                   "max_state_err": max((r.get("state_err", 0) for r in final), default=0),
                   "max_o_err": max((r.get("o_err", 0) for r in final), default=0),
                   "state_tol": a.state_tol, "o_tol": a.o_tol or "tests",
                   "acked_tokens": sum(r.get("tokens", 0) for r in final)})
    rss = _flat(d.samples, "rss_kib", a.rss_tol)
    checks.append({"check": "server RSS flat (last incarnation)", "ok": bool(rss and rss["ok"]),
                   **(rss or {})})
    if any(s["gpu_mib"] for s in d.samples):
        gpu = _flat(d.samples, "gpu_mib", a.rss_tol)
        checks.append({"check": "device memory flat (last incarnation; nvidia-smi, else "
                                "gdn_device_memory_used_bytes)", "ok": gpu["ok"], **gpu})
    checks.append({"check": "no worker crashed", "ok": not crashed,
                   "crashes": [(e["worker"], e["rc"]) for e in crashed]})
    checks.append({"check": "final SIGTERM drain", "ok": final_stop["rc"] == 0 and
                   final_stop["failed"] == 0, "rc": final_stop["rc"], "wrote": final_stop["wrote"],
                   "drain_time": final_stop["drain_time"]})
    summary = {"passed": all(c["ok"] for c in checks), "checks": checks,
               "observations": _observations(d), "faults": d.faults, "settles": d.settles,
               "injected_fake_acks": d.injected,
               "config": {k: v for k, v in vars(a).items()}, "full_dir_method": d.full_method,
               "load": _load(d), "events": d.events, "samples": d.samples}
    with open(os.path.join(d.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(d.out, "summary.md"), "w") as f:
        f.write(_markdown(summary))
    print(_markdown(summary))
    return summary["passed"]


def _markdown(s):
    c = s["config"]
    lines = ["# Soak: %s" % ("PASS" if s["passed"] else "FAIL"), "",
             "%s s, backend %s, %d checked sessions (layers %s) on %d workers at %s calls/s, "
             "load: gdn-bench --sessions=%d %s; server flags: `%s`" % (
                 c["duration_s"], c["backend"], c["sessions"], c["check_layers"], c["workers"],
                 c["calls_per_s"], c["load_sessions"], c["load_args"], c["server_args"]), "",
             "| check | result | numbers |", "| --- | --- | --- |"]
    for ch in s["checks"]:
        numbers = ", ".join("%s=%s" % (k, json.dumps(v)) for k, v in ch.items()
                            if k not in ("check", "ok", "contract"))
        lines.append("| %s | %s | %s |" % (ch["check"], "pass" if ch["ok"] else "**FAIL**",
                                            numbers.replace("|", "/")))
    if s.get("injected_fake_acks"):
        lines += ["", "**Negative check**: fake acks injected (the run must FAIL): %s"
                  % json.dumps(s["injected_fake_acks"])]
    lines += ["", "Observations:", ""]
    lines += ["- %s" % n for n in s.get("observations", [])]
    lines += ["", "Contracts checked:", ""]
    lines += ["- %s: %s" % (ch["check"], ch["contract"]) for ch in s["checks"] if "contract" in ch]
    lines += ["", "Load (gdn-bench runs):", ""]
    for run in s["load"]:
        lines.append("- %s" % json.dumps(run))
    lines += ["", "Events:", ""]
    lines += ["- %6.1f s  %s %s" % (e["t"], e["kind"], json.dumps(
        {k: v for k, v in e.items() if k not in ("t", "kind", "lost_ids")})) for e in s["events"]]
    return "\n".join(lines) + "\n"
