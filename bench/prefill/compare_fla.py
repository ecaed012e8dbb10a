#!/usr/bin/env python3
"""Chunked prefill: correctness against a float64 reference, and timing next to
flash-linear-attention's chunk_gated_delta_rule on the same tensors.

Runs on the device machine (torch + triton there). Our kernel is loaded with
ctypes from libgdn_chunked_prefill.so (kernels/cuda/chunked_prefill_capi.cc);
when libgdn_capi.so (kernels/capi) is given too, its gdn_decode continues
prefilled states (prefill -> decode check) and its gdn_prefill (the recurrent
kernel) is timed as a second baseline.

  python3 compare_fla.py --lib build/libgdn_chunked_prefill.so \
      [--capi build/libgdn_capi.so] --out $OUT [--skip-bench] [--budget-s 240]

Writes prefill_checks.json, prefill_bench.json and prefill_bench.md under --out
and prints a short table last. Exit status 1 if any correctness check failed.
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

DTYPES = {"fp32": (0, torch.float32), "bf16": (1, torch.bfloat16), "fp16": (2, torch.float16)}
STATE_DTYPES = {"fp32": (0, torch.float32), "bf16": (1, torch.bfloat16)}
CHUNK = 64
SOLVE_VARIANT = -1  # kernel 1's solver: -1 = the library default, 0 or 1
T0 = time.time()


class ChunkedArgs(ctypes.Structure):
    # Mirrors GdnChunkedPrefillArgs in kernels/cuda/chunked_prefill_capi.cc.
    _fields_ = [
        ("num_seqs", ctypes.c_int32), ("total_tokens", ctypes.c_int32),
        ("cu_seqlens", ctypes.c_void_p), ("cu_seqlens_host", ctypes.c_void_p),
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p), ("g", ctypes.c_void_p), ("beta", ctypes.c_void_p),
        ("a", ctypes.c_void_p), ("b", ctypes.c_void_p), ("A_log", ctypes.c_void_p),
        ("dt_bias", ctypes.c_void_p), ("initial_pages", ctypes.c_void_p),
        ("final_pages", ctypes.c_void_p), ("pool_base", ctypes.c_void_p),
        ("page_bytes", ctypes.c_int64), ("num_pages", ctypes.c_int32),
        ("num_qk_heads", ctypes.c_int32), ("num_v_heads", ctypes.c_int32),
        ("head_dim_k", ctypes.c_int32), ("head_dim_v", ctypes.c_int32),
        ("input_dtype", ctypes.c_int32), ("state_dtype", ctypes.c_int32),
        ("gating", ctypes.c_int32), ("l2_norm_qk", ctypes.c_int32),
        ("scale", ctypes.c_float), ("v_tile", ctypes.c_int32), ("stream", ctypes.c_void_p),
        ("stages", ctypes.c_int32), ("solve_variant", ctypes.c_int32),
    ]


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
        self.q, self.k, self.v = q.to(tdt), k.to(tdt), rn(T, hv, V).to(tdt)
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
    def __init__(self, lib_path):
        self.lib = ctypes.CDLL(lib_path)
        self.lib.gdn_chunked_prefill.argtypes = [ctypes.POINTER(ChunkedArgs), ctypes.c_char_p,
                                                 ctypes.c_int]
        self.lib.gdn_chunked_prefill.restype = ctypes.c_int
        self.err = ctypes.create_string_buffer(1024)

    def prepare(self, p, pages_in=None, pages_out=None, pool=None, v_tile=0):
        """Builds the call: pool of 2N pages; sequence i reads page i (or -1)
        and writes page i (even i, in place) or N + i (odd i, copy on write)."""
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
        a = ChunkedArgs()
        a.num_seqs, a.total_tokens = N, p.T
        a.cu_seqlens, a.cu_seqlens_host = ptr(p.cu), ptr(p.cu_host)
        a.q, a.k, a.v, a.o = ptr(p.q), ptr(p.k), ptr(p.v), ptr(o)
        a.g, a.beta, a.a, a.b = ptr(p.g), ptr(p.beta), ptr(p.a), ptr(p.b)
        a.A_log, a.dt_bias = ptr(p.A_log), ptr(p.dt_bias)
        a.initial_pages, a.final_pages = ptr(pin), ptr(pout)
        a.pool_base = ptr(pool)
        a.page_bytes = hv * K * V * pool.element_size()
        a.num_pages = pool.shape[0]
        a.num_qk_heads, a.num_v_heads, a.head_dim_k, a.head_dim_v = p.hqk, hv, K, V
        a.input_dtype = DTYPES[p.dtype][0]
        a.state_dtype = STATE_DTYPES[p.state_dtype][0]
        a.gating = 1 if p.fused else 0
        a.l2_norm_qk = 1 if p.l2 else 0
        a.scale = 0.0
        a.v_tile = v_tile
        a.solve_variant = SOLVE_VARIANT
        a.stream = torch.cuda.current_stream().cuda_stream
        keep = (pin, pout, o, pool)
        return a, o, pool, pages_out, keep

    def call(self, a):
        rc = self.lib.gdn_chunked_prefill(ctypes.byref(a), self.err, 1024)
        if rc != 0:
            raise RuntimeError(f"gdn_chunked_prefill: {rc} {self.err.value.decode()}")

    def run(self, p, **kw):
        a, o, pool, pages_out, keep = self.prepare(p, **kw)
        self.call(a)
        torch.cuda.synchronize()
        final = pool[torch.tensor(pages_out, device="cuda", dtype=torch.long)].float()
        return o.float(), final, pool


class Capi:
    """kernels/capi's libgdn_capi.so: gdn_decode and the recurrent gdn_prefill."""

    def __init__(self, path):
        self.lib = gdn_capi.load(path)

    def call(self, name, p, o, pool, pin, pout):
        c = gdn_capi.Config(p.hqk, p.hv, p.K, p.V, DTYPES[p.dtype][0], STATE_DTYPES[p.state_dtype][0],
                       1 if p.fused else 0, 1 if p.l2 else 0, 0.0)
        a = gdn_capi.Args()
        a.num_seqs, a.total_tokens = p.N, p.T
        a.cu_seqlens, a.cu_seqlens_host = ptr(p.cu), ptr(p.cu_host)
        a.q, a.k, a.v, a.o = ptr(p.q), ptr(p.k), ptr(p.v), ptr(o)
        a.g, a.beta, a.a, a.b = ptr(p.g), ptr(p.beta), ptr(p.a), ptr(p.b)
        a.A_log, a.dt_bias = ptr(p.A_log), ptr(p.dt_bias)
        a.pool_base = ptr(pool)
        a.page_bytes = p.hv * p.K * p.V * pool.element_size()
        a.num_pages = pool.shape[0]
        a.initial_pages, a.final_pages = ptr(pin), ptr(pout)
        rc = getattr(self.lib, name)(ctypes.byref(c), ctypes.byref(a),
                                     ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if rc != 0:
            raise RuntimeError(f"{name}: {rc} {self.lib.gdn_last_error().decode()}")


def fla_run(fla_fn, p, h0):
    g, beta = p.gating32()
    cu = p.cu.long() if p.N > 1 else None
    o, ht = fla_fn(p.q.unsqueeze(0), p.k.unsqueeze(0), p.v.unsqueeze(0), g.unsqueeze(0),
                   beta.unsqueeze(0), initial_state=h0, output_final_state=True,
                   use_qk_l2norm_in_kernel=p.l2, cu_seqlens=cu)
    return o[0], ht


# ---------------------------------------------------------------- checks ----

# bf16 tensor-core operands (FLA's roundings): max|err|/max|ref| and ||err||/||ref||.
TOL_MAX, TOL_L2 = 1e-2, 6e-3
CHECK_DEADLINE = [1e9]  # seconds since T0 after which remaining checks are skipped


def within(e):
    return e["nonfinite"] == 0 and e["max_rel"] < TOL_MAX and e["rel_l2"] < TOL_L2


def check_case(ours, name, p, results, fla_fn=None, tol=None):
    if time.time() - T0 > CHECK_DEADLINE[0]:
        results.append({"name": name, "ok": True, "skipped": "time budget"})
        print(f"skip {name} (time budget)")
        return True
    tol = tol or TOL_MAX
    o, final, pool = ours.run(p)
    ro, rS = reference(p)
    eo, es = errors(o, ro), errors(final, rS)
    ok = within(eo) and within(es)
    # Pages no sequence writes must stay NaN (poison), so no stray writes.
    N = p.N
    written = set(i if i % 2 == 0 else N + i for i in range(N))
    untouched = [j for j in range(N, 2 * N) if j not in written]
    if untouched:
        ut = pool[torch.tensor(untouched, device="cuda")].float()
        if not torch.isnan(ut).all().item():
            ok = False
            eo["stray_write"] = True
    entry = {"name": name, "ok": ok, "o": eo, "state": es, "tol": tol}
    if fla_fn is not None and p.dtype != "fp32" and p.state_dtype == "fp32":
        try:
            fo, fS = fla_run(fla_fn, p, p.h0.float().clone())
            torch.cuda.synchronize()
            entry["fla_o"], entry["fla_state"] = errors(fo.float(), ro), errors(fS.float(), rS)
        except Exception as e:  # noqa: BLE001 (peer failures are reported, not fatal)
            entry["fla_error"] = str(e)[:200]
    results.append(entry)
    flag = "ok  " if ok else "FAIL"
    fla = ""
    if "fla_o" in entry:
        fla = f" | fla o {entry['fla_o']['max_rel']:.2e} S {entry['fla_state']['max_rel']:.2e}"
    print(f"{flag} {name:58s} o {eo['max_rel']:.2e}/{eo['rel_l2']:.2e} "
          f"S {es['max_rel']:.2e}/{es['rel_l2']:.2e}{fla} [{time.time() - T0:.0f}s]", flush=True)
    return ok


def run_checks(ours, capi, fla_fn, results):
    """In priority order (a time budget may cut the tail)."""
    global SOLVE_VARIANT
    ok = True
    lengths = [1, 63, 64, 65, 1000, 4096]
    mix = [65, 1, 130, 64, 1000, 7, 257, 63, 2]
    mix_init = [True, False, True, True, False, True, False, True, True]
    shapes = [(2, 4, 128, 128), (2, 4, 64, 64), (2, 2, 64, 128), (1, 4, 128, 64)]
    seed = 100
    # 1. Every head-dim combination, lengths around the chunk size, varlen mixes.
    for (hqk, hv, K, V) in shapes:
        for L in lengths:
            if (K, V) != (128, 128) and L == 4096:
                continue
            seed += 1
            p = Problem(hqk, hv, K, V, [L], seed=seed)
            ok &= check_case(ours, f"H{hqk}/{hv} K{K} V{V} len {L}", p, results)
        seed += 1
        p = Problem(hqk, hv, K, V, mix, init=mix_init, seed=seed)
        ok &= check_case(ours, f"H{hqk}/{hv} K{K} V{V} varlen mix", p, results)
    # 2. Chained prefills, prefill -> decode, a bad page id.
    ok &= check_chained(ours, capi, results, seed + 3)
    ok &= check_bad_page(ours, results, seed + 4)
    # 3. Kernel 1's other triangular solver, explicitly.
    SOLVE_VARIANT = 1
    for (hqk, hv, K, V, lens, kw) in [
            (2, 4, 128, 128, [1000], {}), (2, 4, 128, 128, mix, {"init": mix_init}),
            (2, 4, 64, 64, mix, {}), (2, 4, 128, 128, [300, 1], {"fused": True}),
            (2, 4, 128, 128, [300], {"profile": "strongdecay"}),
            (2, 4, 128, 128, [300], {"profile": "nodecay"})]:
        seed += 1
        p = Problem(hqk, hv, K, V, lens, seed=seed, **kw)
        ok &= check_case(ours, f"solver 1: H{hqk}/{hv} K{K} V{V} {len(lens)} seqs {kw}", p, results)
    SOLVE_VARIANT = -1
    # 4. Dtypes, gating, norm, extreme gates (FLA on the same inputs where it applies).
    variants = [
        dict(state_dtype="bf16"), dict(fused=True), dict(fused=True, state_dtype="bf16"),
        dict(l2=False), dict(dtype="fp16"), dict(dtype="fp32"),
        dict(profile="nodecay"), dict(profile="strongdecay"), dict(profile="beta0"),
        dict(profile="beta1"), dict(fused=True, profile="beta1"), dict(init=False),
    ]
    for var in variants:
        for lens in ([1000], mix):
            seed += 1
            kw = dict(var)
            init = kw.pop("init", mix_init if lens is mix else True)
            p = Problem(4, 8, 128, 128, lens, init=init, seed=seed, **kw)
            desc = ",".join(f"{k}={v}" for k, v in var.items())
            ok &= check_case(ours, f"H4/8 K128 V128 {desc} {len(lens)} seqs", p, results, fla_fn)
    # 5. The server's default shape, a long sequence; both V tiles forced.
    p = Problem(16, 32, 128, 128, [8192], seed=seed + 1)
    ok &= check_case(ours, "H16/32 K128 V128 len 8192", p, results, fla_fn)
    if time.time() - T0 < CHECK_DEADLINE[0]:
        p = Problem(2, 4, 128, 128, mix, init=mix_init, seed=seed + 2)
        ro, rS = reference(p)
        for vt in (16, 32):
            o, final, _ = ours.run(p, v_tile=vt)
            eo, es = errors(o, ro), errors(final, rS)
            good = within(eo) and within(es)
            ok &= good
            results.append({"name": f"v_tile {vt}", "ok": good, "o": eo, "state": es})
            print(f"{'ok  ' if good else 'FAIL'} v_tile {vt}: o {eo['max_rel']:.2e} S {es['max_rel']:.2e}")
    return ok


def check_chained(ours, capi, results, seed):
    ok = True
    full = Problem(4, 8, 128, 128, [700, 130], seed=seed)
    ro, rS = reference(full)
    # first part 300 + 65 tokens, then the rest, via the state pages
    cut = [300, 65]
    starts = [0, 700]
    idx1 = torch.cat([torch.arange(0, 300), torch.arange(700, 765)]).cuda()
    idx2 = torch.cat([torch.arange(300, 700), torch.arange(765, 830)]).cuda()

    def part(idx, lens, h0):
        p = Problem(4, 8, 128, 128, lens, seed=0)
        p.q, p.k, p.v = full.q[idx], full.k[idx], full.v[idx]
        p.g, p.beta = full.g[idx], full.beta[idx]
        p.h0 = h0
        return p

    p1 = part(idx1, cut, full.h0)
    o1, s1, _ = ours.run(p1)
    p2 = part(idx2, [400, 65], s1)
    o2, s2, _ = ours.run(p2)
    o = torch.empty_like(ro, dtype=torch.float32)
    o[idx1], o[idx2] = o1, o2
    eo, es = errors(o, ro), errors(s2, rS)
    good = within(eo) and within(es)
    results.append({"name": "prefill -> prefill (state through pages)", "ok": good, "o": eo,
                    "state": es})
    print(f"{'ok  ' if good else 'FAIL'} prefill -> prefill: o {eo['max_rel']:.2e} S {es['max_rel']:.2e}")
    ok &= good
    if capi is None:
        return ok
    # prefill (ours) -> decode (kernels/capi gdn_decode), tokens 1..8 per sequence
    full = Problem(4, 8, 128, 128, [500 + 3, 64 + 8, 1 + 1], seed=seed + 1)
    ro, rS = reference(full)
    pre = [500, 64, 1]
    dec = [3, 8, 1]
    fs = [0, 503, 575]
    idx1 = torch.cat([torch.arange(fs[i], fs[i] + pre[i]) for i in range(3)]).cuda()
    idx2 = torch.cat([torch.arange(fs[i] + pre[i], fs[i] + pre[i] + dec[i]) for i in range(3)]).cuda()
    p1 = part(idx1, pre, full.h0)
    a, o1, pool, pages_out, keep = ours.prepare(p1)
    ours.call(a)
    torch.cuda.synchronize()
    p2 = part(idx2, dec, None)
    o2 = torch.full((p2.T, 8, 128), float("nan"), device="cuda").to(torch.bfloat16)
    pin = torch.tensor(pages_out, dtype=torch.int32, device="cuda")
    try:
        capi.call("gdn_decode", p2, o2, pool, pin, pin)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        print("decode failed:", e)
        results.append({"name": "prefill -> decode", "ok": False, "error": str(e)})
        return False
    o = torch.empty_like(ro, dtype=torch.float32)
    o[idx1], o[idx2] = o1.float(), o2.float()
    sfin = pool[pin.long()].float()
    eo, es = errors(o, ro), errors(sfin, rS)
    good = within(eo) and within(es)
    results.append({"name": "prefill -> decode (kernels/capi gdn_decode)", "ok": good, "o": eo,
                    "state": es})
    print(f"{'ok  ' if good else 'FAIL'} prefill -> decode: o {eo['max_rel']:.2e} S {es['max_rel']:.2e}")
    return ok and good


def check_bad_page(ours, results, seed):
    p = Problem(2, 4, 128, 128, [100, 70], seed=seed)
    a, o, pool, pages_out, keep = ours.prepare(p, pages_in=[0, 1], pages_out=[0, 99])
    ours.call(a)
    torch.cuda.synchronize()
    ro, rS = reference(p)
    first = errors(o[:100].float(), ro[:100])
    second_nan = bool(torch.isnan(o[100:].float()).all().item())
    good = within(first) and second_nan
    results.append({"name": "bad final page -> NaN o, others fine", "ok": good, "o": first})
    print(f"{'ok  ' if good else 'FAIL'} bad page: first seq o {first['max_rel']:.2e}, second all NaN {second_nan}")
    return good


# ------------------------------------------------------------- benchmark ----

BENCH_ROWS = [  # (Hqk, Hv, N, L, FLA from shared/GDN.md in ms)
    (16, 32, 1, 32768, 1.924), (16, 32, 1, 8192, 0.490), (16, 32, 4, 8192, 1.931),
    (16, 32, 8, 1024, 0.517), (16, 64, 1, 32768, 3.441), (16, 64, 8, 4096, 3.491),
    (2, 8, 1, 32768, 0.918), (16, 32, 1, 131072, None), (16, 32, 32, 512, None),
]


def time_ms(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2], ts[0], ts[-1]


def ceilings():
    n = 1 << 28  # 1 GiB fp32
    a = torch.empty(n, device="cuda")
    a.normal_()
    b = torch.empty_like(a)
    med, _, _ = time_ms(lambda: b.copy_(a), reps=10)
    copy_tbs = 2 * n * 4 / (med * 1e-3) / 1e12
    del a, b
    m = 8192
    x = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    med, _, _ = time_ms(lambda: x @ y, reps=10)
    gemm_tf = 2 * m ** 3 / (med * 1e-3) / 1e12
    del x, y
    torch.cuda.empty_cache()
    return copy_tbs, gemm_tf


def run_bench(ours, capi, fla_fn, budget_s, rows_out):
    copy_tbs, gemm_tf = ceilings()
    print(f"ceilings: copy {copy_tbs:.2f} TB/s (read+write), bf16 GEMM {gemm_tf:.0f} TFLOP/s",
          flush=True)
    K = V = 128
    # Crossover with the recurrent kernel (kernels/capi gdn_prefill), 16/32, 8 sequences.
    if capi is not None:
        for L in (16, 64, 256, 1024):
            p = Problem(16, 32, K, V, [L] * 8, seed=3)
            N = 8
            a, o, pool, pages_out, keep = ours.prepare(p, pages_out=[N + i for i in range(N)])
            t_ours, _, _ = time_ms(lambda: ours.call(a), reps=10, warmup=2)
            pin = torch.arange(N, dtype=torch.int32, device="cuda")
            pool2, o2 = pool.clone(), torch.empty_like(o)
            t_rec, _, _ = time_ms(lambda: capi.call("gdn_prefill", p, o2, pool2, pin, pin + N),
                                  reps=10, warmup=2)
            rows_out.append({"crossover": True, "Hqk": 16, "Hv": 32, "N": N, "L": L,
                             "ours_ms": t_ours, "recurrent_ms": t_rec})
            print(f"crossover 16/32 8 x {L}: chunked {t_ours:.3f} ms, recurrent {t_rec:.3f} ms "
                  f"[{time.time() - T0:.0f}s]", flush=True)
    for (hqk, hv, N, L, fla_pub) in BENCH_ROWS:
        if time.time() - T0 > budget_s:
            print(f"budget reached, skipping {hqk}/{hv} {N}x{L}")
            continue
        try:
            p = Problem(hqk, hv, K, V, [L] * N, seed=7)
            T = p.T
            flops = T * hv * (6 * K * V + 10 * CHUNK * K)
            bytes_ = (2 * T * hqk * K * 2 + 2 * T * hv * V * 2 + 2 * T * hv * 4
                      + 2 * N * hv * K * V * 4)
            row = {"Hqk": hqk, "Hv": hv, "N": N, "L": L, "fla_published_ms": fla_pub,
                   "flops": flops, "bytes": bytes_}
            # copy-on-write for every sequence: repeated calls all start from pool[:N]
            a, o, pool, pages_out, keep = ours.prepare(p, pages_out=[N + i for i in range(N)])
            # error first (one call), then time
            ours.call(a)
            torch.cuda.synchronize()
            row["ours_v_tile"] = "auto"
            row["ours_ms"], row["ours_min_ms"], row["ours_max_ms"] = time_ms(lambda: ours.call(a))
            final = pool[torch.tensor(pages_out, device="cuda", dtype=torch.long)].float()
            o_ours = o.float()
            for vt in (16, 32):  # both V tiles, for the auto policy
                a.v_tile = vt
                row[f"ours_vt{vt}_ms"], _, _ = time_ms(lambda: ours.call(a), reps=10, warmup=2)
            a.v_tile = 0
            for st, key in ((1, "ours_prep_ms"), (2, "ours_state_ms")):  # per-kernel split
                a.stages = st
                row[key], _, _ = time_ms(lambda: ours.call(a), reps=10, warmup=2)
            for sv in (0, 1):  # kernel 1 with each solver
                a.stages, a.solve_variant = 1, sv
                row[f"ours_prep_solve{sv}_ms"], _, _ = time_ms(lambda: ours.call(a), reps=10, warmup=2)
            a.stages, a.solve_variant = 0, -1
            fo = fS = None
            try:
                h0 = p.h0.float().clone()
                fo, fS = fla_run(fla_fn, p, h0)
                row["fla_ms"], _, _ = time_ms(lambda: fla_run(fla_fn, p, h0))
            except Exception as e:  # noqa: BLE001
                row["fla_error"] = str(e)[:300]
            if capi is not None and N * L <= 32768:
                pin = torch.tensor([i for i in range(N)], dtype=torch.int32, device="cuda")
                pool2 = pool.clone()
                o2 = torch.empty_like(o)
                try:
                    row["recurrent_ms"], _, _ = time_ms(
                        lambda: capi.call("gdn_prefill", p, o2, pool2, pin, pin + N), reps=5, warmup=1)
                except Exception as e:  # noqa: BLE001
                    row["recurrent_error"] = str(e)[:200]
            if time.time() - T0 < budget_s - 20:
                ro, rS = reference(p)
                row["ours_o"], row["ours_state"] = errors(o_ours, ro), errors(final, rS)
                if fo is not None:
                    row["fla_o"], row["fla_state"] = errors(fo.float(), ro), errors(fS.float(), rS)
                del ro, rS
            for who in ("ours", "fla"):
                if f"{who}_ms" in row:
                    s = row[f"{who}_ms"] * 1e-3
                    row[f"{who}_tflops"] = flops / s / 1e12
                    row[f"{who}_tbs"] = bytes_ / s / 1e12
                    row[f"{who}_pct_gemm"] = 100 * flops / s / 1e12 / gemm_tf
                    row[f"{who}_pct_copy"] = 100 * bytes_ / s / 1e12 / copy_tbs
            rows_out.append(row)
            print(json.dumps(row), flush=True)
            print(f"row {hqk}/{hv} {N} x {L}: ours {row['ours_ms']:.3f} ms, FLA "
                  f"{row.get('fla_ms', float('nan')):.3f} ms [{time.time() - T0:.0f}s]", flush=True)
            del p, a, o, pool, keep, fo, fS
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001 (a failing row is reported, the rest run)
            print(f"row {hqk}/{hv} {N} x {L} failed: {e}", flush=True)
            rows_out.append({"Hqk": hqk, "Hv": hv, "N": N, "L": L, "error": str(e)[:300]})
            torch.cuda.empty_cache()
    return copy_tbs, gemm_tf


def fmt_err(row, who):
    if f"{who}_o" not in row:
        return "-"
    return f"{row[who + '_o']['max_rel']:.1e} / {row[who + '_state']['max_rel']:.1e}"


def markdown(rows, copy_tbs, gemm_tf):
    lines = [f"Ceilings measured in this run: device copy {copy_tbs:.2f} TB/s (read + write), "
             f"bf16 GEMM {gemm_tf:.0f} TFLOP/s.", "",
             "| Hqk/Hv | sequences | ours | FLA (here) | FLA (GDN.md) | recurrent | ours prep + state pass | "
             "ours V tile 16 / 32 | ours TFLOP/s (% GEMM) | ours GB/s (% copy) | ours err o / S | FLA err o / S |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r.get("crossover") or "error" in r:
            continue
        fla = f"{r['fla_ms']:.3f} ms" if "fla_ms" in r else r.get("fla_error", "-")[:40]
        pub = f"{r['fla_published_ms']:.3f} ms" if r["fla_published_ms"] else "-"
        rec = f"{r['recurrent_ms']:.3f} ms" if "recurrent_ms" in r else "-"
        lines.append(
            f"| {r['Hqk']}/{r['Hv']} | {r['N']} x {r['L']} | {r['ours_ms']:.3f} ms | {fla} | {pub} | {rec} | "
            f"{r['ours_prep_ms']:.3f} + {r['ours_state_ms']:.3f} ms "
            f"(prep solver 0 / 1: {r['ours_prep_solve0_ms']:.3f} / {r['ours_prep_solve1_ms']:.3f}) | "
            f"{r['ours_vt16_ms']:.3f} / {r['ours_vt32_ms']:.3f} ms | "
            f"{r['ours_tflops']:.0f} ({r['ours_pct_gemm']:.0f}%) | {r['ours_tbs'] * 1e3:.0f} "
            f"({r['ours_pct_copy']:.0f}%) | {fmt_err(r, 'ours')} | {fmt_err(r, 'fla')} |")
    cross = [r for r in rows if r.get("crossover")]
    if cross:
        lines += ["", "| 16/32, 8 sequences of | chunked (ours) | recurrent (kernels/capi gdn_prefill) |",
                  "| --- | --- | --- |"]
        lines += [f"| {r['L']} | {r['ours_ms']:.3f} ms | {r['recurrent_ms']:.3f} ms |" for r in cross]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--capi", default="")
    ap.add_argument("--out", default=".")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--skip-checks", action="store_true")
    ap.add_argument("--budget-s", type=float, default=240)
    ap.add_argument("--bench-share", type=float, default=0.55)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(torch.cuda.get_device_name(0), torch.__version__, flush=True)
    ours = Ours(args.lib)
    capi = None
    if args.capi and os.path.exists(args.capi):
        try:
            capi = Capi(args.capi)
        except OSError as e:
            print("capi not loaded:", e)
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_fn
    except Exception as e:  # noqa: BLE001
        print("FLA not importable:", e)
        fla_fn = None
    ok = True
    CHECK_DEADLINE[0] = args.budget_s
    if not args.skip_bench:
        rows = []
        copy_tbs, gemm_tf = run_bench(ours, capi, fla_fn, args.budget_s * args.bench_share, rows)
        with open(os.path.join(args.out, "prefill_bench.json"), "w") as f:
            json.dump({"copy_tbs": copy_tbs, "gemm_tflops": gemm_tf, "rows": rows}, f, indent=1)
        try:
            md = markdown(rows, copy_tbs, gemm_tf)
        except Exception as e:  # noqa: BLE001
            md = f"markdown failed: {e}"
        with open(os.path.join(args.out, "prefill_bench.md"), "w") as f:
            f.write(md + "\n")
        print(md, flush=True)
    if not args.skip_checks:
        results = []
        try:
            ok = run_checks(ours, capi, fla_fn, results)
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
        ratios = [r["o"]["max_rel"] / r["fla_o"]["max_rel"] for r in results
                  if "fla_o" in r and r["fla_o"]["max_rel"] > 0]
        if ratios:
            ratios.sort()
            print(f"ours / FLA max_rel on o over {len(ratios)} shared cases: median "
                  f"{ratios[len(ratios) // 2]:.2f}, max {ratios[-1]:.2f}")
    print(f"total {time.time() - T0:.0f} s; checks {'PASSED' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
