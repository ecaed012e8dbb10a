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
import ctypes
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels", "capi"))
import gdn_capi  # noqa: E402  (ctypes mirror of kernels/capi/gdn_capi.h)

DTYPES = {"fp32": (0, torch.float32), "bf16": (1, torch.bfloat16), "fp16": (2, torch.float16)}
STATE_DTYPES = {"fp32": (0, torch.float32), "bf16": (1, torch.bfloat16)}
CHUNK = 64
T0 = time.time()


def ptr(t):
    return None if t is None else t.data_ptr()


class Problem:
    """One call's inputs on the GPU, already rounded to the kernel dtypes."""

    def __init__(self, hqk, hv, K, V, seq_lens, dtype="bf16", state_dtype="fp32", fused=False,
                 l2=True, profile="random", init=True, seed=0):
        self.hqk, self.hv, self.K, self.V = hqk, hv, K, V
        self.seq_lens = list(seq_lens)
        self.N, self.T = len(seq_lens), sum(seq_lens)
        self.dtype, self.state_dtype, self.fused, self.l2 = dtype, state_dtype, fused, l2
        self.profile = profile
        gen = torch.Generator(device="cuda").manual_seed(seed)
        dev, T = "cuda", self.T
        tdt = DTYPES[dtype][1]

        def rn(*shape):
            return torch.randn(*shape, generator=gen, device=dev, dtype=torch.float32)

        q, k = rn(T, hqk, K), rn(T, hqk, K)
        if not l2:  # the kernel will not normalise: feed unit vectors
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        v = rn(T, hv, V)
        if profile == "allequal":  # every token of a sequence the same (seed 000's extreme input)
            first = torch.tensor([0] + list(_cumsum(seq_lens))[:-1], device=dev)
            owner = torch.repeat_interleave(first, torch.tensor(seq_lens, device=dev))
            q, k, v = q[owner], k[owner], v[owner]
        self.q, self.k, self.v = q.to(tdt), k.to(tdt), v.to(tdt)
        self.g = self.beta = self.a = self.b = self.A_log = self.dt_bias = None
        if fused:
            self.a = rn(T, hv)
            self.b = rn(T, hv)
            self.A_log = torch.rand(hv, generator=gen, device=dev) * 2.0 - 2.0
            self.dt_bias = rn(hv) * 0.5 - 1.0
            if profile == "beta1":
                self.b.fill_(60.0)
            if profile == "nodecay":
                self.a.fill_(-200.0)
        else:
            self.g = F.logsigmoid(rn(T, hv)) / 16
            self.beta = torch.sigmoid(rn(T, hv))
            if profile == "nodecay":
                self.g.zero_()
            elif profile == "strongdecay":
                self.g = -5.0 - 15.0 * torch.rand(T, hv, generator=gen, device=dev)
            elif profile == "beta0":
                self.beta.zero_()
            elif profile == "beta1":
                self.beta.fill_(1.0)
        sdt = STATE_DTYPES[state_dtype][1]
        # init: True (all random), False (all zero), or a list of bools per sequence
        flags = init if isinstance(init, list) else [bool(init)] * self.N
        self.has_init = flags
        self.h0 = (rn(self.N, hv, K, V) * 0.1).to(sdt).float()
        for i, f in enumerate(flags):
            if not f:
                self.h0[i].zero_()
        self.cu = torch.tensor([0] + list(_cumsum(seq_lens)), dtype=torch.int32, device=dev)
        self.cu_host = torch.tensor([0] + list(_cumsum(seq_lens)), dtype=torch.int32)

    def gating64(self):
        if self.fused:
            x = self.a.double() + self.dt_bias.double()
            sp = torch.where(x > 20, x, torch.log1p(torch.exp(x)))
            g = -torch.exp(self.A_log.double()) * sp
            beta = torch.sigmoid(self.b.double())
            return g, beta
        return self.g.double(), self.beta.double()

    def gating32(self):
        """g, beta in fp32 as FLA would take them (fused gating done by torch)."""
        if self.fused:
            g, beta = self.gating64()
            return g.float(), beta.float()
        return self.g, self.beta


def _cumsum(xs):
    s = 0
    for x in xs:
        s += x
        yield s


