#!/usr/bin/env python3
"""Chunked prefill: timing next to flash-linear-attention's chunk_gated_delta_rule
on the same tensors, then correctness against a float64 reference.

Runs on the device machine (torch + triton there). Our kernels come from
libgdn_capi.so (kernels/capi/gdn_capi.h) through ctypes (kernels/capi/gdn_capi.py):
gdn_chunked_prefill_tuned (the chunked kernel with its knobs: V tile, stage
split, kernel-2 form), gdn_prefill (routed as the server routes),
gdn_prefill_variant (recurrent forced) and gdn_decode (prefill -> decode).

  python3 compare_fla.py --capi build/kernels/cuda/capi/libgdn_capi.so --out $OUT \
      [--budget-s 330] [--checks-s 80] [--skip-bench] [--skip-checks] [--rows 0,1,2]

The benchmark goes first, in the order of BENCH_ROWS, and writes
prefill_bench.json / prefill_bench.md after every row (a timeout still leaves
data); FLA is warmed once per row (Triton autotuning) before it is timed, and
every timing loop stops after a time cap. The checks use what is left of the
budget. Exit status 1 if any correctness check failed.
"""
import argparse
import json
import os
import sys
import time

import torch

from prefill_checks import CHECK_DEADLINE, CHECK_ONLY, run_checks
from prefill_problem import CHUNK, T0, Ours, Problem, errors, fla_run, gdn_capi, reference


# ------------------------------------------------------------- benchmark ----

BENCH_ROWS = [  # (Hqk, Hv, N, L, FLA from shared/GDN.md in ms), in priority order
    (16, 32, 1, 32768, 1.924), (16, 32, 1, 8192, 0.490), (16, 32, 4, 8192, 1.931),
    (16, 32, 8, 1024, 0.517), (16, 64, 1, 32768, 3.441), (16, 64, 8, 4096, 3.491),
    (2, 8, 1, 32768, 0.918), (16, 32, 1, 131072, None), (16, 32, 32, 512, None),
]
PUBLISHED = {  # FlashInfer / FlashQLA on an H200 as published by FlashQLA (shared/GDN.md)
    (16, 32, 1, 32768): (1.550, 0.877), (16, 32, 1, 8192): (0.394, 0.280),
    (16, 32, 4, 8192): (0.425, 0.611), (16, 32, 8, 1024): (0.119, 0.178),
    (16, 64, 1, 32768): (1.552, 1.521), (16, 64, 8, 4096): (0.841, 1.217),
    (2, 8, 1, 32768): (1.655, 0.320),
}


