#!/usr/bin/env python3
"""A small random Qwen3-Next, natively and with remote GDN: prefill and decode-step time.

Issue 18's check: batch 4, a 256-token prompt, 32 decode steps, 6 GDN layers
(and 2 attention layers), the GDN shape of Qwen3-Next (Hqk 16, Hv 32,
K = V = 128), bf16 on CUDA. The native arm runs flash-linear-attention's
kernels in the model's GDN layers (--native fla, the default, when fla is
importable; transformers itself may not pick them up) or transformers' own
choice (--native transformers); the "native_core" field says which. Each
remote arm runs the same model with use_remote_gdn against a gdn-server on
this host:

    grpc_inline      Forward RPC, tensors inline            (regions="off", channel="off")
    grpc_regions     Forward RPC, CUDA staging regions      (regions="cuda", channel="off")
    channel_regions  same-host Forward channel + regions    (regions="cuda", channel="on")

Times are medians over --repeats runs of the whole prefill and of each decode
step (torch.cuda.synchronize around each), after one warm-up run. Outputs
are checked too: each remote arm is fed the native run's greedy tokens and
its logits of every call are compared with the native ones (max relative
error, printed; bf16 on both sides, so ~1e-2 is expected). The server needs gating direct, >= 6 layers,
the model's shape and bf16 activations:

    gdn-server --backend=cuda --layers=6 --activation_dtype=bf16 --listen=unix:/tmp/g.sock
    python3 bench/python/transformers_speed.py --target unix:/tmp/g.sock --json_out t.json

On a machine without CUDA, --device cpu --small runs the same steps on a tiny
model (Hqk 2, Hv 4, K = V = 64, fp32) against a cpu server (a smoke test).
"""

import argparse
import json
import statistics
import time

import gdn_serve
from gdn_serve.transformers import use_remote_gdn


def make_model(device, small):
    import torch
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
    heads = (2, 4, 64, 64) if small else (16, 32, 128, 128)
    layer_types = ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + [
        "full_attention"]
    config = Qwen3NextConfig(
        vocab_size=1024, hidden_size=256 if small else 1024, intermediate_size=512 if small else 2048,
        num_hidden_layers=8, layer_types=layer_types, num_attention_heads=8,
        num_key_value_heads=2, head_dim=64, linear_num_key_heads=heads[0],
        linear_num_value_heads=heads[1], linear_key_head_dim=heads[2],
        linear_value_head_dim=heads[3], linear_conv_kernel_dim=4, num_experts=4,
        num_experts_per_tok=2, moe_intermediate_size=256, shared_expert_intermediate_size=256,
        max_position_embeddings=4096, pad_token_id=0, eos_token_id=None, bos_token_id=None)
    torch.manual_seed(0)
    dtype = torch.float32 if small else torch.bfloat16
    return Qwen3NextForCausalLM(config).to(device=device, dtype=dtype).eval()


def use_fla(model):
    """Puts flash-linear-attention's kernels into the model's GDN layers (the
    instance attributes transformers 4.57 .. 5.1x call), where transformers
    did not pick them up itself; True when it did so."""
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
    except ImportError:
        return False
    done = False
    for m in model.modules():
        if type(m).__name__ == "Qwen3NextGatedDeltaNet" and hasattr(m, "chunk_gated_delta_rule"):
            m.chunk_gated_delta_rule = chunk_gated_delta_rule
            m.recurrent_gated_delta_rule = fused_recurrent_gated_delta_rule
            done = True
    return done


def core_name(model):
    """Which GDN core the native model runs (FLA's kernels or transformers' torch code)."""
    for m in model.modules():
        if type(m).__name__ == "Qwen3NextGatedDeltaNet":
            fn = getattr(m, "chunk_gated_delta_rule", None)
            if fn is None:
                import transformers.models.qwen3_next.modeling_qwen3_next as mod
                fn = getattr(mod, "chunk_gated_delta_rule", None) or mod.torch_chunk_gated_delta_rule
            return "%s.%s" % (getattr(fn, "__module__", "?"), getattr(fn, "__name__", "?"))
    return "?"