def reference(p, h0=None):
    """float64 recurrence (shared/GDN.md), all sequences at once, padded with
    identity steps (g = 0, beta = 0 leave S unchanged). Returns o [T, Hv, V],
    final [N, Hv, K, V] (float64)."""
    N, T, hv, K, V = p.N, p.T, p.hv, p.K, p.V
    G = hv // p.hqk
    Lmax = max(p.seq_lens)
    q = p.q.double().repeat_interleave(G, dim=1)
    k = p.k.double().repeat_interleave(G, dim=1)
    if p.l2:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q = q * (K ** -0.5)
    v = p.v.double()
    g, beta = p.gating64()
    qp = torch.zeros(N, Lmax, hv, K, dtype=torch.float64, device="cuda")
    kp, vp = torch.zeros_like(qp), torch.zeros(N, Lmax, hv, V, dtype=torch.float64, device="cuda")
    gp = torch.zeros(N, Lmax, hv, dtype=torch.float64, device="cuda")
    bp = torch.zeros_like(gp)
    starts = [0] + list(_cumsum(p.seq_lens))
    for i, L in enumerate(p.seq_lens):
        s = starts[i]
        qp[i, :L], kp[i, :L], vp[i, :L] = q[s:s + L], k[s:s + L], v[s:s + L]
        gp[i, :L], bp[i, :L] = g[s:s + L], beta[s:s + L]
    eg = torch.exp(gp)
    S = (p.h0 if h0 is None else h0).double().clone()
    op = torch.empty(N, Lmax, hv, V, dtype=torch.float64, device="cuda")
    for t in range(Lmax):
        S.mul_(eg[:, t, :, None, None])
        kt = kp[:, t]
        u = bp[:, t, :, None] * (vp[:, t] - torch.einsum("nhk,nhkv->nhv", kt, S))
        S.add_(kt[..., None] * u[..., None, :])
        op[:, t] = torch.einsum("nhk,nhkv->nhv", qp[:, t], S)
    o = torch.empty(T, hv, V, dtype=torch.float64, device="cuda")
    for i, L in enumerate(p.seq_lens):
        o[starts[i]:starts[i] + L] = op[i, :L]
    return o, S


def errors(got, ref):
    got, ref = got.double(), ref.double()
    nonfinite = int((~torch.isfinite(got)).sum().item())
    d = (got - ref)
    mref = ref.abs().max().item() or 1.0
    nref = ref.norm().item() or 1.0
    return {"max_rel": d.abs().max().item() / mref, "rel_l2": d.norm().item() / nref,
            "nonfinite": nonfinite}


class Ours:
    """libgdn_capi.so. prepare() builds a call (pool of 2N pages: sequence i reads
    page i, or -1, and writes page i (even i, in place) or N + i (odd i, copy
    on write)); call() runs it with the chunked kernel (knobs: v_tile 0 auto /
    16 / 32 / 64, stages 3 / 1 kernel 1 / 2 kernel 2, prep -1 / 4: kernel 1, the one left) or
    kernel="auto" (gdn_prefill), "recurrent" (gdn_prefill_variant 1), "decode"."""

    def __init__(self, path):
        self.lib = gdn_capi.load(path)

    def prepare(self, p, pages_in=None, pages_out=None, pool=None):
        N, hv, K, V = p.N, p.hv, p.K, p.V
        sdt = STATE_DTYPES[p.state_dtype][1]
        if pool is None:
            pool = torch.full((2 * N, hv, K, V), float("nan"), device="cuda").to(sdt)
            pool[:N] = p.h0.to(sdt)
        if pages_in is None:
            pages_in = [i if p.has_init[i] else -1 for i in range(N)]
        if pages_out is None:
            pages_out = [i if i % 2 == 0 else N + i for i in range(N)]
        pin = torch.tensor(pages_in, dtype=torch.int32, device="cuda")
        pout = torch.tensor(pages_out, dtype=torch.int32, device="cuda")
        o = torch.full((p.T, hv, V), float("nan"), device="cuda").to(DTYPES[p.dtype][1])
        c = gdn_capi.Config(p.hqk, hv, K, V, DTYPES[p.dtype][0], STATE_DTYPES[p.state_dtype][0],
                            1 if p.fused else 0, 1 if p.l2 else 0, 0.0)
        a = gdn_capi.Args()
        a.num_seqs, a.total_tokens = N, p.T
        a.cu_seqlens, a.cu_seqlens_host = ptr(p.cu), ptr(p.cu_host)
        a.q, a.k, a.v, a.o = ptr(p.q), ptr(p.k), ptr(p.v), ptr(o)
        a.g, a.beta, a.a, a.b = ptr(p.g), ptr(p.beta), ptr(p.a), ptr(p.b)
        a.A_log, a.dt_bias = ptr(p.A_log), ptr(p.dt_bias)
        a.initial_pages, a.final_pages = ptr(pin), ptr(pout)
        a.pool_base = ptr(pool)
        a.page_bytes = hv * K * V * pool.element_size()
        a.num_pages = pool.shape[0]
        return Call(c, a, o, pool, pages_out, (pin, pout, o, pool, p))

    def call(self, call, kernel="chunked", v_tile=0, stages=3, prep=-1, state=-1):
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        c, a = ctypes.byref(call.c), ctypes.byref(call.a)
        if kernel == "chunked":
            rc = self.lib.gdn_chunked_prefill_tuned(c, a, stream, v_tile, stages, prep, state)
        elif kernel == "auto":
            rc = self.lib.gdn_prefill(c, a, stream)
        elif kernel == "recurrent":
            rc = self.lib.gdn_prefill_variant(c, a, stream, gdn_capi.PREFILL_RECURRENT)
        elif kernel == "decode":
            rc = self.lib.gdn_decode(c, a, stream)
        else:
            raise ValueError(kernel)
        if rc != 0:
            raise RuntimeError(f"{kernel}: {rc} {self.lib.gdn_last_error().decode()}")

    def run(self, p, kernel="chunked", v_tile=0, prep=-1, **kw):
        call = self.prepare(p, **kw)
        self.call(call, kernel=kernel, v_tile=v_tile, prep=prep)
        torch.cuda.synchronize()
        final = call.pool[torch.tensor(call.pages_out, device="cuda", dtype=torch.long)].float()
        return call.o.float(), final, call.pool


