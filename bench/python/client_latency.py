#!/usr/bin/env python3
"""Per-call latency of the Python client (gdn_serve) and its own overhead.

Against a server that does no compute (gdn-server --diagnostic_no_compute, or
the echo server gdn-echo), for each case (B sessions x T tokens per Forward,
layer 0, bf16 activations at the server's shape):

    end_to_end   Client.forward through gdn_serve.forward_sessions: P50 / P99
    transport    the same request's bytes, prebuilt, through the raw gRPC call
                 (what any client pays: serialization by gRPC, the wire, the server)
    overhead     time in gdn_serve's own code per call: checking and packing
                 the tensors, writing the request, splitting, parsing the
                 response, o as numpy / torch (measured around the raw call of
                 the same loop, so it excludes the transport)

The issue's bar: overhead <= 10% of transport for decode 1 x 1 and 32 x 1 and
prefill 1 x 2048.

    python3 bench/python/client_latency.py --target 127.0.0.1:50051 \\
        --cases decode:1x1,decode:32x1,prefill:1x2048 --calls 2000 --json_out out.json
"""

import argparse
import json
import platform
import sys
import time

import numpy as np

import gdn_serve
from gdn_serve import wire


def percentile(values, q):
    return float(np.percentile(np.asarray(values), q))


def make_inputs(config, tokens, kind):
    """bf16 inputs [T, ...]: numpy uint16 bits, or torch bf16 (cpu / cuda)."""
    rng = np.random.default_rng(0)
    shapes = {"q": (tokens, config.num_qk_heads, config.head_dim_k),
              "k": (tokens, config.num_qk_heads, config.head_dim_k),
              "v": (tokens, config.num_v_heads, config.head_dim_v)}
    x = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    x["g"] = -np.abs(rng.standard_normal((tokens, config.num_v_heads))).astype(np.float32) / 16
    x["beta"] = np.full((tokens, config.num_v_heads), 0.5, np.float32)
    if kind == "numpy":
        for n in ("q", "k", "v"):
            x[n] = gdn_serve.dtypes.float32_to_bf16_bits(x[n])
        return x
    import torch
    device = "cuda" if kind == "torch-cuda" else "cpu"
    out = {n: torch.from_numpy(a).to(device) for n, a in x.items()}
    for n in ("q", "k", "v"):
        out[n] = out[n].to(torch.bfloat16)
    return out


def open_sessions(client, count):
    """count sessions (one routing group); fixed ids where the server has no sessions (echo)."""
    group = gdn_serve.new_session_id().replace("g-", "r-")
    sessions = []
    for i in range(count):
        sid = gdn_serve.new_session_id(group)
        try:
            client.create_session(sid)
        except gdn_serve.GdnError as e:
            if e.code.name != "UNIMPLEMENTED":
                raise
        sessions.append(gdn_serve.Session(client, sid, [0] * client.config.num_layers))
    return sessions


def run_case(client, batch, tokens, calls, warmup, kind):
    config = client.config
    x = make_inputs(config, batch * tokens, kind)
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"])
    sessions = open_sessions(client, batch)
    call = client._calls["Forward"]
    client.cached_info()
    overhead, transport, end_to_end = [], [], []
    for i in range(warmup + calls):
        sequences = [(s.id, s.positions[0], tokens) for s in sessions]
        t0 = time.perf_counter()
        prepared = client._prepare_forward(0, sequences, dict(zip(("q", "k", "v", "g", "beta"), args)))
        payloads = [prepared.payload(p) for p in prepared.parts]
        t1 = time.perf_counter()
        raws = [call(p, timeout=client.timeout) for p in payloads]
        t2 = time.perf_counter()
        o, positions = prepared.finish([(r, wire.parse_forward_response(r)) for r in raws])
        t3 = time.perf_counter()
        for s, p in zip(sessions, positions):
            s.positions[0] = p
        if i >= warmup:
            overhead.append((t1 - t0) + (t3 - t2))
            transport.append(t2 - t1)
    for i in range(warmup + calls):
        t0 = time.perf_counter()
        gdn_serve.forward_sessions(client, 0, sessions, [tokens] * batch, *args)
        t1 = time.perf_counter()
        if i >= warmup:
            end_to_end.append(t1 - t0)
    for s in sessions:
        try:
            s.close()
        except gdn_serve.GdnError:
            pass
    ms = 1e3
    return {
        "sessions": batch, "tokens_per_session": tokens, "calls": calls, "inputs": kind,
        "parts": len(prepared.parts), "request_bytes": sum(len(p) for p in payloads),
        "end_to_end_p50_ms": percentile(end_to_end, 50) * ms,
        "end_to_end_p99_ms": percentile(end_to_end, 99) * ms,
        "transport_p50_ms": percentile(transport, 50) * ms,
        "transport_p99_ms": percentile(transport, 99) * ms,
        "overhead_p50_ms": percentile(overhead, 50) * ms,
        "overhead_p99_ms": percentile(overhead, 99) * ms,
        "overhead_over_transport_p50": percentile(overhead, 50) / percentile(transport, 50),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", required=True)
    parser.add_argument("--cases", default="decode:1x1,decode:32x1,prefill:1x2048",
                        help="NAME:BxT,... (B sessions of T tokens per call)")
    parser.add_argument("--calls", type=int, default=2000, help="measured calls per decode case")
    parser.add_argument("--prefill_calls", type=int, default=100, help="measured calls per prefill case")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--inputs", default="numpy", help="numpy, torch or torch-cuda (comma list)")
    parser.add_argument("--json_out")
    a = parser.parse_args()
    client = gdn_serve.Client(a.target, timeout=120)
    info = client.info()
    results = {"target": a.target, "server": {"backend": info.backend, "device": info.device,
                                                "version": info.version},
               "shape": [info.config.num_qk_heads, info.config.num_v_heads,
                         info.config.head_dim_k, info.config.head_dim_v],
               "activation_dtype": gdn_serve.dtypes.NAMES.get(info.config.activation_dtype),
               "python": sys.version.split()[0], "host": platform.node(),
               "gdn_serve": gdn_serve.__version__, "numpy": np.__version__,
               "grpcio": __import__("grpc").__version__, "cases": []}
    print("| case | inputs | end-to-end P50 / P99 ms | transport P50 / P99 ms | overhead P50 / P99 ms | overhead / transport |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kind in a.inputs.split(","):
        for case in a.cases.split(","):
            name, size = case.split(":")
            batch, tokens = (int(v) for v in size.split("x"))
            calls = a.prefill_calls if name == "prefill" else a.calls
            r = run_case(client, batch, tokens, calls, a.warmup, kind)
            r["case"] = case
            results["cases"].append(r)
            print("| %s | %s | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | %.1f%% |" % (
                case, kind, r["end_to_end_p50_ms"], r["end_to_end_p99_ms"], r["transport_p50_ms"],
                r["transport_p99_ms"], r["overhead_p50_ms"], r["overhead_p99_ms"],
                100 * r["overhead_over_transport_p50"]), flush=True)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(results, f, indent=2)
    client.close()


if __name__ == "__main__":
    main()