def time_ms(fn, max_s=0.3, max_reps=20, min_reps=3, warmup=1):
    """Median / min / max of CUDA-event times per call; stops after max_s."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts, t_start = [], time.time()
    while len(ts) < max_reps and (len(ts) < min_reps or time.time() - t_start < max_s):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2], ts[0], ts[-1]


def kernel_times(fn, reps=3):
    """[(us per call, launches per call, kernel name)] of fn's CUDA kernels under
    torch.profiler, averaged over reps calls after one warm-up call: GPU time
    alone, without the host time between launches that call timing includes."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t > 0:
            rows.append((t / reps, e.count // reps, e.key))
    return sorted(rows, reverse=True)


def kernel_ms(fn, reps=3):
    """Sum of fn's kernel times per call, ms (kernel_times)."""
    return sum(t for t, _, _ in kernel_times(fn, reps)) * 1e-3


def ceilings():
    n = 1 << 28  # 1 GiB fp32
    a = torch.empty(n, device="cuda")
    a.normal_()
    b = torch.empty_like(a)
    med, _, _ = time_ms(lambda: b.copy_(a), max_reps=10)
    copy_tbs = 2 * n * 4 / (med * 1e-3) / 1e12
    del a, b
    m = 8192
    x = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    med, _, _ = time_ms(lambda: x @ y, max_reps=10)
    gemm_tf = 2 * m ** 3 / (med * 1e-3) / 1e12
    del x, y
    torch.cuda.empty_cache()
    return copy_tbs, gemm_tf


def bench_row(ours, fla_fn, hqk, hv, N, L, fla_pub, copy_tbs, gemm_tf, deadline):
    K = V = 128
    p = Problem(hqk, hv, K, V, [L] * N, seed=7)
    T = p.T
    flops = T * hv * (6 * K * V + 10 * CHUNK * K)
    bytes_ = 2 * T * hqk * K * 2 + 2 * T * hv * V * 2 + 2 * T * hv * 4 + 2 * N * hv * K * V * 4
    row = {"Hqk": hqk, "Hv": hv, "N": N, "L": L, "fla_published_ms": fla_pub,
           "flashinfer_published_ms": PUBLISHED.get((hqk, hv, N, L), (None, None))[0],
           "flashqla_published_ms": PUBLISHED.get((hqk, hv, N, L), (None, None))[1],
           "flops": flops, "bytes": bytes_}
    # copy-on-write for every sequence: repeated calls all start from pool[:N]
    call = ours.prepare(p, pages_out=[N + i for i in range(N)])
    ours.call(call)  # the result checked below (first call: grows the workspace)
    torch.cuda.synchronize()
    o_ours = call.o.float()
    final = call.pool[torch.tensor(call.pages_out, device="cuda", dtype=torch.long)].float()
    row["ours_ms"], row["ours_min_ms"], row["ours_max_ms"] = time_ms(lambda: ours.call(call))
    row["ours_routed_ms"], _, _ = time_ms(lambda: ours.call(call, kernel="auto"), max_s=0.1, max_reps=5)
    row["ours_kernels_ms"] = kernel_ms(lambda: ours.call(call))
    # Each generation forced (state_variant 7 / 8, ChunkedGeneration): "ours"
    # above is the router's pick; v8 is refused on rows it cannot run.
    for gen in (gdn_capi.CHUNKED_V7, gdn_capi.CHUNKED_V8):
        try:
            row[f"ours_v{gen}_ms"], _, _ = time_ms(lambda: ours.call(call, state=gen), max_s=0.15,
                                                   max_reps=10)
        except RuntimeError as e:
            row[f"ours_v{gen}_error"] = str(e)[:200]
    # The whole call's kernel times with each of kernel 2's forms
    # (chunked_prefill.h; 4 split, 5 fused). The split form first: it sizes the
    # workspace for its extra tiles, which the state pass alone below needs.
    for sv in (4, 5):
        row[f"ours_k2v{sv}_kernels_ms"] = kernel_ms(lambda: ours.call(call, state=sv))
    # Split (v7, state_variant 7): kernel 1 alone (chunk table + prep), kernel
    # 2 alone (over that workspace).
    v7 = gdn_capi.CHUNKED_V7
    row["ours_prep_ms"], _, _ = time_ms(lambda: ours.call(call, stages=1, state=v7), max_s=0.15,
                                        max_reps=10)
    row["ours_state_ms"], _, _ = time_ms(lambda: ours.call(call, stages=2, state=v7), max_s=0.15,
                                         max_reps=10)
    for vt in (16, 32, 64):
        row[f"ours_state_vt{vt}_ms"], _, _ = time_ms(lambda: ours.call(call, stages=2, v_tile=vt),
                                                     max_s=0.1, max_reps=5)
    # Kernel 2's two forms at every V tile, same run (the whole calls above
    # sized the workspace for the split form's extra tiles).
    for sv in (4, 5):
        for vt in (16, 32, 64):
            row[f"ours_state_k2v{sv}_vt{vt}_ms"], _, _ = time_ms(
                lambda: ours.call(call, stages=2, v_tile=vt, state=sv), max_s=0.1, max_reps=5)
    print(f"  ours {row['ours_ms']:.3f} ms (v7 {row.get('ours_v7_ms', float('nan')):.3f}, v8 "
          f"{row.get('ours_v8_ms', float('nan')):.3f}; v7 kernel 1 {row['ours_prep_ms']:.3f}, "
          f"kernel 2 {row['ours_state_ms']:.3f}) [{time.time() - T0:.0f}s]", flush=True)
    fo = fS = None
    if fla_fn is not None:
        try:
            h0 = p.h0.float().clone()
            t_warm = time.time()
            fo, fS = fla_run(fla_fn, p, h0)  # compiles / autotunes on a new shape
            torch.cuda.synchronize()
            row["fla_warmup_s"] = time.time() - t_warm
            row["fla_ms"], _, _ = time_ms(lambda: fla_run(fla_fn, p, h0))
            row["fla_kernels_ms"] = kernel_ms(lambda: fla_run(fla_fn, p, h0))
            print(f"  FLA {row['fla_ms']:.3f} ms, kernels {row['fla_kernels_ms']:.3f} ms "
                  f"(warm-up {row['fla_warmup_s']:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001
            row["fla_error"] = str(e)[:300]
    if T <= 8192:
        try:
            row["recurrent_ms"], _, _ = time_ms(lambda: ours.call(call, kernel="recurrent"), max_s=0.2,
                                                max_reps=5)
        except Exception as e:  # noqa: BLE001
            row["recurrent_error"] = str(e)[:200]
    if T <= 32768 and time.time() < deadline - 10:
        ro, rS = reference(p)
        row["ours_o"], row["ours_state"] = errors(o_ours, ro), errors(final, rS)
        if fo is not None:
            row["fla_o"], row["fla_state"] = errors(fo.float(), ro), errors(fS.float(), rS)
        del ro, rS
    elif fo is not None:  # too long for the float64 loop: ours against FLA
        row["ours_vs_fla_o"] = errors(o_ours, fo.float())
    for who in ("ours", "fla"):
        if f"{who}_ms" in row:
            sec = row[f"{who}_ms"] * 1e-3
            row[f"{who}_tflops"] = flops / sec / 1e12
            row[f"{who}_tbs"] = bytes_ / sec / 1e12
            row[f"{who}_pct_gemm"] = 100 * flops / sec / 1e12 / gemm_tf
            row[f"{who}_pct_copy"] = 100 * bytes_ / sec / 1e12 / copy_tbs
    del p, call, fo, fS
    torch.cuda.empty_cache()
    return row


def run_bench(ours, fla_fn, budget_s, rows_out, write, row_ids=None):
    copy_tbs, gemm_tf = ceilings()
    print(f"ceilings: copy {copy_tbs:.2f} TB/s (read+write), bf16 GEMM {gemm_tf:.0f} TFLOP/s",
          flush=True)
    deadline = T0 + budget_s
    for idx, (hqk, hv, N, L, fla_pub) in enumerate(BENCH_ROWS):
        if row_ids is not None and idx not in row_ids:
            continue
        if time.time() > deadline:
            print(f"budget reached, skipping {hqk}/{hv} {N} x {L}", flush=True)
            rows_out.append({"Hqk": hqk, "Hv": hv, "N": N, "L": L, "skipped": "time budget"})
            continue
        print(f"row {hqk}/{hv} {N} x {L} [{time.time() - T0:.0f}s]", flush=True)
        try:
            row = bench_row(ours, fla_fn, hqk, hv, N, L, fla_pub, copy_tbs, gemm_tf, deadline)
            rows_out.append(row)
            print(json.dumps(row), flush=True)
            print(f"row {hqk}/{hv} {N} x {L}: ours {row['ours_ms']:.3f} ms, FLA "
                  f"{row.get('fla_ms', float('nan')):.3f} ms [{time.time() - T0:.0f}s]", flush=True)
        except Exception as e:  # noqa: BLE001 (a failing row is reported, the rest run)
            print(f"row {hqk}/{hv} {N} x {L} failed: {e}", flush=True)
            rows_out.append({"Hqk": hqk, "Hv": hv, "N": N, "L": L, "error": str(e)[:300]})
            torch.cuda.empty_cache()
        write(copy_tbs, gemm_tf)
    # Crossover with the recurrent kernel, 16/32, 8 sequences (cheap).
    for L in (16, 64, 256, 1024):
        if time.time() > deadline:
            break
        p = Problem(16, 32, 128, 128, [L] * 8, seed=3)
        call = ours.prepare(p, pages_out=[8 + i for i in range(8)])
        r = {"crossover": True, "Hqk": 16, "Hv": 32, "N": 8, "L": L}
        r["ours_ms"], _, _ = time_ms(lambda: ours.call(call), max_s=0.1, max_reps=10)
        r["recurrent_ms"], _, _ = time_ms(lambda: ours.call(call, kernel="recurrent"), max_s=0.1,
                                          max_reps=10)
        r["routed_ms"], _, _ = time_ms(lambda: ours.call(call, kernel="auto"), max_s=0.1, max_reps=10)
        rows_out.append(r)
        print(f"crossover 16/32 8 x {L}: chunked {r['ours_ms']:.3f} ms, recurrent "
              f"{r['recurrent_ms']:.3f} ms, gdn_prefill {r['routed_ms']:.3f} ms", flush=True)
    write(copy_tbs, gemm_tf)


def fmt_err(row, who):
    if f"{who}_o" not in row:
        return "-"
    return f"{row[who + '_o']['max_rel']:.1e} / {row[who + '_state']['max_rel']:.1e}"


def ms(r, key):
    return f"{r[key]:.3f}" if r.get(key) is not None else "-"


def markdown(rows, copy_tbs, gemm_tf):
    lines = [f"Ceilings measured in this run: device copy {copy_tbs:.2f} TB/s (read + write), "
             f"bf16 GEMM {gemm_tf:.0f} TFLOP/s. Times in ms. 'call': median of CUDA-event timed calls "
             "(ours through ctypes, FLA's Python function: includes host time between launches). "
             "'kernels': sum of the call's kernel times under torch.profiler (GPU time only).", "",
             "| Hqk/Hv | sequences | ours call (routed) | v7 / v8 call | ours kernels | FLA call | FLA kernels | "
             "FLA / FlashInfer / FlashQLA (GDN.md) | recurrent | "
             "v7 kernel 1 + kernel 2 | kernels with kernel 2 split (4) / fused (5) | kernel 2 at V tile 16 / 32 / 64 | "
             "ours TFLOP/s (% GEMM) | ours GB/s (% copy) | err o / S ours | err o / S FLA |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r.get("crossover") or "error" in r or "skipped" in r:
            continue
        fla = ms(r, "fla_ms") if "fla_ms" in r else r.get("fla_error", "-")[:40]
        pub = f"{ms(r, 'fla_published_ms')} / {ms(r, 'flashinfer_published_ms')} / {ms(r, 'flashqla_published_ms')}"
        err_ours = fmt_err(r, "ours")
        if "ours_vs_fla_o" in r:
            err_ours = f"vs FLA {r['ours_vs_fla_o']['max_rel']:.1e}"
        lines.append(
            f"| {r['Hqk']}/{r['Hv']} | {r['N']} x {r['L']} | {ms(r, 'ours_ms')} | "
            f"{ms(r, 'ours_v7_ms')} / {ms(r, 'ours_v8_ms')} | {ms(r, 'ours_kernels_ms')} | {fla} | {ms(r, 'fla_kernels_ms')} | {pub} | "
            f"{ms(r, 'recurrent_ms')} | {ms(r, 'ours_prep_ms')} + {ms(r, 'ours_state_ms')} | "
            f"{ms(r, 'ours_k2v4_kernels_ms')} / {ms(r, 'ours_k2v5_kernels_ms')} | {ms(r, 'ours_state_vt16_ms')} / {ms(r, 'ours_state_vt32_ms')} / "
            f"{ms(r, 'ours_state_vt64_ms')} | {r['ours_tflops']:.0f} ({r['ours_pct_gemm']:.0f}%) | "
            f"{r['ours_tbs'] * 1e3:.0f} ({r['ours_pct_copy']:.0f}%) | {err_ours} | {fmt_err(r, 'fla')} |")
    missing = [r for r in rows if "skipped" in r or "error" in r]
    if missing:
        lines.append("")
    for r in missing:
        lines.append(f"Not measured: {r['Hqk']}/{r['Hv']} {r['N']} x {r['L']}: "
                     f"{r.get('skipped', r.get('error', ''))[:100]}")
    cross = [r for r in rows if r.get("crossover")]
    if cross:
        lines += ["", "| 16/32, 8 sequences of | chunked | recurrent | gdn_prefill (routed) |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| {r['L']} | {r['ours_ms']:.3f} | {r['recurrent_ms']:.3f} | {r['routed_ms']:.3f} |"
                  for r in cross]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--capi", required=True, help="libgdn_capi.so")
    ap.add_argument("--out", default=".")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--skip-checks", action="store_true")
    ap.add_argument("--budget-s", type=float, default=330, help="whole script")
    ap.add_argument("--checks-s", type=float, default=80, help="reserved for the checks")
    ap.add_argument("--rows", default="", help="comma-separated BENCH_ROWS indices (default all)")
    ap.add_argument("--only", default="", help="run only the checks whose name contains this")
    ap.add_argument("--seeds", type=int, default=1,
                    help="run the checks this many times on fresh inputs (other seeds)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(torch.cuda.get_device_name(0), torch.__version__, flush=True)
    ours = Ours(args.capi)
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_fn
    except Exception as e:  # noqa: BLE001
        print("FLA not importable:", e)
        fla_fn = None
    ok = True
    if not args.skip_bench:
        rows = []

        def write(copy_tbs, gemm_tf):
            with open(os.path.join(args.out, "prefill_bench.json"), "w") as f:
                json.dump({"copy_tbs": copy_tbs, "gemm_tflops": gemm_tf, "rows": rows}, f, indent=1)
            try:
                md = markdown(rows, copy_tbs, gemm_tf)
            except Exception as e:  # noqa: BLE001
                md = f"markdown failed: {e}"
            with open(os.path.join(args.out, "prefill_bench.md"), "w") as f:
                f.write(md + "\n")
            return md

        row_ids = set(int(x) for x in args.rows.split(",")) if args.rows else None
        bench_budget = args.budget_s - (0 if args.skip_checks else args.checks_s)
        run_bench(ours, fla_fn, bench_budget, rows, write, row_ids)
        with open(os.path.join(args.out, "prefill_bench.md")) as f:
            print(f.read(), flush=True)
    if not args.skip_checks:
        CHECK_DEADLINE[0] = args.budget_s
        CHECK_ONLY[0] = args.only
        results = []
        try:
            for k in range(args.seeds):
                first = len(results)
                ok &= run_checks(ours, fla_fn, results, base_seed=100 + 100000 * k)
                for r in results[first:]:
                    r["seed_set"] = k
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            results.append({"name": "exception", "ok": False, "error": str(e)})
            ok = False
        with open(os.path.join(args.out, "prefill_checks.json"), "w") as f:
            json.dump(results, f, indent=1)
        skipped = sum(1 for r in results if "skipped" in r)
        print(f"checks: {sum(r['ok'] for r in results) - skipped}/{len(results) - skipped} passed, "
              f"{skipped} skipped (time), {time.time() - T0:.0f} s", flush=True)
        for ours_key, fla_key in (("o", "fla_o"), ("state", "fla_state")):
            ratios = sorted(r[ours_key]["max_rel"] / r[fla_key]["max_rel"] for r in results
                            if fla_key in r and r[fla_key]["max_rel"] > 0)
            if ratios:
                worse = sum(x > 1 for x in ratios)
                print(f"ours / FLA max_rel on {ours_key} over {len(ratios)} shared cases: median "
                      f"{ratios[len(ratios) // 2]:.2f}, max {ratios[-1]:.2f}, ours worse in {worse}")
    print(f"total {time.time() - T0:.0f} s; checks {'PASSED' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