class Call:
    def __init__(self, c, a, o, pool, pages_out, keep):
        self.c, self.a, self.o, self.pool, self.pages_out, self.keep = c, a, o, pool, pages_out, keep


def fla_run(fla_fn, p, h0):
    """FLA on the same tensors: equal lengths as a batch [N, L, H, D] (FLA's
    usual path, no varlen recompilation), else packed with cu_seqlens."""
    g, beta = p.gating32()
    if p.N > 1 and len(set(p.seq_lens)) == 1:
        N, L = p.N, p.seq_lens[0]
        o, ht = fla_fn(p.q.view(N, L, p.hqk, p.K), p.k.view(N, L, p.hqk, p.K),
                       p.v.view(N, L, p.hv, p.V), g.view(N, L, p.hv), beta.view(N, L, p.hv),
                       initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=p.l2)
        return o.reshape(p.T, p.hv, p.V), ht
    cu = p.cu.long() if p.N > 1 else None
    o, ht = fla_fn(p.q.unsqueeze(0), p.k.unsqueeze(0), p.v.unsqueeze(0), g.unsqueeze(0),
                   beta.unsqueeze(0), initial_state=h0, output_final_state=True,
                   use_qk_l2norm_in_kernel=p.l2, cu_seqlens=cu)
    return o[0], ht


# ---------------------------------------------------------------- checks ----

# bf16 tensor-core operands (FLA's roundings): max|err|/max|ref| and ||err||/||ref||;
# fp16 inputs take fp16 operands (kernels/cuda/chunked/mma_16bit.cuh): 2^-11 roundings.
TOL_MAX, TOL_L2 = 1e-2, 6e-3
TOL_F16_MAX, TOL_F16_L2 = 2e-3, 1.5e-3
CHECK_DEADLINE = [1e9]  # seconds since T0 after which remaining checks are skipped
CHECK_ONLY = [""]  # --only: run just the checks whose name contains it


def within(e, dtype="bf16"):
    tmax, tl2 = (TOL_F16_MAX, TOL_F16_L2) if dtype == "fp16" else (TOL_MAX, TOL_L2)
    return e["nonfinite"] == 0 and e["max_rel"] < tmax and e["rel_l2"] < tl2


def out_of_time(results, name):
    """True (and the check recorded as skipped) past the deadline or outside --only."""
    if CHECK_ONLY[0] and CHECK_ONLY[0] not in name:
        return True
    if time.time() - T0 > CHECK_DEADLINE[0]:
        results.append({"name": name, "ok": True, "skipped": "time budget"})
        print(f"skip {name} (time budget)", flush=True)
        return True
    return False


