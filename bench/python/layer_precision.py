#!/usr/bin/env python3
"""One GDN layer of a bf16 Qwen3-Next, every implementation against the float64 oracle.

Why the bf16 logits of the remote and the native model differ
(transformers_speed.py): this captures the GDN core inputs of the first GDN
layer of the same small random model (transformers_speed.make_model; batch
4, a 256-token prompt) and runs each implementation on exactly those bf16
tensors:

    torch     transformers' own torch core (fp32 inside, o rounded to bf16)
    fla       flash-linear-attention's chunk / fused_recurrent (when importable)
    server    gdn-server through gdn_serve.fla (the same signature)
    oracle    the recurrence in float64 on the same inputs (q/k L2-normalised,
              q scaled by K^-1/2, S <- exp(g) S + k (beta (v - k^T S))^T,
              o = q^T S; q/k head j // (Hv / Hqk) serves value head j)

The first prompt - decode_tokens tokens go through the chunked (prefill)
core, the rest one token at a time through the recurrent core from each
implementation's own final state. Printed per implementation and phase: the
largest |o - oracle| over max |oracle| and the RMS of the difference over
the RMS of the oracle; and bf16's own rounding of the oracle's o (the floor
any bf16 output has).

    gdn-server --backend=cuda --layers=6 --activation_dtype=bf16 --listen=unix:/tmp/g.sock
    python3 bench/python/layer_precision.py --target unix:/tmp/g.sock --json_out p.json
"""

import argparse
import inspect
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gdn_serve  # noqa: E402
import gdn_serve.fla  # noqa: E402
from transformers_speed import make_model  # noqa: E402


def capture(model, ids):
    """The kwargs of the first GDN core call of the model's first GDN layer (prefill)."""
    import torch
    home = sys.modules[type(model).__module__]
    name = "torch_chunk_gated_delta_rule"
    original = getattr(home, name)
    seen = []

    def spy(query, key, value, g=None, beta=None, **kwargs):
        if not seen:
            seen.append({"q": query.clone(), "k": key.clone(), "v": value.clone(),
                         "g": g.clone(), "beta": beta.clone()})
        return original(query, key, value, g=g, beta=beta, **kwargs)

    setattr(home, name, spy)
    try:
        with torch.no_grad():
            model(ids, use_cache=True)
    finally:
        setattr(home, name, original)
    return seen[0]


def oracle(x, state=None):
    """float64 o [B, T, Hv, V] and final state [B, Hv, K, V] of x's tokens."""
    import torch
    q, k, v, g, beta = (x[n].to(torch.float64) for n in ("q", "k", "v", "g", "beta"))
    hv, kdim = v.shape[2], q.shape[-1]
    q = q.repeat_interleave(hv // q.shape[2], dim=2)
    k = k.repeat_interleave(hv // k.shape[2], dim=2)
    q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) * kdim ** -0.5
    k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    b, t = v.shape[:2]
    s = torch.zeros(b, hv, kdim, v.shape[-1], dtype=torch.float64, device=v.device) \
        if state is None else state.clone()
    o = torch.empty_like(v)
    for i in range(t):
        s = s * g[:, i].exp()[..., None, None]
        kt = k[:, i]                                        # [B, Hv, K]
        u = beta[:, i][..., None] * (v[:, i] - torch.einsum("bhk,bhkv->bhv", kt, s))
        s = s + kt[..., :, None] * u[..., None, :]
        o[:, i] = torch.einsum("bhk,bhkv->bhv", q[:, i], s)
    return o, s


def errors(o, ref):
    import torch
    d = (o.to(torch.float64) - ref)
    return {"max_rel": float(d.abs().max() / ref.abs().max()),
            "rms_rel": float(d.pow(2).mean().sqrt() / ref.pow(2).mean().sqrt())}


def run_impl(chunk, recurrent, prefill, tokens):
    """o of the prefill part, then of each decode token (one call each)."""
    import torch
    o, state = chunk(prefill["q"], prefill["k"], prefill["v"], g=prefill["g"], beta=prefill["beta"],
                     initial_state=None, output_final_state=True, use_qk_l2norm_in_kernel=True)
    steps = []
    for x in tokens:
        step, state = recurrent(x["q"], x["k"], x["v"], g=x["g"], beta=x["beta"],
                                initial_state=state, output_final_state=True,
                                use_qk_l2norm_in_kernel=True)
        steps.append(step)
    return o, torch.cat(steps, dim=1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--small", action="store_true", help="tiny fp32 model (cpu smoke test)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--prompt", type=int, default=256)
    p.add_argument("--decode_tokens", type=int, default=8)
    p.add_argument("--dtype", choices=["bf16", "fp32"], help="the model's (default: bf16, "
                   "fp32 with --small)")
    p.add_argument("--json_out")
    a = p.parse_args()
    import torch
    model = make_model(a.device, a.small, {None: None, "bf16": torch.bfloat16,
                                           "fp32": torch.float32}[a.dtype])
    home = sys.modules[type(model).__module__]
    ids = torch.randint(1, 1024, (a.batch, a.prompt), generator=torch.Generator().manual_seed(1))
    x = capture(model, ids.to(a.device))
    split = a.prompt - a.decode_tokens
    prefill = {n: t[:, :split] for n, t in x.items()}
    tokens = [{n: t[:, i:i + 1] for n, t in x.items()} for i in range(split, a.prompt)]
    ref_prefill, state = oracle(prefill)
    ref_decode, _ = oracle({n: t[:, split:] for n, t in x.items()}, state)
    dtype = x["v"].dtype
    results = {"batch": a.batch, "prompt": a.prompt, "decode_tokens": a.decode_tokens,
               "dtype": str(dtype), "shape": {n: list(t.shape) for n, t in x.items()},
               "rounding_floor": {"prefill": errors(ref_prefill.to(dtype), ref_prefill),
                                  "decode": errors(ref_decode.to(dtype), ref_decode)}}
    # transformers' wrapper may call FLA when importable: its torch code is unwrapped
    impls = {"torch": (inspect.unwrap(getattr(home, "torch_chunk_gated_delta_rule")),
                       inspect.unwrap(getattr(home, "torch_recurrent_gated_delta_rule")))}
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
        if a.device == "cuda":
            impls["fla"] = (chunk_gated_delta_rule, fused_recurrent_gated_delta_rule)
    except ImportError as e:
        results["fla"] = "not importable: %s" % e
    client = gdn_serve.Client(a.target, timeout=120)
    gdn_serve.fla.set_default_client(client)
    impls["server"] = (gdn_serve.fla.chunk_gated_delta_rule,
                       gdn_serve.fla.fused_recurrent_gated_delta_rule)
    for name, (chunk, recurrent) in impls.items():
        with torch.no_grad():
            o_prefill, o_decode = run_impl(chunk, recurrent, prefill, tokens)
        results[name] = {"prefill": errors(o_prefill, ref_prefill),
                         "decode": errors(o_decode, ref_decode)}
    client.close()
    for name in ["rounding_floor"] + list(impls):
        r = results[name]
        print("%-15s prefill max %.2e rms %.2e | decode max %.2e rms %.2e" % (
            name, r["prefill"]["max_rel"], r["prefill"]["rms_rel"], r["decode"]["max_rel"],
            r["decode"]["rms_rel"]), flush=True)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
