#!/usr/bin/env python3
"""Issue 19's model check: a small random Qwen3-Next served remotely with each
state dtype, logits over many decode steps against the fp32-state server's.

One server per state dtype (same layer config, --state_dtype differing),
named on the command line as dtype=target. The model is float32 (so the
only difference between arms is how the server stores the recurrent state);
the fp32 arm decodes greedily, every other arm is fed the same tokens and
its logits of every call are compared with the fp32 arm's:

    rel error of a call = max |x - x_fp32| / max |x_fp32|     (over batch and vocab)

reported for the prefill, the median and the largest over all calls, the
mean over the first and the last quarter of the steps (an error that keeps
growing shows as last >> first), and the share of positions whose argmax
token agrees. The fp32 arm itself is compared with the model run by
transformers' torch core in-process (the server's own error, for scale).

    for d in fp32 bf16 int8 fp8; do
      gdn-server --backend=cuda --layers=6 --activation_dtype=fp32 --state_dtype=$d \\
                 --listen=unix:/tmp/$d.sock & done
    python3 bench/python/state_dtype_logits.py --targets fp32=unix:/tmp/fp32.sock,\\
        bf16=unix:/tmp/bf16.sock,int8=unix:/tmp/int8.sock,fp8=unix:/tmp/fp8.sock --json_out s.json

On a machine without CUDA, --device cpu --small runs the tiny model (Hqk 2,
Hv 4, K = V = 64) against cpu servers started with those head sizes.
"""

import argparse
import json
import os
import statistics
import sys

import gdn_serve
from gdn_serve.transformers import use_remote_gdn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transformers_speed import make_model, run  # noqa: E402


def compare(logits, reference):
    """Per-call relative errors and argmax agreement against `reference`."""
    errs = [float((x - r).abs().max() / r.abs().max()) for x, r in zip(logits, reference)]
    steps = errs[1:]
    quarter = max(1, len(steps) // 4)
    agree = [float((x[:, -1].argmax(-1) == r[:, -1].argmax(-1)).float().mean())
             for x, r in zip(logits, reference)]
    return {"prefill": errs[0], "median": statistics.median(errs), "max": max(errs),
            "first_quarter_mean": statistics.mean(steps[:quarter]) if steps else errs[0],
            "last_quarter_mean": statistics.mean(steps[-quarter:]) if steps else errs[0],
            "argmax_agreement": statistics.mean(agree), "per_call": errs}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--targets", required=True, help="dtype=target,...; fp32 first is the reference")
    p.add_argument("--device", default="cuda")
    p.add_argument("--small", action="store_true", help="tiny model (cpu smoke test)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--prompt", type=int, default=64)
    p.add_argument("--steps", type=int, default=256)
    p.add_argument("--json_out")
    a = p.parse_args()
    import torch
    targets = dict(item.split("=", 1) for item in a.targets.split(","))
    if "fp32" not in targets:
        p.error("--targets needs an fp32 server (the reference)")
    model = make_model(a.device, a.small, torch.float32)
    ids = torch.randint(1, 1024, (a.batch, a.prompt), generator=torch.Generator().manual_seed(2))
    ids = ids.to(a.device)
    # transformers' own torch core, in-process: the fp32 server's scale.
    _, _, native_logits, tokens = run(model, ids, a.steps, a.device)
    results = {"batch": a.batch, "prompt": a.prompt, "decode_steps": a.steps, "device": a.device,
               "small": a.small, "model_dtype": "float32", "arms": {}}
    reference = None
    for dtype in ["fp32"] + [d for d in targets if d != "fp32"]:
        client = gdn_serve.Client(targets[dtype], timeout=120)
        info = client.info()
        handle = use_remote_gdn(model, client)
        try:
            _, _, logits, _ = run(model, ids, a.steps, a.device, tokens)
        finally:
            handle.close()
            client.close()
        arm = {"server": "%s, state %s" % (info.backend, dtype)}
        if reference is None:
            reference = logits
            arm["vs_in_process_torch"] = compare(logits, native_logits)
        else:
            arm["vs_fp32_state"] = compare(logits, reference)
        results["arms"][dtype] = arm
        shown = arm.get("vs_fp32_state") or arm["vs_in_process_torch"]
        print("%s: %s median %.2e max %.2e first/last quarter %.2e / %.2e argmax agree %.3f" % (
            dtype, "vs fp32 state" if "vs_fp32_state" in arm else "vs in-process torch",
            shown["median"], shown["max"], shown["first_quarter_mean"],
            shown["last_quarter_mean"], shown["argmax_agreement"]), flush=True)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
