#!/usr/bin/env python3
"""GPU baselines for the gdn-eval report (seed 000, section 5.5), run on the
device next to gdn-eval by run_device.sh:

  prefill over lengths (B = 1, Hqk = Hv = 16, D = 128, bf16 q/k/v, fp32 state):
    ours    gdn_prefill of libgdn_capi.so (kernels/capi/gdn_capi.h), if given:
            routed as the server's cuda backend routes (bf16 inputs of >= 64
            tokens per sequence: the chunked kernel, so every length here)
    fla     flash-linear-attention chunk_gated_delta_rule, if importable
    sdpa    PyTorch scaled_dot_product_attention, causal softmax attention
  decode, one new token per sequence against a context of L tokens:
    ours    gdn_decode (cost independent of L: the state has a fixed size)
    fla     fused_recurrent_gated_delta_rule
    sdpa    one query against an L-token KV cache (cost grows with L)
  correctness: ours and FLA against a float64 recurrence (torch, on the GPU)
  on a 512-token prefix, so a fast wrong kernel cannot win.

Timing: CUDA events around each call after warm-up, median and P95 of the
runs; out-of-memory is recorded as "resource_limit", not as an error.

    python3 gpu_baselines.py --out DIR [--capi libgdn_capi.so] [--budget-s 150]
"""
import argparse
import ctypes
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels", "capi"))
import gdn_capi  # noqa: E402  (ctypes mirror of kernels/capi/gdn_capi.h)

LENGTHS = [512, 4096, 16384, 65536, 131072]
DECODE_BATCHES = [1, 32]


def is_oom(e):
    return isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()


