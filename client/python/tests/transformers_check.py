"""A small random Qwen3-Next run natively and with remote GDN, compared.

Used by tests/test_transformers.py (CI, cpu server) and by
scripts/device/python_visit.sh (the H200: cuda model, cuda server). Needs torch and
transformers; the server must have Hqk 2, Hv 4, K = V = 64, >= 3 layers,
gating direct, fp32 activations.

The bound (BOUND, max|logits_remote - logits_native| / max|logits_native|):
both sides compute the same function in fp32 with different summation orders
(the native side: transformers' chunked torch core for prefill, its recurrent
one for decode, or FLA where installed; the server: its own kernels). A GDN
output element sums O(K + C) = 64 + 64 rounded products (K: the q.S and k.S
dot products, C: the chunk of 64 tokens), so its relative error is at most
(K + C) u = 128 * 2^-24 = 7.6e-6 on each side, 1.5e-5 between them. The rest
of the network carries a relative change of the GDN outputs to the logits
with a gain measured on this model at 0.14 to 0.20 (every GDN output times
1 + 1e-5 N(0, 1), 5 draws); allowing 10x that for correlated errors (gain 2)
and the 3 GDN layers' errors adding: 1.5e-5 * 2 * 3 = 9e-5, so BOUND = 1e-4.
The measured errors are printed and committed with the device run.
"""

import math

BOUND = 1e-4
PROMPT_TOKENS = 12
DECODE_STEPS = 16
BATCH = 2


def tiny_config():
    from transformers import Qwen3NextConfig
    return Qwen3NextConfig(
        vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
        layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"],
        num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=64,
        linear_value_head_dim=64, linear_conv_kernel_dim=4,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
        shared_expert_intermediate_size=64, max_position_embeddings=512, pad_token_id=0,
        eos_token_id=None, bos_token_id=None)


def tiny_model(device="cpu", seed=0):
    import torch
    from transformers import Qwen3NextForCausalLM
    torch.manual_seed(seed)
    model = Qwen3NextForCausalLM(tiny_config()).to(device=device, dtype=torch.float32).eval()
    return model


def _cache_kw(model) -> str:
    """The name of the cache argument: `cache` in newer transformers, `past_key_values` before."""
    import inspect
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _rel(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max())


def _prefill_and_decode(model, ids, steps):
    """Logits of a prefill and `steps` greedy decode steps, and the tokens fed."""
    import torch
    with torch.no_grad():
        out = model(ids, use_cache=True)
        logits = [out.logits]
        cache = out.past_key_values
        tokens = []
        for _ in range(steps):
            nxt = out.logits[:, -1:].argmax(-1)
            tokens.append(nxt)
            out = model(nxt, use_cache=True, **{_cache_kw(model): cache})
            cache = out.past_key_values
            logits.append(out.logits)
    return logits, tokens


def _replay(model, ids, tokens):
    """The same calls with the tokens of another run (so both sides see the same inputs)."""
    import torch
    with torch.no_grad():
        out = model(ids, use_cache=True)
        logits = [out.logits]
        cache = out.past_key_values
        for nxt in tokens:
            out = model(nxt, use_cache=True, **{_cache_kw(model): cache})
            cache = out.past_key_values
            logits.append(out.logits)
    return logits


def _generate(model, ids, steps):
    import torch
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                             return_dict_in_generate=True, output_logits=True)
    return out.sequences, torch.stack(out.logits)


def compare(client, device="cpu", regions="off"):
    """Runs every comparison; returns a dict of results (errors, pass flags, sizes).
    regions: use_remote_gdn's (CUDA staging buffers with "cuda"; cuda_region_check.py)."""
    import torch
    import transformers
    from gdn_serve.transformers import use_remote_gdn

    model = tiny_model(device)
    ids = torch.randint(1, 256, (BATCH, PROMPT_TOKENS), generator=torch.Generator().manual_seed(1))
    ids = ids.to(device)
    native_logits, tokens = _prefill_and_decode(model, ids, DECODE_STEPS)
    native_seq, native_gen_logits = _generate(model, ids, DECODE_STEPS)
    with torch.no_grad():
        native_nocache = model(ids, use_cache=False).logits

    handle = use_remote_gdn(model, client, regions=regions)
    try:
        remote_logits = _replay(model, ids, tokens)
        remote_seq, remote_gen_logits = _generate(model, ids, DECODE_STEPS)
        with torch.no_grad():
            remote_nocache = model(ids, use_cache=False).logits
            single = model(ids[:1], use_cache=False).logits  # a new prompt of another batch size
        sessions_seen = handle.prompt
        staged = any(s is not None for s in handle._staging.values())
    finally:
        handle.close()
    with torch.no_grad():
        restored = model(ids, use_cache=False).logits

    prefill_error = _rel(remote_logits[0], native_logits[0])
    decode_errors = [_rel(r, n) for r, n in zip(remote_logits[1:], native_logits[1:])]
    generate_error = _rel(remote_gen_logits, native_gen_logits)
    results = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "device": device,
        "server": "%s (%s)" % (client.info().backend, client.info().device),
        "batch": BATCH, "prompt_tokens": PROMPT_TOKENS, "decode_steps": DECODE_STEPS,
        "bound": BOUND,
        "prefill_rel_error": prefill_error,
        "decode_rel_error_max": max(decode_errors),
        "generate_rel_error": generate_error,
        "generate_same_tokens": bool(torch.equal(remote_seq, native_seq)),
        "generated_tokens": int(remote_seq.shape[1] - PROMPT_TOKENS),
        "no_cache_rel_error": _rel(remote_nocache, native_nocache),
        "batch1_rel_error": _rel(single, native_nocache[:1]),
        "prompts_started": sessions_seen,
        "regions": regions, "cuda_staging_used": staged,
        "restored_bitwise": bool(torch.equal(restored, native_nocache)),
    }
    errors = [prefill_error, max(decode_errors), generate_error, results["no_cache_rel_error"],
              results["batch1_rel_error"]]
    results["passed"] = (all(math.isfinite(e) and e <= BOUND for e in errors)
                         and results["generate_same_tokens"] and results["restored_bitwise"]
                         and results["generated_tokens"] >= DECODE_STEPS)
    return results
