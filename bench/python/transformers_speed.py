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
step (torch.cuda.synchronize around each), after one warm-up run; then
--rounds rounds in which every arm runs once in turn give the "interleaved"
medians and ratios (the host's speed moves between runs, so those compare
the same moments). Outputs
are checked too: each remote arm is fed the native run's greedy tokens, and
every arm's logits of every call (the native one's included) are compared
with those of the model's float32 copy run by transformers' torch core on the
same tokens (relative: max |x - ref| / max |ref|; the prefill call, the median
and the largest over calls), and with the native arm's. --profile_steps N adds
a cProfile of a prefill and N decode steps per arm (where a remote step's time
goes); --trace_steps N a torch.profiler trace of N decode steps per arm (host
and GPU: the time the host waits in stream synchronisations, the GPU's busy
time, the top operators by host and by GPU time). The server needs gating direct, >= 6 layers, the model's shape and
bf16 activations:

    gdn-server --backend=cuda --layers=6 --activation_dtype=bf16 --listen=unix:/tmp/g.sock
    python3 bench/python/transformers_speed.py --target unix:/tmp/g.sock --json_out t.json

On a machine without CUDA, --device cpu --small runs the same steps on a tiny
model (Hqk 2, Hv 4, K = V = 64, fp32) against a cpu server (a smoke test).
"""

import argparse
import copy
import cProfile
import inspect
import io
import json
import pstats
import statistics
import sys
import time

import gdn_serve
from gdn_serve.transformers import use_remote_gdn


def make_model(device, small, dtype=None):
    """The random model; dtype: a torch dtype, default float32 when small else bfloat16."""
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
    dtype = dtype or (torch.float32 if small else torch.bfloat16)
    return Qwen3NextForCausalLM(config).to(device=device, dtype=dtype).eval()


def use_fla(model):
    """Runs flash-linear-attention's kernels as the native GDN core, however the
    installed transformers calls it: the module-level
    `torch_chunk_gated_delta_rule` / `torch_recurrent_gated_delta_rule`
    (transformers 5.2x: q/k with Hqk heads; FLA 0.6 takes them, GVA) or the
    layers' instance attributes (4.57 .. 5.1x). transformers may have picked
    FLA itself at import; patching makes it certain. Returns the name of the
    core now used, or None when FLA is not importable (nothing changed)."""
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
    except ImportError as e:
        print("flash-linear-attention not importable: %s" % e, flush=True)
        return None
    home = sys.modules[type(model).__module__]
    if hasattr(home, "torch_chunk_gated_delta_rule"):
        home.torch_chunk_gated_delta_rule = chunk_gated_delta_rule
        home.torch_recurrent_gated_delta_rule = fused_recurrent_gated_delta_rule
    for m in model.modules():
        if type(m).__name__ == "Qwen3NextGatedDeltaNet" and "chunk_gated_delta_rule" in m.__dict__:
            m.chunk_gated_delta_rule = chunk_gated_delta_rule
            m.recurrent_gated_delta_rule = fused_recurrent_gated_delta_rule
    return "%s.%s" % (chunk_gated_delta_rule.__module__, chunk_gated_delta_rule.__name__)


def core_name(model):
    """The GDN core transformers' own code resolved (its wrapper keeps the torch
    function's name even when it calls a package's kernel: see the wrapper)."""
    home = sys.modules[type(model).__module__]
    fn = getattr(home, "torch_chunk_gated_delta_rule", None)
    for m in model.modules():
        if type(m).__name__ == "Qwen3NextGatedDeltaNet" and "chunk_gated_delta_rule" in m.__dict__:
            fn = m.chunk_gated_delta_rule
    if fn is None:
        return "?"
    inner = inspect.unwrap(fn)
    closure = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ())
               if callable(getattr(c, "cell_contents", None))]
    picked = [f for f in closure if getattr(f, "__module__", "").startswith("fla")]
    fn = picked[0] if picked else inner
    return "%s.%s" % (getattr(fn, "__module__", "?"), getattr(fn, "__name__", "?"))


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
        kw = "cache" if "cache" in inspect.signature(model.forward).parameters \
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


def rel_errors(logits, reference):
    """Relative logits differences (max |x - r| / max |r|) per call: the prefill's
    and the largest over all calls."""
    errs = [float((x - r).abs().max() / r.abs().max()) for x, r in zip(logits, reference)]
    return {"prefill": errs[0], "max": max(errs), "median": statistics.median(errs)}


def profile(model, ids, steps, device, tokens):
    """cProfile of one prefill and `steps` decode steps: the top functions by
    cumulative time, then by own time (where a remote call's host time goes)."""
    prof = cProfile.Profile()
    prof.enable()
    run(model, ids, steps, device, tokens)
    prof.disable()
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(30)
    return text.getvalue()


def trace(model, ids, steps, device, tokens):
    """The trace below, or {"error": ...} (a diagnostic never stops the run)."""
    try:
        return _trace(model, ids, steps, device, tokens)
    except Exception as e:  # noqa: BLE001 - reported in the JSON
        return {"error": "%s: %s" % (type(e).__name__, e)}


def _trace(model, ids, steps, device, tokens):
    """torch.profiler over `steps` decode steps (after a prefill outside it):
    per step the wall time, the GPU's kernel time and the host's time in CUDA
    synchronisation calls, and the top operators by self host / GPU time."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile
    with torch.no_grad():
        out = model(ids, use_cache=True)
        kw = "cache" if "cache" in inspect.signature(model.forward).parameters \
            else "past_key_values"
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        sync()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        with torch_profile(activities=activities) as prof:
            t0 = time.perf_counter()
            for i in range(steps):
                out = model(tokens[i], use_cache=True, **{kw: out.past_key_values})
            sync()
            wall = time.perf_counter() - t0
    events = prof.key_averages()
    gpu_us = sum(e.self_device_time_total for e in events
                 if getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type))
    sync_us = sum(e.cpu_time_total for e in events if "Synchronize" in e.key)
    return {"steps": steps, "wall_ms_per_step": 1e3 * wall / steps,
            "gpu_kernel_ms_per_step": 1e-3 * gpu_us / steps,
            "host_sync_ms_per_step": 1e-3 * sync_us / steps,
            "sync_calls": {e.key: [e.count, round(e.cpu_time_total / max(1, e.count), 1)]
                           for e in events if "Synchronize" in e.key or "EventQuery" in e.key},
            "top_host": events.table(sort_by="self_cpu_time_total", row_limit=20),
            "top_gpu": events.table(sort_by="self_device_time_total", row_limit=12)
            if device == "cuda" else ""}


def fp32_reference(model, ids, steps, device, tokens, torch_cores):
    """The logits of the model's float32 copy fed the same tokens, run by
    transformers' own torch core (`torch_cores`: the unwrapped functions)."""
    import torch
    ref = copy.deepcopy(model).to(torch.float32)
    home = sys.modules[type(model).__module__]
    saved = {n: getattr(home, n) for n in torch_cores}
    try:
        for n, fn in torch_cores.items():
            setattr(home, n, fn)
        _, _, logits, _ = run(ref, ids, steps, device, tokens)
    finally:
        for n, fn in saved.items():
            setattr(home, n, fn)
    del ref
    return logits


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
    p.add_argument("--profile_steps", type=int, default=0,
                   help="also profile (cProfile) a prefill and this many decode steps per arm")
    p.add_argument("--trace_steps", type=int, default=0,
                   help="also trace (torch.profiler) this many decode steps per arm")
    p.add_argument("--rounds", type=int, default=2,
                   help="then this many rounds in which the native arm and every remote arm "
                        "take turns (one run each): the ratios of the same moments "
                        "(\"interleaved\" in the JSON)")
    p.add_argument("--json_out")
    a = p.parse_args()
    import torch
    import transformers
    model = make_model(a.device, a.small)
    home = sys.modules[type(model).__module__]
    torch_cores = {n: inspect.unwrap(getattr(home, n)) for n in
                   ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")
                   if hasattr(home, n)}
    if a.device == "cuda" and a.native == "fla":
        use_fla(model)
    ids = torch.randint(1, 1024, (a.batch, a.prompt), generator=torch.Generator().manual_seed(1))
    ids = ids.to(a.device)
    native, native_logits, tokens = measure(model, ids, a.steps, a.repeats, a.device)
    # Every arm's logits against the float32 model on the same tokens: the
    # rounding of each arm's own dtype, next to the arms' difference.
    reference = fp32_reference(model, ids, a.steps, a.device, tokens, torch_cores)
    native["logits_vs_fp32"] = rel_errors(native_logits, reference)
    results = {"batch": a.batch, "prompt": a.prompt, "decode_steps": a.steps,
               "repeats": a.repeats, "gdn_layers": 6, "device": a.device, "small": a.small,
               "torch": torch.__version__, "transformers": transformers.__version__,
               "native_core": core_name(model), "native": native, "remote": {}, "profile": {}}
    print("native (%s): prefill %.2f ms, decode step %.3f ms, logits vs fp32 %s" % (
        results["native_core"], native["prefill_ms"], native["decode_step_ms"],
        native["logits_vs_fp32"]), flush=True)
    if a.profile_steps:
        results["profile"]["native"] = profile(model, ids, a.profile_steps, a.device, tokens)
    if a.trace_steps:
        results.setdefault("trace", {})["native"] = trace(model, ids, a.trace_steps, a.device, tokens)

    def save():
        if a.json_out:
            with open(a.json_out, "w") as f:
                json.dump(results, f, indent=2)

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
            if a.profile_steps:
                results["profile"][arm] = profile(model, ids, a.profile_steps, a.device, tokens)
            if a.trace_steps:
                results.setdefault("trace", {})[arm] = trace(model, ids, a.trace_steps, a.device,
                                                             tokens)
        finally:
            handle.close()
        # The same inputs as the native run (its greedy tokens fed back).
        r["logits_vs_native"] = rel_errors(logits, native_logits)
        r["logits_vs_fp32"] = rel_errors(logits, reference)
        r["prefill_ratio"] = r["prefill_ms"] / native["prefill_ms"]
        r["decode_step_ratio"] = r["decode_step_ms"] / native["decode_step_ms"]
        results["remote"][arm] = r
        print("%s: prefill %.2f ms (%.2fx), decode step %.3f ms (%.2fx), logits vs native %s, "
              "vs fp32 %s" % (arm, r["prefill_ms"], r["prefill_ratio"], r["decode_step_ms"],
                              r["decode_step_ratio"], r["logits_vs_native"], r["logits_vs_fp32"]),
              flush=True)
        save()
    arms = [arm for arm, r in results["remote"].items() if "error" not in r]
    if a.rounds and arms:
        results["interleaved_rounds"] = a.rounds
        results["interleaved"] = interleaved(model, client, ids, tokens, a, arms)
        for arm, r in results["interleaved"].items():
            print("interleaved %s: prefill %.2f ms, decode step %.3f ms%s" % (
                arm, r["prefill_ms"], r["decode_step_ms"], "" if arm == "native" else
                " (%.2fx / %.2fx)" % (r["prefill_ratio"], r["decode_step_ratio"])), flush=True)
    client.close()
    save()


def interleaved(model, client, ids, tokens, a, arms):
    """Medians over `a.rounds` rounds in which the native arm and each remote
    arm run once in turn (each remote run after a 2-step warm-up with its
    handle): the host's speed moves between runs (the native step measured
    17-25 ms over five visits), so ratios of the same moments are fairer."""
    times = {arm: ([], []) for arm in ["native"] + arms}
    for _ in range(a.rounds):
        for arm in ["native"] + arms:
            handle = None
            if arm != "native":
                regions, channel = ARMS[arm]
                handle = use_remote_gdn(model, client, regions=regions, channel=channel)
            try:
                if handle is not None:
                    run(model, ids, 2, a.device, tokens)
                prefill, steps, _, _ = run(model, ids, a.steps, a.device, tokens)
            finally:
                if handle is not None:
                    handle.close()
            times[arm][0].append(prefill)
            times[arm][1].extend(steps)
    out = {arm: {"prefill_ms": 1e3 * statistics.median(p), "decode_step_ms": 1e3 * statistics.median(s)}
           for arm, (p, s) in times.items()}
    for arm in arms:
        out[arm]["prefill_ratio"] = out[arm]["prefill_ms"] / out["native"]["prefill_ms"]
        out[arm]["decode_step_ratio"] = out[arm]["decode_step_ms"] / out["native"]["decode_step_ms"]
    return out


if __name__ == "__main__":
    main()