class Inputs:
    """B sequences of L tokens, packed [T, H, D]; g = logsigmoid(randn)/16,
    beta = sigmoid(randn); q, k raw randn (the kernels L2-normalise)."""

    def __init__(self, B, L, H, D, seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        T = B * L
        self.B, self.L, self.H, self.D, self.T = B, L, H, D, T
        rn = lambda *s: torch.randn(*s, device="cuda", generator=gen)  # noqa: E731
        self.q = rn(T, H, D).bfloat16()
        self.k = rn(T, H, D).bfloat16()
        self.v = rn(T, H, D).bfloat16()
        self.g = F.logsigmoid(rn(T, H)) / 16
        self.beta = torch.sigmoid(rn(T, H))
        self.cu = torch.arange(0, T + 1, L, device="cuda", dtype=torch.int32)


class Ours:
    def __init__(self, path):
        self.lib = gdn_capi.load(path)

    def prepare(self, x, initial_from_pages):
        c = gdn_capi.Config(x.H, x.H, x.D, x.D, 1, 0, 0, 1, 0.0)
        o = torch.empty_like(x.v)
        pool = torch.zeros(x.B + 1, x.H, x.D, x.D, device="cuda", dtype=torch.float32)
        own = torch.arange(1, x.B + 1, device="cuda", dtype=torch.int32)
        init = own if initial_from_pages else torch.full_like(own, -1)
        cu_host = x.cu.cpu()
        keep = (o, pool, own, init, cu_host)
        a = gdn_capi.Args()
        a.num_seqs, a.total_tokens = x.B, x.T
        a.cu_seqlens, a.cu_seqlens_host = x.cu.data_ptr(), cu_host.data_ptr()
        a.q, a.k, a.v, a.o = x.q.data_ptr(), x.k.data_ptr(), x.v.data_ptr(), o.data_ptr()
        a.g, a.beta = x.g.data_ptr(), x.beta.data_ptr()
        a.pool_base, a.page_bytes, a.num_pages = pool.data_ptr(), x.H * x.D * x.D * 4, x.B + 1
        a.initial_pages, a.final_pages = init.data_ptr(), own.data_ptr()
        return c, a, keep

    def call(self, name, c, a):
        rc = getattr(self.lib, name)(ctypes.byref(c), ctypes.byref(a),
                                     ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if rc != 0:
            raise RuntimeError(f"{name}: {rc} {self.lib.gdn_last_error().decode()}")


def time_ms(fn, budget_s, min_runs=5, max_runs=50, warmup=2):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times, spent = [], 0.0
    while len(times) < max_runs and (len(times) < min_runs or spent < budget_s):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
        spent += times[-1] / 1e3
    times.sort()
    p = lambda q: times[min(len(times) - 1, int(round(q * (len(times) - 1))))]  # noqa: E731
    return {"n": len(times), "p50_ms": p(0.5), "p95_ms": p(0.95), "min_ms": times[0],
            "mean_ms": sum(times) / len(times)}


def measure(fn, per_config_s):
    try:
        r = time_ms(fn, per_config_s)
        r["outcome"] = "ok"
        return r
    except Exception as e:  # noqa: BLE001 (a peer's failure is a result)
        torch.cuda.empty_cache()
        return {"outcome": "resource_limit" if is_oom(e) else "error", "message": str(e)[:300]}


def reference64(x, seq, L):
    """Float64 recurrence of shared/GDN.md for sequence `seq`, first L tokens,
    all heads at once: o [L, H, D], S [H, D, D]."""
    t0 = seq * x.L
    q = x.q[t0:t0 + L].double()
    k = x.k[t0:t0 + L].double()
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    v, g, beta = x.v[t0:t0 + L].double(), x.g[t0:t0 + L].double(), x.beta[t0:t0 + L].double()
    scale = x.D ** -0.5
    S = torch.zeros(x.H, x.D, x.D, device="cuda", dtype=torch.float64)
    o = torch.empty(L, x.H, x.D, device="cuda", dtype=torch.float64)
    for t in range(L):
        S = S * torch.exp(g[t])[:, None, None]
        u = beta[t][:, None] * (v[t] - torch.einsum("hkv,hk->hv", S, k[t]))
        S = S + k[t][:, :, None] * u[:, None, :]
        o[t] = torch.einsum("hkv,hk->hv", S, q[t] * scale)
    return o, S


def errors(got, ref):
    got = got.double()
    d = (got - ref).abs()
    return {"max_abs_rel": (d.max() / ref.abs().max()).item(),
            "rel_l2": (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item(),
            "nonfinite": int((~torch.isfinite(got)).sum().item())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--capi", default=None, help="libgdn_capi.so (optional)")
    ap.add_argument("--budget-s", type=float, default=150)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dim", type=int, default=128)
    args = ap.parse_args()
    start = time.time()
    os.makedirs(args.out, exist_ok=True)
    H, D = args.heads, args.dim
    report = {"tool": "gpu_baselines.py", "device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "cuda": torch.version.cuda, "shape": {"Hqk": H, "Hv": H, "D": D, "input": "bf16", "state": "fp32"},
              "timing": "CUDA events per call after 2 warm-up calls; median (p50) and p95",
              "prefill": [], "decode": [], "correctness": {}}
    ours = None
    if args.capi and os.path.exists(args.capi):
        try:
            ours = Ours(args.capi)
        except OSError as e:
            report["ours_error"] = str(e)[:300]
    fla_chunk = fla_recurrent = None
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk  # noqa: N813
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as fla_recurrent  # noqa: N813
        import fla
        report["fla_version"] = getattr(fla, "__version__", "?")
    except Exception as e:  # noqa: BLE001
        report["fla_error"] = str(e)[:300]
    print(f"ours: {'yes' if ours else 'no'}  fla: {'yes' if fla_chunk else 'no'}", flush=True)

    def fla_prefill(x):
        o, _ = fla_chunk(x.q.view(x.B, x.L, H, D), x.k.view(x.B, x.L, H, D), x.v.view(x.B, x.L, H, D),
                         x.g.view(x.B, x.L, H), x.beta.view(x.B, x.L, H), initial_state=None,
                         output_final_state=True, use_qk_l2norm_in_kernel=True)
        return o

    # Correctness on a 512-token prefix (one sequence), float64 reference.
    x = Inputs(1, 512, H, D, seed=7)
    ro, rS = reference64(x, 0, 512)
    if ours:
        try:
            c, a, keep = ours.prepare(x, initial_from_pages=False)
            ours.call("gdn_prefill", c, a)
            torch.cuda.synchronize()
            report["correctness"]["ours_prefill"] = {"o": errors(keep[0], ro), "state": errors(keep[1][1], rS)}
        except Exception as e:  # noqa: BLE001
            report["correctness"]["ours_prefill"] = {"error": str(e)[:300]}
    if fla_chunk:
        try:
            o = fla_prefill(x)
            torch.cuda.synchronize()
            report["correctness"]["fla_chunk"] = {"o": errors(o.view(512, H, D), ro)}
        except Exception as e:  # noqa: BLE001
            report["correctness"]["fla_chunk"] = {"error": str(e)[:300]}
    print("correctness:", json.dumps(report["correctness"]), flush=True)

    n_configs = len(LENGTHS) * 3 + len(LENGTHS) * len(DECODE_BATCHES) * 3
    per_config = max(0.05, 0.5 * args.budget_s / n_configs)

    for L in LENGTHS:
        if time.time() - start > args.budget_s:
            report["prefill"].append({"L": L, "outcome": "skipped_time_budget"})
            continue
        row = {"B": 1, "L": L}
        try:
            x = Inputs(1, L, H, D, seed=L)
        except Exception as e:  # noqa: BLE001
            row["inputs"] = {"outcome": "resource_limit" if is_oom(e) else "error", "message": str(e)[:200]}
            report["prefill"].append(row)
            continue
        if ours:
            c, a, keep = ours.prepare(x, initial_from_pages=False)
            row["ours"] = measure(lambda: ours.call("gdn_prefill", c, a), per_config)
            del keep
        if fla_chunk:
            row["fla"] = measure(lambda: fla_prefill(x), per_config)
        qh, kh, vh = (t.view(1, L, H, D).transpose(1, 2) for t in (x.q, x.k, x.v))
        row["sdpa"] = measure(lambda: F.scaled_dot_product_attention(qh, kh, vh, is_causal=True), per_config)
        report["prefill"].append(row)
        print("prefill", json.dumps(row), flush=True)
        del x, qh, kh, vh
        torch.cuda.empty_cache()

    for B in DECODE_BATCHES:
        for L in LENGTHS:
            if time.time() - start > args.budget_s:
                report["decode"].append({"B": B, "L": L, "outcome": "skipped_time_budget"})
                continue
            row = {"B": B, "L": L}
            x = Inputs(B, 1, H, D, seed=B)  # the new token of each sequence
            if ours:  # independent of L: the state page is all the context
                c, a, keep = ours.prepare(x, initial_from_pages=True)
                row["ours"] = measure(lambda: ours.call("gdn_decode", c, a), per_config)
                del keep
            if fla_recurrent:
                h0 = torch.randn(B, H, D, D, device="cuda") * 0.5
                row["fla"] = measure(lambda: fla_recurrent(
                    x.q.view(B, 1, H, D), x.k.view(B, 1, H, D), x.v.view(B, 1, H, D), x.g.view(B, 1, H),
                    x.beta.view(B, 1, H), initial_state=h0, output_final_state=True,
                    use_qk_l2norm_in_kernel=True), per_config)
            try:
                kc = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
                vc = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
                qd = x.q.view(B, 1, H, D).transpose(1, 2)
                row["sdpa"] = measure(lambda: F.scaled_dot_product_attention(qd, kc, vc), per_config)
                del kc, vc
            except Exception as e:  # noqa: BLE001
                row["sdpa"] = {"outcome": "resource_limit" if is_oom(e) else "error", "message": str(e)[:200]}
            report["decode"].append(row)
            print("decode", json.dumps(row), flush=True)
            torch.cuda.empty_cache()

    report["seconds"] = time.time() - start
    with open(os.path.join(args.out, "baselines.json"), "w") as f:
        json.dump(report, f, indent=1)

    def cell(r):
        if r is None:
            return "-"
        if r.get("outcome") != "ok":
            return r.get("outcome", "?")
        return f"{r['p50_ms']:.3f}"

    lines = [f"# GPU baselines ({report['device']}, torch {report['torch']})", "",
             f"Hqk = Hv = {H}, D = {D}, bf16 q/k/v, fp32 state. {report['timing']}.", "",
             "Correctness on a 512-token prefix vs a float64 recurrence: `"
             + json.dumps(report["correctness"]) + "`", "",
             "## Prefill, B = 1 (P50 ms per call; ours = gdn_prefill, routed: the chunked kernel)", "",
             "| L | ours | FLA chunk | SDPA causal softmax |",
             "| --- | --- | --- | --- |"]
    for r in report["prefill"]:
        lines.append(f"| {r['L']} | {cell(r.get('ours'))} | {cell(r.get('fla'))} | {cell(r.get('sdpa'))} |")
    lines += ["", "## Decode, one token per sequence against an L-token context (P50 ms per call)", "",
              "| B | L | ours | FLA fused_recurrent | SDPA (KV cache of L) |", "| --- | --- | --- | --- | --- |"]
    for r in report["decode"]:
        lines.append(f"| {r['B']} | {r['L']} | {cell(r.get('ours'))} | {cell(r.get('fla'))} | {cell(r.get('sdpa'))} |")
    with open(os.path.join(args.out, "baselines.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