def check_case(ours, name, p, results, fla_fn=None, **call_kw):
    if out_of_time(results, name):
        return True
    o, final, pool = ours.run(p, **call_kw)
    ro, rS = reference(p)
    eo, es = errors(o, ro), errors(final, rS)
    ok = within(eo, p.dtype) and within(es, p.dtype if p.state_dtype == "fp32" else "bf16")
    # Pages no sequence writes must stay NaN (poison), so no stray writes.
    N = p.N
    written = set(i if i % 2 == 0 else N + i for i in range(N))
    untouched = [j for j in range(N, 2 * N) if j not in written]
    if untouched:
        ut = pool[torch.tensor(untouched, device="cuda")].float()
        if not torch.isnan(ut).all().item():
            ok = False
            eo["stray_write"] = True
    entry = {"name": name, "ok": ok, "o": eo, "state": es}
    if fla_fn is not None and p.dtype != "fp32" and p.state_dtype == "fp32":
        try:
            fo, fS = fla_run(fla_fn, p, p.h0.float().clone())
            torch.cuda.synchronize()
            entry["fla_o"], entry["fla_state"] = errors(fo.float(), ro), errors(fS.float(), rS)
        except Exception as e:  # noqa: BLE001 (peer failures are reported, not fatal)
            entry["fla_error"] = str(e)[:200]
    results.append(entry)
    fla = ""
    if "fla_o" in entry:
        fla = f" | fla o {entry['fla_o']['max_rel']:.2e} S {entry['fla_state']['max_rel']:.2e}"
    print(f"{'ok  ' if ok else 'FAIL'} {name:58s} o {eo['max_rel']:.2e}/{eo['rel_l2']:.2e} "
          f"S {es['max_rel']:.2e}/{es['rel_l2']:.2e}{fla} [{time.time() - T0:.0f}s]", flush=True)
    return ok


def run_checks(ours, fla_fn, results, base_seed=100):
    """In priority order (the time budget may cut the tail)."""
    ok = True
    mix = [65, 1, 130, 64, 1000, 7, 257, 63, 2]
    mix_init = [True, False, True, True, False, True, False, True, True]
    seed = base_seed
    # 1. Group sizes 1, 2, 4 (the grouped kernel 1 loops over them), every
    #    head-dim combination, lengths around the chunk size, varlen mixes.
    for (hqk, hv, K, V) in [(2, 4, 128, 128), (4, 4, 128, 128), (1, 4, 128, 128),
                            (2, 4, 64, 64), (2, 2, 64, 128), (1, 4, 128, 64)]:
        for L in [1, 63, 64, 65, 1000]:
            seed += 1
            ok &= check_case(ours, f"H{hqk}/{hv} K{K} V{V} len {L}", Problem(hqk, hv, K, V, [L], seed=seed),
                             results)
        seed += 1
        ok &= check_case(ours, f"H{hqk}/{hv} K{K} V{V} varlen mix",
                         Problem(hqk, hv, K, V, mix, init=mix_init, seed=seed), results)
    # 2. Chained prefills, prefill -> decode, a bad page id, gdn_prefill's routing.
    ok &= check_chained(ours, results, seed + 3)
    ok &= check_bad_page(ours, results, seed + 4)
    for lens, kernel in (([300, 257], "auto"), ([40, 70], "auto"), ([300, 65], "recurrent")):
        seed += 1
        ok &= check_case(ours, f"gdn_prefill {kernel} {lens}", Problem(2, 4, 128, 128, lens, seed=seed),
                         results, kernel=kernel)
    # 3. V tiles on the same kind of inputs.
    for vt in (16, 32, 64):
        seed += 1
        ok &= check_case(ours, f"v_tile {vt}: H2/4 K128 V128 varlen mix",
                         Problem(2, 4, 128, 128, mix, init=mix_init, seed=seed), results, v_tile=vt)
        seed += 1
        ok &= check_case(ours, f"v_tile {vt}: H1/2 K64 V64 varlen mix",
                         Problem(1, 2, 64, 64, mix, seed=seed), results, v_tile=vt)
    # 4. Dtypes, gating, norm, extreme gates (FLA on the same inputs where it applies).
    variants = [
        dict(state_dtype="bf16"), dict(fused=True), dict(fused=True, state_dtype="bf16"),
        dict(l2=False), dict(dtype="fp16"), dict(dtype="fp32"),
        dict(profile="nodecay"), dict(profile="strongdecay"), dict(profile="beta0"),
        dict(profile="beta1"), dict(fused=True, profile="beta1"), dict(init=False),
        dict(profile="allequal"), dict(dtype="fp16", profile="allequal"),
        dict(dtype="fp16", fused=True), dict(dtype="fp16", profile="strongdecay"),
    ]
    for var in variants:
        for lens in ([1000], mix):
            seed += 1
            kw = dict(var)
            init = kw.pop("init", mix_init if lens is mix else True)
            p = Problem(4, 8, 128, 128, lens, init=init, seed=seed, **kw)
            desc = ",".join(f"{k}={v}" for k, v in var.items())
            # fp32 inputs: the chunked kernel is not compiled for them (issue 22);
            # gdn_prefill routes them to the recurrent kernel.
            route = dict(kernel="auto") if kw.get("dtype") == "fp32" else {}
            ok &= check_case(ours, f"H4/8 K128 V128 {desc} {len(lens)} seqs", p, results, fla_fn,
                             **route)
    # 5. The server's default shape, a long sequence; 16/64 (G = 4).
    ok &= check_case(ours, "H16/32 K128 V128 len 8192", Problem(16, 32, 128, 128, [8192], seed=seed + 1),
                     results, fla_fn)
    ok &= check_case(ours, "H4/16 K128 V128 2 x 2000", Problem(4, 16, 128, 128, [2000, 2000], seed=seed + 2),
                     results, fla_fn)
    return ok


