#!/usr/bin/env python3
"""CUDA regions end to end on the GPU machine (scripts/device/python_visit.sh).

    python3 client/python/tests/cuda_region_check.py --target HOST:PORT [--transformers]
        [--latency] [--json_out F]

Against a running gdn-server --backend=cuda on this host and GPU, from this
process's torch CUDA tensors:

  - bitwise: o of a call whose q/k/v/g/beta lie in a registered CUDA region
    (sent as references), with o inline and with o written into the region
    (out=), equals o of the same call with the tensors inline; also with
    inline and referenced tensors mixed, several sequences, and a second
    call continuing each session;
  - errors, each typed with the server's code and leaving the session at its
    position (a good call at that position then succeeds): unknown region
    (NOT_FOUND), byte size mismatch and offset past the end
    (INVALID_ARGUMENT), NaN in region data (INVALID_ARGUMENT), the same name
    registered twice (ALREADY_EXISTS), a name used after unregistering
    (NOT_FOUND); list_regions before and after;
  - --transformers (a server of the tiny model's shape: Hqk 2, Hv 4, K = V =
    64, fp32): transformers_check.compare with use_remote_gdn(regions="cuda")
    within its bound, staging used, and its logits equal bit for bit to
    regions="off";
  - --latency: per-call P50 of torch CUDA inputs inline vs in a region (o in
    the region too) for decode 1 x 1, 32 x 1 and prefill 1 x 2048.

Prints a JSON summary (and writes it to --json_out); exit status 0 when
every check passed, 0 with "skipped" when torch sees no CUDA device.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # transformers_check

import gdn_serve  # noqa: E402
from gdn_serve.wire import RegionRef  # noqa: E402

NAMES = ("q", "k", "v", "g", "beta")


class Checks:
    def __init__(self):
        self.items = []

    def add(self, name, passed, detail=""):
        self.items.append({"check": name, "passed": bool(passed), "detail": str(detail)[:300]})
        print("%-48s %s %s" % (name, "ok" if passed else "FAILED", detail), flush=True)

    def raises(self, name, error_cls, fn):
        try:
            fn()
        except error_cls as e:
            self.add(name, True, "%s: %s" % (e.code.name, e.message[:120]))
            return
        except Exception as e:  # the wrong error
            self.add(name, False, "%s: %s" % (type(e).__name__, e))
            return
        self.add(name, False, "no error")


def inputs(torch, config, tokens, seed):
    """q, k [T, Hqk, K], v [T, Hv, V] in the activation dtype; g, beta [T, Hv] fp32; on cuda."""
    act = {1: torch.float32, 2: torch.bfloat16, 3: torch.float16}[config.activation_dtype]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    hqk, hv, kd, vd = config.num_qk_heads, config.num_v_heads, config.head_dim_k, config.head_dim_v
    rnd = lambda *s: torch.randn(*s, generator=gen, device="cuda")  # noqa: E731
    return {"q": rnd(tokens, hqk, kd).to(act), "k": rnd(tokens, hqk, kd).to(act),
            "v": rnd(tokens, hv, vd).to(act),
            "g": -torch.nn.functional.softplus(rnd(tokens, hv)) / 16,
            "beta": torch.sigmoid(rnd(tokens, hv))}


class CudaArena:
    """One torch CUDA buffer registered as a region, carved into tensors (256-byte aligned)."""

    def __init__(self, client, torch, nbytes, name):
        self.torch = torch
        self.memory = torch.zeros(nbytes, dtype=torch.uint8, device="cuda")
        self.region = client.register_cuda_region(self.memory, name)
        self.used = 0

    def like(self, x):
        n = x.numel() * x.element_size()
        start = -(-self.used // 256) * 256
        self.used = start + n
        t = self.memory[start:start + n].view(x.dtype).view(x.shape)
        t.copy_(x)
        return t


def bitwise_checks(c, client, torch):
    config = client.config
    x = inputs(torch, config, 37, 1)
    arena = CudaArena(client, torch, 64 << 20, "check-bitwise")
    r = {n: arena.like(x[n]) for n in NAMES}
    sids = [client.create_session() for _ in range(4)]
    o_inline = client.forward(0, [(sids[0], 0, 37)], *(x[n] for n in NAMES))
    prepared = client._prepare_forward(0, [(sids[1], 0, 37)], dict(r))
    c.add("tensors in the region go as references",
          all(type(b) is RegionRef for b in prepared.buffers), [type(b).__name__ for b in prepared.buffers])
    o_ref = client.forward(0, [(sids[1], 0, 37)], *(r[n] for n in NAMES))
    c.add("refs, o inline == inline", torch.equal(o_ref, o_inline))
    out = arena.like(torch.zeros_like(o_inline))
    o_out = client.forward(0, [(sids[2], 0, 37)], *(r[n] for n in NAMES), out=out)
    c.add("refs, o in the region == inline", o_out is out and torch.equal(out, o_inline))
    mixed = dict(r, q=x["q"], beta=x["beta"])
    o_mixed = client.forward(0, [(sids[3], 0, 20), (client.create_session(), 0, 17)],
                             *(mixed[n] for n in NAMES))
    o_split = client.forward(0, [(client.create_session(), 0, 20)], *(x[n][:20] for n in NAMES))
    c.add("mixed inline/refs, two sequences", torch.equal(o_mixed[:20], o_split))
    y = inputs(torch, config, 5, 2)
    ry = {n: arena.like(y[n]) for n in NAMES}
    out2 = arena.like(torch.zeros(5, config.num_v_heads, config.head_dim_v, dtype=o_inline.dtype,
                                  device="cuda"))
    o2_inline = client.forward(0, [(sids[0], 37, 5)], *(y[n] for n in NAMES))
    client.forward(0, [(sids[2], 37, 5)], *(ry[n] for n in NAMES), out=out2)
    c.add("second call continues the session", torch.equal(out2, o2_inline))
    info = {i.name: i for i in client.list_regions()}.get("check-bitwise")
    c.add("list_regions shows it", info is not None and info.byte_size == 64 << 20 and
          info.calls_in_flight == 0, info)
    for sid in sids:
        client.close_session(sid)
    return arena


def error_checks(c, client, torch, arena):
    config = client.config
    x = inputs(torch, config, 4, 3)
    r = {n: arena.like(x[n]) for n in NAMES}
    s = client.session()

    def refused(name, error_cls, **bad):
        args = dict(r, **bad)
        c.raises(name, error_cls, lambda: s.forward(0, *(args[n] for n in NAMES)))
        described = {i.layer: i.position for i in client.describe_session(s.id).layers}
        c.add(name + ": position unchanged", s.positions[0] == 0 and described.get(0, 0) == 0)

    nbytes = r["q"].numel() * r["q"].element_size()
    refused("unknown region", gdn_serve.NotFound, q=RegionRef("no-such-region", 0, nbytes))
    refused("byte size mismatch", gdn_serve.InvalidArgument,
            k=RegionRef(arena.region.name, 0, nbytes - 2))
    refused("offset past the end", gdn_serve.InvalidArgument,
            k=RegionRef(arena.region.name, arena.region.byte_size - 64, nbytes))
    saved = r["g"].clone()
    r["g"].view(-1)[3] = float("nan")
    refused("NaN in region data", gdn_serve.InvalidArgument)
    r["g"].copy_(saved)
    o = s.forward(0, *(r[n] for n in NAMES))
    c.add("good call after the refusals", s.positions[0] == 4 and o.shape[0] == 4)
    c.raises("register the same name twice", gdn_serve.AlreadyExists,
             lambda: client.register_cuda_region(arena.memory, arena.region.name))
    client.unregister_region(arena.region.name)
    c.add("unregistered: gone from list_regions",
          arena.region.name not in [i.name for i in client.list_regions()])
    c.raises("a reference after unregistering", gdn_serve.NotFound,
             lambda: s.forward(0, *(RegionRef(arena.region.name, 0, r["q"].nbytes) if n == "q"
                                    else r[n]
                                    for n in NAMES)))
    s.close()


def transformers_checks(c, client, torch):
    import transformers_check
    results = transformers_check.compare(client, device="cuda", regions="cuda")
    c.add("transformers regions=cuda within bound", results["passed"], results)
    c.add("transformers regions=cuda used staging", results["cuda_staging_used"])
    from gdn_serve.transformers import use_remote_gdn
    model = transformers_check.tiny_model("cuda")
    ids = torch.randint(1, 256, (2, 12), generator=torch.Generator().manual_seed(1)).to("cuda")
    logits = {}
    for mode in ("off", "cuda"):
        with use_remote_gdn(model, client, regions=mode):
            logits[mode], _ = transformers_check._prefill_and_decode(model, ids, 4)
    c.add("transformers logits regions=cuda == off bitwise",
          all(torch.equal(a, b) for a, b in zip(logits["off"], logits["cuda"])))
    return results


def latency(client, torch, calls=200, prefill_calls=20):
    """P50 ms of torch CUDA inputs inline vs in a region (o in the region)."""
    config = client.config
    out = {}
    arena = CudaArena(client, torch, 160 << 20, "check-latency")
    for case, batch, tokens in (("decode:1x1", 1, 1), ("decode:32x1", 32, 1),
                                ("prefill:1x2048", 1, 2048)):
        arena.used = 0
        x = inputs(torch, config, batch * tokens, 4)
        r = {n: arena.like(x[n]) for n in NAMES}
        o = arena.like(torch.zeros(batch * tokens, config.num_v_heads, config.head_dim_v,
                                   dtype=x["v"].dtype, device="cuda"))
        n = prefill_calls if tokens > 1 else calls
        times = {"inline": [], "region": []}
        sessions = {m: [client.session() for _ in range(batch)] for m in times}
        for i in range(n + 5):
            for mode in times:
                args = [x[k] for k in NAMES] if mode == "inline" else [r[k] for k in NAMES]
                t0 = time.perf_counter()
                gdn_serve.forward_sessions(client, 0, sessions[mode], [tokens] * batch, *args,
                                           out=None if mode == "inline" else o)
                torch.cuda.synchronize()
                if i >= 5:
                    times[mode].append(time.perf_counter() - t0)
        for ss in sessions.values():
            for s in ss:
                s.close()
        p50 = {m: 1e3 * sorted(v)[len(v) // 2] for m, v in times.items()}
        out[case] = {"inline_p50_ms": p50["inline"], "region_p50_ms": p50["region"], "calls": n}
        print("latency %-16s inline %.3f ms  region %.3f ms" % (case, p50["inline"], p50["region"]),
              flush=True)
    client.unregister_region(arena.region.name)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--transformers", action="store_true")
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--json_out")
    a = parser.parse_args()
    summary = {"target": a.target}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        summary.update(skipped="torch with CUDA is not available", passed=True)
        print(json.dumps(summary, indent=2))
        return 0
    client = gdn_serve.Client(a.target, timeout=120)
    info = client.info()
    summary.update(server="%s (%s)" % (info.backend, info.device), torch=torch.__version__,
                   gpu=torch.cuda.get_device_name(),
                   shape=[info.config.num_qk_heads, info.config.num_v_heads,
                          info.config.head_dim_k, info.config.head_dim_v],
                   activation_dtype=gdn_serve.dtypes.NAMES.get(info.config.activation_dtype))
    c = Checks()
    try:
        arena = bitwise_checks(c, client, torch)
        error_checks(c, client, torch, arena)
        if a.transformers:
            transformers_checks(c, client, torch)
        if a.latency:
            summary["latency"] = latency(client, torch)
    except Exception as e:  # reported, not raised: the summary still comes out
        import traceback
        traceback.print_exc()
        c.add("ran to the end", False, "%s: %s" % (type(e).__name__, e))
    summary["checks"] = c.items
    summary["passed"] = all(i["passed"] for i in c.items)
    print(json.dumps(summary, indent=2))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(summary, f, indent=2)
    print("CUDA REGION CHECK", "PASSED" if summary["passed"] else "FAILED")
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
