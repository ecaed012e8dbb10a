#!/usr/bin/env python3
"""Per-call latency of the Python client (gdn_serve) and its own overhead.

Against a server that does no compute (gdn-server --diagnostic_no_compute, or
the echo server gdn-echo), for each case (B sessions x T tokens per Forward,
layer 0 unless --layers, bf16 activations at the server's shape), in one
loop that alternates the kinds of call (so all see the same machine):

    end_to_end   Client.forward through gdn_serve.forward_sessions: P50 / P99
    transport    the same request's bytes, prebuilt, through the raw gRPC call
                 with the same metadata (the x-gdn-route header) and deadline,
                 part after part (what any client pays: gRPC, the wire, the server)
    overhead     end_to_end P50 - transport P50: what gdn_serve adds to a call
                 (checking and packing the tensors, writing the request,
                 splitting, parsing the response, o as numpy / torch; the work
                 a split call hides behind its parts in flight does not count)
    work         gdn_serve's code timed directly around the raw call (the
                 inline request where Client.forward writes one, else the
                 PreparedForward; a split call's parts one after another,
                 nothing hidden): P50 / P99

The issue's bar: overhead <= 10% of transport for decode 1 x 1 and 32 x 1 and
prefill 1 x 2048.

    python3 bench/python/client_latency.py --target 127.0.0.1:50051 \\
        --cases decode:1x1,decode:32x1,prefill:1x2048 --calls 2000 --json_out out.json

--seconds caps each case's time (python_visit.sh uses it to bound a visit).
--layers N calls layers 0..N-1 in turn (the three kinds of call of one
round at the same layer), so that a token's calls see the same positions at
every layer, as a model runner's do (gdn_serve reuses the first layer's
encoding of the sequences); the default, 1, is the worst case: every call at
layer 0 with new positions.
--connections N (with --max_part_bytes small enough to split the call)
spreads end_to_end's parts over N connections (Client(connections=N));
transport stays the raw parts one after another over one connection, so
overhead then also holds what the connections save (it may go negative).
--channel sends every call through a same-host Forward channel
(Client.open_forward_channel) instead of the Forward RPC; transport is then
the channel's raw call.
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


def finish(prepared, raws):
    """(o, positions) of a PreparedForward from its parts' responses (gdn_serve
    before issue 17 took (raw, parsed) pairs: the bench measures either)."""
    if hasattr(prepared, "take_whole"):
        return prepared.finish(raws)
    return prepared.finish([(r, wire.parse_forward_response(r)) for r in raws])


def inline_request(client, layer, sequences, args):
    """ForwardLayout.inline_request as Client.forward calls it (None where this
    gdn_serve has none, or for inputs it does not take as they are)."""
    layout = client._layout
    if not hasattr(layout, "inline_request") or client._region_table is not None:
        return None
    return layout.inline_request(client._limit, layer, sequences, *args, None, None, None, None)


def finish_inline(client, inline, raw):
    """(o, positions) of an inline request's response, as Client.forward takes it
    (o a torch tensor where inline_request says v was one; gdn_serve before
    CPU torch tensors went inline returned 4 items and took numpy only)."""
    plan, tail, positions = inline[1:4]
    torch = inline[4] if len(inline) > 4 else None
    offset = plan.canonical_o(raw, tail)
    assert offset >= 0, "the no-compute server answers in its usual form"
    if torch is not None:
        return gdn_serve.tensors.torch_view(torch, raw, offset, plan.o_shape,
                                            client._layout.activation), positions
    return np.ndarray(plan.o_shape, client._layout.o_storage, raw, offset), positions


def run_case(client, batch, tokens, calls, warmup, kind, seconds=None, layers=1):
    config = client.config
    x = make_inputs(config, batch * tokens, kind)
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"])
    names = ("q", "k", "v", "g", "beta")
    sessions = open_sessions(client, batch)
    call = client._calls["Forward"]
    channel = getattr(client, "_forward_channel", None)
    if channel is not None:  # --channel: the raw call is the channel's
        call = lambda payload, timeout, metadata: channel.call(payload, timeout)  # noqa: E731
    # The x-gdn-route header every call naming a session carries (as the C++ client's do).
    metadata = client._md(sessions[0].id)
    client.cached_info()
    work, transport, end_to_end = [], [], []
    stop = None if seconds is None else time.perf_counter() + seconds
    for i in range(warmup + calls):
        layer = i % layers  # a model's walk over its layers (--layers)
        # work: gdn_serve's code around the raw calls, part by part.
        sequences = [(s.id, s.positions[layer], tokens) for s in sessions]
        t0 = time.perf_counter()
        inline = None if channel is not None else inline_request(client, layer, sequences, args)
        if inline is not None:  # the client's path for tensors in the wire dtype, one message
            payloads = [inline[0]]
            t1 = time.perf_counter()
            raws = [call(payloads[0], timeout=client.timeout, metadata=metadata)]
            t2 = time.perf_counter()
            o, positions = finish_inline(client, inline, raws[0])
        else:
            prepared = client._prepare_forward(layer, sequences, dict(zip(names, args)))
            payloads = [prepared.payload(p) for p in prepared.parts]
            t1 = time.perf_counter()
            raws = [call(p, timeout=client.timeout, metadata=metadata) for p in payloads]
            t2 = time.perf_counter()
            o, positions = finish(prepared, raws)
        t3 = time.perf_counter()
        for s, p in zip(sessions, positions):
            s.positions[layer] = p
        # transport: the next call's bytes (built beforehand) through the raw call.
        sequences = [(s.id, s.positions[layer], tokens) for s in sessions]
        prepared = client._prepare_forward(layer, sequences, dict(zip(names, args)))
        payloads = [prepared.payload(p) for p in prepared.parts]
        t4 = time.perf_counter()
        raws = [call(p, timeout=client.timeout, metadata=metadata) for p in payloads]
        t5 = time.perf_counter()
        parts, request_bytes = len(payloads), sum(len(p) for p in payloads)
        for s, p in zip(sessions, finish(prepared, raws)[1]):
            s.positions[layer] = p
        del o, raws, payloads, prepared
        # end to end: the client's call as an application makes it.
        t6 = time.perf_counter()
        gdn_serve.forward_sessions(client, layer, sessions, [tokens] * batch, *args)
        t7 = time.perf_counter()
        if i >= warmup:
            work.append((t1 - t0) + (t3 - t2))
            transport.append(t5 - t4)
            end_to_end.append(t7 - t6)
            if stop is not None and time.perf_counter() > stop and len(work) >= 10:
                break
    for s in sessions:
        try:
            s.close()
        except gdn_serve.GdnError:
            pass
    ms = 1e3
    e2e50, tr50 = percentile(end_to_end, 50), percentile(transport, 50)
    return {
        "sessions": batch, "tokens_per_session": tokens, "calls": len(work), "inputs": kind,
        "parts": parts, "request_bytes": request_bytes,
        "end_to_end_p50_ms": e2e50 * ms,
        "end_to_end_p99_ms": percentile(end_to_end, 99) * ms,
        "transport_p50_ms": tr50 * ms,
        "transport_p99_ms": percentile(transport, 99) * ms,
        "overhead_p50_ms": (e2e50 - tr50) * ms,
        "overhead_over_transport_p50": (e2e50 - tr50) / tr50,
        "work_p50_ms": percentile(work, 50) * ms,
        "work_p99_ms": percentile(work, 99) * ms,
        "work_over_transport_p50": percentile(work, 50) / tr50,
    }


def write(path, results):
    """The results so far (after every case: a run cut short keeps what it measured)."""
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=2)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", required=True)
    parser.add_argument("--cases", default="decode:1x1,decode:32x1,prefill:1x2048",
                        help="NAME:BxT,... (B sessions of T tokens per call)")
    parser.add_argument("--calls", type=int, default=2000, help="measured calls per decode case")
    parser.add_argument("--prefill_calls", type=int, default=100, help="measured calls per prefill case")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seconds", type=float, help="at most this long per case (after warmup)")
    parser.add_argument("--layers", type=int, default=1,
                        help="call layers 0..N-1 in turn, positions advancing after each round "
                             "(a model's walk: a token's layers see the same positions); 1: "
                             "every call at layer 0, positions advancing every call")
    parser.add_argument("--max_part_bytes", type=int, help="the client's max_part_bytes (default: its own)")
    parser.add_argument("--connections", type=int, default=1,
                        help="the client's connections: a split call's parts over this many at once")
    parser.add_argument("--inputs", default="numpy", help="numpy, torch or torch-cuda (comma list)")
    parser.add_argument("--channel", action="store_true",
                        help="Forward through a same-host channel (open_forward_channel)")
    parser.add_argument("--json_out")
    parser.add_argument("--allocator", default="keep", choices=["keep", "default"],
                        help="keep: gdn_serve.keep_freed_memory() first, as gdn-bench and "
                             "gdn-server keep freed memory; default: glibc's defaults")
    a = parser.parse_args()
    if a.allocator == "keep":
        gdn_serve.keep_freed_memory()
    options = {} if a.max_part_bytes is None else {"max_part_bytes": a.max_part_bytes}
    client = gdn_serve.Client(a.target, timeout=120, connections=a.connections, **options)
    info = client.info()
    if a.channel:
        client.open_forward_channel(slots=1, request_capacity=64 << 20,
                                    response_capacity=64 << 20)
    results = {"target": a.target, "server": {"backend": info.backend, "device": info.device,
                                                "version": info.version},
               "shape": [info.config.num_qk_heads, info.config.num_v_heads,
                         info.config.head_dim_k, info.config.head_dim_v],
               "activation_dtype": gdn_serve.dtypes.NAMES.get(info.config.activation_dtype),
               "python": sys.version.split()[0], "host": platform.node(),
               "gdn_serve": gdn_serve.__version__, "allocator": a.allocator,
               "max_part_bytes": client.max_part_bytes, "connections": client.connections,
               "numpy": np.__version__,
               "grpcio": __import__("grpc").__version__, "channel": a.channel,
               "layers": a.layers, "cases": []}
    print("| case | inputs | end-to-end P50 / P99 ms | transport P50 / P99 ms | overhead P50 ms | overhead / transport | work P50 / P99 ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind in a.inputs.split(","):
        for case in a.cases.split(","):
            name, size = case.split(":")
            batch, tokens = (int(v) for v in size.split("x"))
            calls = a.prefill_calls if name == "prefill" else a.calls
            try:
                r = run_case(client, batch, tokens, calls, a.warmup, kind, a.seconds, a.layers)
            except Exception as e:  # e.g. torch-cuda without a GPU: reported, the rest runs
                results["cases"].append({"case": case, "inputs": kind,
                                         "error": "%s: %s" % (type(e).__name__, e)})
                print("| %s | %s | error: %s: %s |" % (case, kind, type(e).__name__, e), flush=True)
                write(a.json_out, results)
                continue
            r["case"] = case
            results["cases"].append(r)
            write(a.json_out, results)
            print("| %s | %s | %.3f / %.3f | %.3f / %.3f | %.3f | %.1f%% | %.3f / %.3f |" % (
                case, kind, r["end_to_end_p50_ms"], r["end_to_end_p99_ms"], r["transport_p50_ms"],
                r["transport_p99_ms"], r["overhead_p50_ms"], 100 * r["overhead_over_transport_p50"],
                r["work_p50_ms"], r["work_p99_ms"]), flush=True)
    client.close()


if __name__ == "__main__":
    main()
