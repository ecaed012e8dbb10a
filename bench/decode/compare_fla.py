#!/usr/bin/env python3
"""Our decode kernel (libgdn_capi.so via ctypes) next to flash-linear-attention's
fused_recurrent_gated_delta_rule, on the same torch tensors in one process.

Both are timed the same way: a CUDA graph of M calls rotating over state sets
larger than the 60 MB L2, replayed after warm-up; time per call = median replay
time / M. Both are checked against a float64 torch reference of the recurrence
in shared/GDN.md (written here) on the same inputs: q/k/v bf16, g/beta fp32,
L2 norm of q/k in the kernel, random initial states, fp32 and bf16 state.

Bytes counted per call: ours reads and writes the state pages in the state
dtype (in place); FLA reads the initial state in its dtype and writes a new
fp32 final state (that is its API).

  python3 compare_fla.py --lib build/libgdn_capi.so --json out.json --md out.md
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels", "capi"))
import gdn_capi  # noqa: E402  (ctypes mirror of kernels/capi/gdn_capi.h)

L2_BYTES = 60 << 20
GDN_DECODE_PDL = 256  # gdn_capi.h: OR-ed into gdn_decode_variant's code


class GdnLib:
    def __init__(self, path):
        self.lib = gdn_capi.load(path)

    def decode(self, config, args):
        rc = self.lib.gdn_decode(ctypes.byref(config), ctypes.byref(args),
                                 ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if rc != 0:
            raise RuntimeError(f"gdn_decode: {rc}: {self.lib.gdn_last_error().decode()}")

    def decode_pdl(self, config, args):
        """auto variant with programmatic dependent launch (GDN_DECODE_PDL)."""
        rc = self.lib.gdn_decode_variant(ctypes.byref(config), ctypes.byref(args),
                                         ctypes.c_void_p(torch.cuda.current_stream().cuda_stream),
                                         GDN_DECODE_PDL)
        if rc != 0:
            raise RuntimeError(f"gdn_decode_variant: {rc}: {self.lib.gdn_last_error().decode()}")


def reference(q, k, v, g, beta, h0, scale):
    """float64 recurrence of shared/GDN.md. q,k [B,T,Hqk,K], v [B,T,Hv,V],
    g,beta [B,T,Hv], h0 [B,Hv,K,V]. Returns o [B,T,Hv,V], S [B,Hv,K,V]."""
    q, k, v, g, beta = (x.double() for x in (q, k, v, g, beta))
    S = h0.double().clone()
    B, T, Hqk, K = q.shape
    Hv = v.shape[2]
    G = Hv // Hqk
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q = q.repeat_interleave(G, dim=2)  # value head j reads q/k head j // G
    k = k.repeat_interleave(G, dim=2)
    o = torch.empty(B, T, Hv, v.shape[-1], dtype=torch.float64, device=q.device)
    for t in range(T):
        S = S * torch.exp(g[:, t])[..., None, None]
        kt, qt = k[:, t], q[:, t]  # [B, Hv, K]
        u = beta[:, t][..., None] * (v[:, t] - torch.einsum("bhkv,bhk->bhv", S, kt))
        S = S + kt[..., :, None] * u[..., None, :]
        o[:, t] = torch.einsum("bhkv,bhk->bhv", S, qt * scale)
    return o, S


def errors(got, ref):
    got = got.double()
    diff = (got - ref).abs()
    return {"max_abs_rel": float(diff.max() / ref.abs().max()),
            "rel_l2": float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)),
            "nonfinite": int((~torch.isfinite(got)).sum())}


class Case:
    """Inputs for B sequences of T tokens, a state pool of R rotation sets."""

    def __init__(self, B, T, Hqk, Hv, K, V, state_dtype, rotations, device="cuda"):
        self.B, self.T, self.Hqk, self.Hv, self.K, self.V = B, T, Hqk, Hv, K, V
        self.state_dtype = state_dtype
        self.rotations = rotations
        self.q = torch.randn(B, T, Hqk, K, device=device).to(torch.bfloat16)
        self.k = torch.randn(B, T, Hqk, K, device=device).to(torch.bfloat16)
        self.v = torch.randn(B, T, Hv, V, device=device).to(torch.bfloat16)
        self.g = (F.logsigmoid(torch.randn(B, T, Hv, device=device)) / 16).float()
        self.beta = torch.randn(B, T, Hv, device=device).sigmoid().float()
        self.pool = (0.1 * torch.randn(rotations * B, Hv, K, V, device=device)).to(state_dtype)
        self.o = torch.empty_like(self.v)
        self.cu = torch.arange(0, (B + 1) * T, T, dtype=torch.int32, device=device)
        self.cu_host = (ctypes.c_int32 * (B + 1))(*range(0, (B + 1) * T, T))
        self.pages = torch.arange(rotations * B, dtype=torch.int32, device=device)
        self.scale = K ** -0.5

    def config(self):
        return gdn_capi.Config(self.Hqk, self.Hv, self.K, self.V, 1,
                      0 if self.state_dtype == torch.float32 else 1, 0, 1, 0.0)

    def args(self, rotation):
        pages = self.pages[rotation * self.B:(rotation + 1) * self.B]
        page_bytes = self.Hv * self.K * self.V * self.pool.element_size()
        return gdn_capi.Args(self.B, self.B * self.T, self.cu.data_ptr(),
                    ctypes.addressof(self.cu_host), self.q.data_ptr(), self.k.data_ptr(),
                    self.v.data_ptr(), self.o.data_ptr(), self.g.data_ptr(),
                    self.beta.data_ptr(), None, None, None, None, self.pool.data_ptr(),
                    page_bytes, self.pool.shape[0], pages.data_ptr(), pages.data_ptr())

    def states(self, rotation):
        return self.pool[rotation * self.B:(rotation + 1) * self.B]


def fla_call(fla_fn, case, rotation):
    return fla_fn(q=case.q, k=case.k, v=case.v, g=case.g, beta=case.beta, scale=case.scale,
                  initial_state=case.states(rotation), output_final_state=True,
                  use_qk_l2norm_in_kernel=True)


def time_graph(fn, launches, warmup=3, reps=15):
    """fn(j) issues call j. Returns median microseconds per call."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for j in range(2):  # eager warm-up (Triton compiles here)
            fn(j)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for j in range(launches):
            fn(j)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for r in range(warmup + reps):
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        if r >= warmup:
            times.append(start.elapsed_time(stop))
    del graph
    return statistics.median(times) * 1e3 / launches


