#!/usr/bin/env python3
"""The chunked prefill's generation router on FlashQLA's H200 rows: per row the
routed call (gdn_chunked_prefill_tuned state_variant -1, what gdn_prefill and
the server run), v7 forced (7), v8 forced (8; refused rows say why), on
one-sequence rows v8's span path (9 planned, 900 + P with --span-counts), and
flash-linear-attention's chunk_gated_delta_rule when it imports; then each
generation's errors against the float64 reference (compare_fla.reference) on
rows whose longest sequence is at most --ref-len tokens (the reference steps
token by token). A light cut of compare_fla.py's benchmark
(whose helpers it uses) for a short device visit (prefill_route_visit.sh).

  python3 route_bench.py --capi libgdn_capi.so --out $OUT [--rows 0,1] [--budget-s 150]

Writes prefill_route.json and prints one line per row:
  ROUTE 16/32 4x8192 units 128 routed 0.83 v7 1.63 v8 0.83 fla 1.93 pick v8 | err ...
"pick" is the generation whose time the routed call matches (the router's
choice as seen from outside: the nearest of v7 / v8 / the planned spans).
"""
import argparse
import json
import os
import time

import torch

import compare_fla as cf

# (Hqk, Hv, N, L): FlashQLA's H200 table (shared/GDN.md), in priority order.
# Rows 5-9: the threshold's neighbourhood (sequences x value heads from 16 to 64 units).
ROUTE_ROWS = [(16, 32, 4, 8192), (16, 32, 8, 1024), (16, 64, 8, 4096), (16, 32, 1, 32768),
              (2, 8, 1, 32768), (16, 32, 2, 8192), (16, 32, 1, 8192), (8, 16, 1, 32768),
              (16, 32, 2, 2048), (16, 32, 1, 2048),
              # single sequences near the span path's shortest (3 spans of 16 chunks)
              (16, 32, 1, 4096), (2, 8, 1, 4096), (8, 16, 1, 8192), (2, 8, 1, 8192),
              (16, 32, 1, 16384)]


def arms(N, span_counts):
    """(name, state_variant) per arm: the router, v7, v8; on one sequence also
    v8's span path, planned and at each of span_counts spans."""
    out = [("routed", cf.gdn_capi.CHUNKED_ROUTED), ("v7", cf.gdn_capi.CHUNKED_V7),
           ("v8", cf.gdn_capi.CHUNKED_V8)]
    if N == 1:
        out.append(("spans", cf.gdn_capi.CHUNKED_V8_SPANS))
        out += [(f"spans{c}", cf.gdn_capi.CHUNKED_V8_SPANS_OF + c) for c in span_counts]
    return out


def route_row(ours, fla_fn, hqk, hv, N, L, ref_len, deadline, span_counts=()):
    p = cf.Problem(hqk, hv, 128, 128, [L] * N, seed=7)
    row = {"Hqk": hqk, "Hv": hv, "N": N, "L": L, "units": N * hv,
           "published": cf.PUBLISHED.get((hqk, hv, N, L))}
    call = ours.prepare(p, pages_out=[N + i for i in range(N)])
    outs = {}
    for name, state in arms(N, span_counts):
        try:
            # NaN outputs first, so an arm that wrote nothing cannot show the
            # previous arm's o and final state as its own.
            call.o.fill_(float("nan"))
            call.pool[torch.tensor(call.pages_out, device="cuda", dtype=torch.long)] = float("nan")
            ours.call(call, state=state)  # first call: grows the workspace
            torch.cuda.synchronize()
            final = call.pool[torch.tensor(call.pages_out, device="cuda", dtype=torch.long)]
            outs[name] = (call.o.float().clone(), final.float().clone())
            row[f"{name}_ms"], row[f"{name}_min_ms"], _ = cf.time_ms(
                lambda: ours.call(call, state=state), max_s=0.2, max_reps=15)
        except RuntimeError as e:
            row[f"{name}_error"] = str(e)[:200]
    # How far the span arms' outputs are from v8's (elements that differ):
    # under decay the start state's rounding fades, so few or none may.
    for name in outs:
        if name.startswith("spans") and "v8" in outs:
            row[f"{name}_o_differ_v8"] = int((outs[name][0] != outs["v8"][0]).sum().item())
            row[f"{name}_S_differ_v8"] = int((outs[name][1] != outs["v8"][1]).sum().item())
    timed = [g for g in ("v7", "v8", "spans") if f"{g}_ms" in row]
    if timed and "routed_ms" in row:
        row["pick"] = min(timed, key=lambda g: abs(row[f"{g}_ms"] - row["routed_ms"]))
    if fla_fn is not None and time.time() < deadline - 20:
        try:
            h0 = p.h0.float().clone()
            t_warm = time.time()
            cf.fla_run(fla_fn, p, h0)  # autotunes on a new shape
            torch.cuda.synchronize()
            row["fla_warmup_s"] = time.time() - t_warm
            row["fla_ms"], _, _ = cf.time_ms(lambda: cf.fla_run(fla_fn, p, h0), max_s=0.2,
                                             max_reps=10)
        except Exception as e:  # noqa: BLE001
            row["fla_error"] = str(e)[:200]
    if L <= ref_len and time.time() < deadline - 15:
        ro, rS = cf.reference(p)
        for name, (o, S) in outs.items():
            row[f"{name}_o"], row[f"{name}_state"] = cf.errors(o, ro), cf.errors(S, rS)
        del ro, rS
    del p, call, outs
    torch.cuda.empty_cache()
    return row