def check_chained(ours, results, seed):
    if out_of_time(results, "chained"):
        return True
    ok = True
    full = Problem(4, 8, 128, 128, [700, 130], seed=seed)
    ro, rS = reference(full)
    # first part 300 + 65 tokens, then the rest, via the state pages
    idx1 = torch.cat([torch.arange(0, 300), torch.arange(700, 765)]).cuda()
    idx2 = torch.cat([torch.arange(300, 700), torch.arange(765, 830)]).cuda()

    def part(src, idx, lens, h0):
        p = Problem(4, 8, 128, 128, lens, seed=0)
        p.q, p.k, p.v = src.q[idx], src.k[idx], src.v[idx]
        p.g, p.beta = src.g[idx], src.beta[idx]
        p.h0 = h0
        return p

    p1 = part(full, idx1, [300, 65], full.h0)
    o1, s1, _ = ours.run(p1)
    p2 = part(full, idx2, [400, 65], s1)
    o2, s2, _ = ours.run(p2)
    o = torch.empty_like(ro, dtype=torch.float32)
    o[idx1], o[idx2] = o1, o2
    eo, es = errors(o, ro), errors(s2, rS)
    good = within(eo) and within(es)
    results.append({"name": "prefill -> prefill (state through pages)", "ok": good, "o": eo, "state": es})
    print(f"{'ok  ' if good else 'FAIL'} prefill -> prefill: o {eo['max_rel']:.2e} S {es['max_rel']:.2e}",
          flush=True)
    ok &= good
    # prefill (chunked) -> decode (gdn_decode), 1..8 tokens per sequence
    full = Problem(4, 8, 128, 128, [500 + 3, 64 + 8, 1 + 1], seed=seed + 1)
    ro, rS = reference(full)
    pre, dec, fs = [500, 64, 1], [3, 8, 1], [0, 503, 575]
    idx1 = torch.cat([torch.arange(fs[i], fs[i] + pre[i]) for i in range(3)]).cuda()
    idx2 = torch.cat([torch.arange(fs[i] + pre[i], fs[i] + pre[i] + dec[i]) for i in range(3)]).cuda()
    p1 = part(full, idx1, pre, full.h0)
    call1 = ours.prepare(p1)
    ours.call(call1)
    torch.cuda.synchronize()
    p2 = part(full, idx2, dec, None)
    p2.has_init = [True] * 3
    pages = call1.pages_out
    try:
        call2 = ours.prepare(p2, pages_in=pages, pages_out=pages, pool=call1.pool)
        ours.call(call2, kernel="decode")
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        print("decode failed:", e, flush=True)
        results.append({"name": "prefill -> decode", "ok": False, "error": str(e)})
        return False
    o = torch.empty_like(ro, dtype=torch.float32)
    o[idx1], o[idx2] = call1.o.float(), call2.o.float()
    sfin = call1.pool[torch.tensor(pages, device="cuda", dtype=torch.long)].float()
    eo, es = errors(o, ro), errors(sfin, rS)
    good = within(eo) and within(es)
    results.append({"name": "prefill -> decode (gdn_decode)", "ok": good, "o": eo, "state": es})
    print(f"{'ok  ' if good else 'FAIL'} prefill -> decode: o {eo['max_rel']:.2e} S {es['max_rel']:.2e}",
          flush=True)
    return ok and good


def check_bad_page(ours, results, seed):
    if out_of_time(results, "bad page"):
        return True
    p = Problem(2, 4, 128, 128, [100, 70], seed=seed)
    call = ours.prepare(p, pages_in=[0, 1], pages_out=[0, 99])
    ours.call(call)
    torch.cuda.synchronize()
    ro, rS = reference(p)
    first = errors(call.o[:100].float(), ro[:100])
    second_nan = bool(torch.isnan(call.o[100:].float()).all().item())
    good = within(first) and second_nan
    results.append({"name": "bad final page -> NaN o, others fine", "ok": good, "o": first})
    print(f"{'ok  ' if good else 'FAIL'} bad page: first seq o {first['max_rel']:.2e}, second all NaN "
          f"{second_nan}", flush=True)
    return good


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
