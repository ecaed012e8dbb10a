"""Chunked prefill problems for the device scripts (compare_fla.py, route_bench.py,
profile_kernels.py): one call's inputs on the GPU (Problem), the float64
reference recurrence (shared/GDN.md), error measures, our kernels through
libgdn_capi.so (Ours) and FLA's chunk_gated_delta_rule on the same tensors."""
import ctypes
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