def fmt(row):
    def t(key):
        v = row.get(key)
        return f"{v:.3f}" if v is not None else "-"

    names = [k[:-3] for k in row
             if k.endswith("_ms") and not k.endswith("_min_ms") and k != "fla_ms"]
    errs = " ".join(f"{g} o/S {row[g + '_o']['max_rel']:.1e}/{row[g + '_state']['max_rel']:.1e}"
                    for g in names if g + "_o" in row)
    refused = "".join(f" ({k[:-6]} refused: {row[k][:80]})" for k in row
                      if k.endswith("_error") and k != "fla_error")
    spans = "".join(f" {g} {t(g + '_ms')}" for g in names if g.startswith("spans"))
    return (f"ROUTE {row['Hqk']}/{row['Hv']} {row['N']}x{row['L']} units {row['units']} "
            f"routed {t('routed_ms')} v7 {t('v7_ms')} v8 {t('v8_ms')}{spans} fla {t('fla_ms')} "
            f"published FLA/FlashInfer/FlashQLA {row['published']} pick {row.get('pick', '-')}"
            f"{refused} | {errs}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--capi", required=True, help="libgdn_capi.so")
    ap.add_argument("--out", default=".")
    ap.add_argument("--rows", default="", help="comma-separated ROUTE_ROWS indices (default all)")
    ap.add_argument("--budget-s", type=float, default=150)
    ap.add_argument("--ref-len", type=int, default=8192,
                    help="float64 reference on rows whose sequences are at most this long")
    ap.add_argument("--no-fla", action="store_true")
    ap.add_argument("--span-counts", default="3,5,9",
                    help="v8 span-path arms at these span counts (one-sequence rows), besides "
                         "the planned one; empty: none")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(torch.cuda.get_device_name(0), torch.__version__, flush=True)
    ours = cf.Ours(args.capi)
    fla_fn = None
    if not args.no_fla:
        try:
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_fn
        except Exception as e:  # noqa: BLE001
            print("FLA not importable:", e, flush=True)
    deadline = time.time() + args.budget_s
    ids = set(int(x) for x in args.rows.split(",")) if args.rows else None
    rows = []
    for idx, (hqk, hv, N, L) in enumerate(ROUTE_ROWS):
        if ids is not None and idx not in ids:
            continue
        if time.time() > deadline:
            print(f"ROUTE {hqk}/{hv} {N}x{L} skipped (budget)", flush=True)
            continue
        try:
            span_counts = [int(x) for x in args.span_counts.split(",") if x]
            row = route_row(ours, fla_fn, hqk, hv, N, L, args.ref_len, deadline, span_counts)
        except Exception as e:  # noqa: BLE001 (one failing row does not hide the rest)
            row = {"Hqk": hqk, "Hv": hv, "N": N, "L": L, "error": str(e)[:300]}
            print(f"ROUTE {hqk}/{hv} {N}x{L} failed: {e}", flush=True)
        else:
            print(fmt(row), flush=True)
        rows.append(row)
        with open(os.path.join(args.out, "prefill_route.json"), "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