def run(model, ids, steps, device, tokens=None):
    """(prefill seconds, [decode step seconds], [logits per call], tokens fed).

    tokens: the decode inputs to feed (another run's greedy tokens), so that
    two runs see the same inputs and their logits compare; None: greedy."""
    import torch

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    with torch.no_grad():
        sync()
        t0 = time.perf_counter()
        out = model(ids, use_cache=True)
        sync()
        prefill = time.perf_counter() - t0
        cache = out.past_key_values
        kw = "cache" if "cache" in __import__("inspect").signature(model.forward).parameters \
            else "past_key_values"
        step_times, logits, fed = [], [out.logits.float()], []
        for i in range(steps):
            nxt = out.logits[:, -1:].argmax(-1) if tokens is None else tokens[i]
            fed.append(nxt)
            sync()
            t0 = time.perf_counter()
            out = model(nxt, use_cache=True, **{kw: cache})
            sync()
            step_times.append(time.perf_counter() - t0)
            cache = out.past_key_values
            logits.append(out.logits.float())
    return prefill, step_times, logits, fed


def measure(model, ids, steps, repeats, device, tokens=None):
    """Median times over `repeats` runs (after a warm-up run), the logits and tokens of the last."""
    run(model, ids, steps, device, tokens)  # warm-up: kernels compiled, buffers allocated
    prefills, steps_all = [], []
    for _ in range(repeats):
        p, s, logits, fed = run(model, ids, steps, device, tokens)
        prefills.append(p)
        steps_all.extend(s)
    return {"prefill_ms": 1e3 * statistics.median(prefills),
            "decode_step_ms": 1e3 * statistics.median(steps_all),
            "decode_step_p90_ms": 1e3 * sorted(steps_all)[int(0.9 * (len(steps_all) - 1))]
            }, logits, fed


ARMS = {"grpc_inline": ("off", "off"), "grpc_regions": ("cuda", "off"),
        "channel_regions": ("cuda", "on"), "channel_inline": ("off", "on")}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--small", action="store_true", help="tiny fp32 model (cpu smoke test)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--prompt", type=int, default=256)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--arms", default="grpc_inline,grpc_regions,channel_regions")
    p.add_argument("--native", default="fla", choices=["fla", "transformers"],
                   help="the native arm's GDN core on cuda: FLA's kernels (when importable) "
                        "or whatever transformers picks")
    p.add_argument("--json_out")
    a = p.parse_args()
    import torch
    import transformers
    model = make_model(a.device, a.small)
    if a.device == "cuda" and a.native == "fla" and not use_fla(model):
        print("flash-linear-attention not importable (or not patchable): the native arm runs "
              "transformers' own core", flush=True)
    ids = torch.randint(1, 1024, (a.batch, a.prompt), generator=torch.Generator().manual_seed(1))
    ids = ids.to(a.device)
    native, native_logits, tokens = measure(model, ids, a.steps, a.repeats, a.device)
    results = {"batch": a.batch, "prompt": a.prompt, "decode_steps": a.steps,
               "repeats": a.repeats, "gdn_layers": 6, "device": a.device, "small": a.small,
               "torch": torch.__version__, "transformers": transformers.__version__,
               "native_core": core_name(model), "native": native, "remote": {}}
    print("native (%s): prefill %.2f ms, decode step %.3f ms" % (
        results["native_core"], native["prefill_ms"], native["decode_step_ms"]), flush=True)
    client = gdn_serve.Client(a.target, timeout=120)
    results["server"] = "%s (%s)" % (client.info().backend, client.info().device)
    for arm in a.arms.split(","):
        regions, channel = ARMS[arm]
        if a.device != "cuda" and regions == "cuda":
            continue
        try:
            handle = use_remote_gdn(model, client, regions=regions, channel=channel)
        except Exception as e:  # reported, the other arms run
            results["remote"][arm] = {"error": "%s: %s" % (type(e).__name__, e)}
            print("%s: %s" % (arm, results["remote"][arm]["error"]), flush=True)
            continue
        try:
            r, logits, _ = measure(model, ids, a.steps, a.repeats, a.device, tokens)
        finally:
            handle.close()
        # The same inputs as the native run (its greedy tokens fed back):
        # the largest relative difference of any call's logits.
        r["logits_rel_error"] = max(float((x - n).abs().max() / n.abs().max())
                                    for x, n in zip(logits, native_logits))
        r["prefill_ratio"] = r["prefill_ms"] / native["prefill_ms"]
        r["decode_step_ratio"] = r["decode_step_ms"] / native["decode_step_ms"]
        results["remote"][arm] = r
        print("%s: prefill %.2f ms (%.2fx), decode step %.3f ms (%.2fx), logits rel err %.2e" % (
            arm, r["prefill_ms"], r["prefill_ratio"], r["decode_step_ms"], r["decode_step_ratio"],
            r["logits_rel_error"]), flush=True)
        if a.json_out:
            with open(a.json_out, "w") as f:
                json.dump(results, f, indent=2)
    client.close()
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