def copy_bandwidth():
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.fill_(1)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for r in range(13):
        start.record()
        b.copy_(a)
        stop.record()
        stop.synchronize()
        if r >= 3:
            times.append(start.elapsed_time(stop))
    return 2 * n / (statistics.median(times) * 1e-3) / 1e9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True)
    parser.add_argument("--json", default="compare_fla.json")
    parser.add_argument("--md", default="compare_fla.md")
    parser.add_argument("--batches", default="1,8,64,256,512")
    parser.add_argument("--hv", default="32")
    args = parser.parse_args()
    torch.manual_seed(int(time.time()))
    ours = GdnLib(args.lib)
    try:
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as fla_fn
        import fla
        fla_version = getattr(fla, "__version__", "?")
    except Exception as e:  # keep our numbers even if the peer cannot load
        print(f"flash-linear-attention unavailable: {e!r}", file=sys.stderr)
        fla_fn, fla_version = None, None
    copy_gbps = copy_bandwidth()
    device = torch.cuda.get_device_name()
    print(f"device {device}; torch {torch.__version__}; fla {fla_version}; "
          f"copy {copy_gbps:.0f} GB/s")
    results = {"device": device, "torch": torch.__version__, "fla": fla_version,
               "copy_gbps": copy_gbps, "accuracy": [], "timing": []}

    # Accuracy: both against the float64 reference on the same inputs.
    for state_dtype in (torch.float32, torch.bfloat16):
        for T in (1, 4):
            case = Case(8, T, 16, 32, 128, 128, state_dtype, 1)
            h0 = case.states(0).clone()
            ref_o, ref_s = reference(case.q, case.k, case.v, case.g, case.beta, h0, case.scale)
            row = {"state": str(state_dtype).split(".")[-1], "batch": 8, "tokens": T}
            if fla_fn is not None:
                fo, fs = fla_call(fla_fn, case, 0)
                torch.cuda.synchronize()
                row["fla_o"] = errors(fo, ref_o)
                row["fla_state"] = errors(fs, ref_s)
            case.o.fill_(float("nan"))
            ours.decode(case.config(), case.args(0))
            torch.cuda.synchronize()
            row["ours_o"] = errors(case.o, ref_o)
            row["ours_state"] = errors(case.states(0), ref_s)
            results["accuracy"].append(row)
            print("accuracy", json.dumps(row))

    # Timing: T = 1, CUDA-graph replay, rotated state sets.
    for hv in [int(x) for x in args.hv.split(",")]:
        for state_dtype in (torch.float32, torch.bfloat16):
            for B in [int(x) for x in args.batches.split(",")]:
                esize = 4 if state_dtype == torch.float32 else 2
                page = hv * 128 * 128 * esize
                rotations = max(2, math.ceil(4 * L2_BYTES / (page * B)))
                launches = max(rotations, 20)
                case = Case(B, 1, 16, hv, 128, 128, state_dtype, rotations)
                config = case.config()
                call_args = [case.args(r) for r in range(rotations)]
                act = 2 * case.q.numel() * 2 + 2 * case.v.numel() * 2 + 2 * case.g.numel() * 4
                ours_us = time_graph(lambda j: ours.decode(config, call_args[j % rotations]),
                                     launches)
                ours_pdl_us = time_graph(
                    lambda j: ours.decode_pdl(config, call_args[j % rotations]), launches)
                ours_bytes = 2 * page * B + act
                row = {"hv": hv, "state": str(state_dtype).split(".")[-1], "batch": B,
                       "ours_us": ours_us, "ours_gbps": ours_bytes / ours_us / 1e3,
                       "ours_pct_copy": 100 * ours_bytes / ours_us / 1e3 / copy_gbps,
                       "ours_pdl_us": ours_pdl_us}
                if fla_fn is not None:
                    fla_us = time_graph(lambda j: fla_call(fla_fn, case, j % rotations), launches)
                    fla_bytes = page * B + hv * 128 * 128 * 4 * B + act
                    row.update({"fla_us": fla_us, "fla_gbps": fla_bytes / fla_us / 1e3,
                                "fla_pct_copy": 100 * fla_bytes / fla_us / 1e3 / copy_gbps,
                                "speedup": fla_us / ours_us})
                results["timing"].append(row)
                print("timing", json.dumps(row))
                del case
                torch.cuda.empty_cache()

    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)
    with open(args.md, "w") as f:
        f.write(f"device {device}; torch {torch.__version__}; flash-linear-attention {fla_version}; "
                f"copy {copy_gbps:.0f} GB/s (read + write)\n\n")
        f.write("| Hv | state | batch | ours us | ours GB/s | ours % copy | ours+pdl us | FLA us | "
                "FLA GB/s | FLA % copy | FLA / ours |\n|" + " --- |" * 11 + "\n")
        for r in results["timing"]:
            fla = (f"{r['fla_us']:.2f} | {r['fla_gbps']:.0f} | {r['fla_pct_copy']:.1f} | "
                   f"{r['speedup']:.2f}x") if "fla_us" in r else "- | - | - | -"
            f.write(f"| {r['hv']} | {r['state']} | {r['batch']} | {r['ours_us']:.2f} | "
                    f"{r['ours_gbps']:.0f} | {r['ours_pct_copy']:.1f} | {r['ours_pdl_us']:.2f} | "
                    f"{fla} |\n")
        f.write("\nErrors vs the float64 reference (max|x - ref| / max|ref|, rel L2), batch 8:\n\n"
                "| state | tokens | ours o | ours state | FLA o | FLA state |\n"
                "| --- | --- | --- | --- | --- | --- |\n")
        for r in results["accuracy"]:
            cell = lambda key: (f"{r[key]['max_abs_rel']:.2e} / {r[key]['rel_l2']:.2e}"
                                if key in r else "-")
            f.write(f"| {r['state']} | {r['tokens']} | {cell('ours_o')} | {cell('ours_state')} | "
                    f"{cell('fla_o')} | {cell('fla_state')} |\n")
    print(open(args.md).read())


if __name__ == "__main__":
    main()
