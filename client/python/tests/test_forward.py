"""Client.forward against the float64 reference: every activation dtype, GVA,
several sessions in one call, prefill + decode, direct and fused gating, and
prefills split under a small message limit."""

import numpy as np
import pytest

import gdn_serve
from gdn_serve import dtypes
from gdn_serve.forward_call import ForwardLayout, PreparedForward
from inputs import TOLERANCE, direct_inputs, fused_inputs, rows
from reference import fused_gates, gdn_reference, relative_error, round_to


def _wire_name(client):
    return dtypes.NAMES[client.config.activation_dtype]


def _rounded(inputs, wire):
    return {n: (round_to(t, wire) if n in ("q", "k", "v") else t) for n, t in inputs.items()}


def test_prefill_then_decode_matches_reference(any_dtype_client):
    client = any_dtype_client
    config = client.config
    wire = config.activation_dtype
    x = direct_inputs(np.random.default_rng(1), 41, config)
    sid = client.create_session()
    position = 0
    outputs = []
    for begin, end in [(0, 37), (37, 38), (38, 39), (39, 41)]:  # prefill, 2 decodes, 2 tokens
        part = rows(x, begin, end)
        o, positions = client.forward_with_positions(
            1, [(sid, position, end - begin)], part["q"], part["k"], part["v"], part["g"],
            part["beta"])
        assert o.dtype == np.float32 and o.shape == (end - begin, 4, 64)
        position = positions[0]
        assert position == end
        outputs.append(o)
    r = _rounded(x, wire)
    ref, _ = gdn_reference(r["q"], r["k"], r["v"], r["g"], r["beta"])
    assert relative_error(np.concatenate(outputs), ref) < TOLERANCE[_wire_name(client)]
    client.close_session(sid)


def test_several_sessions_in_one_call(client):
    config = client.config
    rng = np.random.default_rng(2)
    counts = [1, 7, 2]
    sids = [client.create_session() for _ in counts]
    history = [direct_inputs(rng, 5, config) for _ in counts]  # earlier tokens of each
    for sid, h in zip(sids, history):
        client.forward(0, [(sid, 0, 5)], h["q"], h["k"], h["v"], h["g"], h["beta"])
    new = [direct_inputs(rng, n, config) for n in counts]
    packed = {name: np.concatenate([n[name] for n in new]) for name in new[0]}
    o, positions = client.forward_with_positions(
        0, [(s, 5, n) for s, n in zip(sids, counts)], packed["q"], packed["k"], packed["v"],
        packed["g"], packed["beta"])
    assert positions == [5 + n for n in counts]
    offset = 0
    for h, n_in, n in zip(history, new, counts):
        full = _rounded({name: np.concatenate([h[name], n_in[name]]) for name in h},
                        dtypes.BF16)
        ref, _ = gdn_reference(full["q"], full["k"], full["v"], full["g"], full["beta"])
        assert relative_error(o[offset:offset + n], ref[5:]) < TOLERANCE["bf16"]
        offset += n


def test_fused_gating_matches_reference(server_fused):
    client = gdn_serve.Client(server_fused.address, timeout=60)
    config = client.config
    assert config.gating_mode == "fused"
    x = fused_inputs(np.random.default_rng(3), 20, config)
    x["a_log"][0] = np.log(16.0)  # a real gate reaches g ~ -60 per token
    s = client.session()
    o1 = s.forward(2, x["q"][:12], x["k"][:12], x["v"][:12], a=x["a"][:12], b=x["b"][:12],
                   a_log=x["a_log"], dt_bias=x["dt_bias"])
    o2 = s.forward(2, x["q"][12:], x["k"][12:], x["v"][12:], a=x["a"][12:], b=x["b"][12:],
                   a_log=x["a_log"], dt_bias=x["dt_bias"])
    g, beta = fused_gates(x["a"], x["b"], x["a_log"], x["dt_bias"])
    r = _rounded(x, dtypes.BF16)
    ref, _ = gdn_reference(r["q"], r["k"], r["v"], g, beta)
    assert relative_error(np.concatenate([o1, o2]), ref) < TOLERANCE["bf16"]
    with pytest.raises(gdn_serve.InvalidArgument, match="g: not used with gating=fused"):
        s.forward(2, x["q"][:1], x["k"][:1], x["v"][:1], x["a"][:1], a=x["a"][:1], b=x["b"][:1],
                  a_log=x["a_log"], dt_bias=x["dt_bias"])
    s.close()
    client.close()


def test_numpy_dtypes_give_the_same_bytes(client):
    """float32 (rounded here), float64, and bf16 bits (uint16) send the same tensor;
    o comes back in v's dtype (uint16 bits for bits)."""
    x = direct_inputs(np.random.default_rng(4), 3, client.config)
    results = []
    for convert in (lambda t: t, lambda t: t.astype(np.float64), dtypes.float32_to_bf16_bits):
        sid = client.create_session()
        o = client.forward(0, [(sid, 0, 3)], convert(x["q"]), convert(x["k"]), convert(x["v"]),
                           x["g"], x["beta"])
        assert o.dtype == convert(x["v"]).dtype
        results.append(dtypes.bf16_bits_to_float32(o) if o.dtype == np.uint16 else o)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


def test_split_prefill_matches_one_call(server_bf16):
    x = direct_inputs(np.random.default_rng(5), 100, gdn_serve.Client(server_bf16.address).config)
    small = gdn_serve.Client(server_bf16.address, timeout=60, max_message_bytes=80_000)
    prepared = PreparedForward(ForwardLayout(small.config), small.message_limit(small.cached_info()), 0,
                               [("a", 3, 60), ("b", 0, 40)], dict(x))
    assert len(prepared.parts) > 3  # ~13 tokens of 1056 bytes per part
    assert prepared.parts[0].pieces[0] == (0, "a", 3, prepared.parts[0].end)
    sid_a, sid_b = small.create_session(), small.create_session()
    o, positions = small.forward_with_positions(0, [(sid_a, 0, 60), (sid_b, 0, 40)], x["q"],
                                                x["k"], x["v"], x["g"], x["beta"])
    assert positions == [60, 40]
    r = _rounded(x, dtypes.BF16)
    ref_a, _ = gdn_reference(*(r[n][:60] for n in ("q", "k", "v", "g", "beta")))
    ref_b, _ = gdn_reference(*(r[n][60:] for n in ("q", "k", "v", "g", "beta")))
    assert relative_error(o[:60], ref_a) < TOLERANCE["bf16"]
    assert relative_error(o[60:], ref_b) < TOLERANCE["bf16"]
    small.close()


def test_one_token_larger_than_a_message_is_refused(server_bf16):
    tiny = gdn_serve.Client(server_bf16.address, max_message_bytes=65_000)
    x = direct_inputs(np.random.default_rng(6), 2, tiny.config)
    with pytest.raises(gdn_serve.InvalidArgument, match="does not fit in a message"):
        tiny.forward(0, [("s", 0, 2)], x["q"], x["k"], x["v"], x["g"], x["beta"])
    tiny.close()


def test_shapes_checked_before_sending(client):
    x = direct_inputs(np.random.default_rng(7), 2, client.config)
    with pytest.raises(gdn_serve.InvalidArgument, match=r"q: shape \[2, 4, 64\], expected \[2, 2, 64\]"):
        client.forward(0, [("nobody", 0, 2)], np.zeros((2, 4, 64), np.float32), x["k"], x["v"],
                       x["g"], x["beta"])
    with pytest.raises(gdn_serve.InvalidArgument, match="layer: must be in"):
        client.forward(3, [("nobody", 0, 2)], x["q"], x["k"], x["v"], x["g"], x["beta"])
    with pytest.raises(gdn_serve.InvalidArgument, match="beta: required"):
        client.forward(0, [("nobody", 0, 2)], x["q"], x["k"], x["v"], x["g"])
    with pytest.raises(gdn_serve.InvalidArgument, match="num_tokens"):
        client.forward(0, [("nobody", 0, 0)], x["q"][:0], x["k"][:0], x["v"][:0], x["g"][:0],
                       x["beta"][:0])


def test_inline_request_takes_only_wire_ready_numpy(client):
    """Client.forward writes the common call (numpy tensors already in the wire
    storage dtype, C order, one message) without a PreparedForward; anything
    else goes through PreparedForward (None here), and both give the same o."""
    config = client.config
    layout = ForwardLayout(config)
    x = direct_inputs(np.random.default_rng(9), 3, config)
    bits = {n: (dtypes.float32_to_bf16_bits(t) if n in ("q", "k", "v") else t)
            for n, t in x.items()}
    seqs = [("s", 4, 3)]

    def inline(layer=0, limit=1 << 20, **changes):
        t = dict(bits, a=None, b=None, a_log=None, dt_bias=None)
        t.update(changes)
        return layout.inline_request(limit, layer, seqs, t["q"], t["k"], t["v"], t["g"],
                                     t["beta"], t["a"], t["b"], t["a_log"], t["dt_bias"])

    payload, plan, tail, positions, torch = inline()
    assert positions == [7] and plan.total == 3 and torch is None  # o as numpy
    prepared = PreparedForward(layout, 1 << 20, 0, seqs, dict(bits))
    assert payload == prepared.payload(prepared.parts[0])
    assert inline(q=x["q"]) is None                       # float32: converted
    assert inline(k=bits["k"][:, ::-1]) is None           # not C order
    assert inline(v=bits["v"][:2]) is None                # a shape PreparedForward refuses
    assert inline(layer=config.num_layers) is None        # refused there too
    assert inline(a=x["g"]) is None                       # a superfluous gating tensor
    assert inline(limit=1000) is None                     # split
    outputs = []
    for tensors in (bits, dict(bits, q=np.asfortranarray(bits["q"]))):  # inline, then prepared
        sid = client.create_session()
        o = client.forward(0, [(sid, 0, 3)], tensors["q"], tensors["k"], tensors["v"],
                           tensors["g"], tensors["beta"])
        assert o.dtype == np.uint16 and o.shape == (3, config.num_v_heads, config.head_dim_v)
        outputs.append(o)
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_answer_in_another_form_is_parsed(client):
    """A response that is not the server's usual form (here with an unknown
    field after the positions, which protobuf skips) is parsed, not refused."""
    config = client.config
    x = {n: (dtypes.float32_to_bf16_bits(t) if n in ("q", "k", "v") else t)
         for n, t in direct_inputs(np.random.default_rng(10), 2, config).items()}
    plain = client.create_session()
    want = client.forward(0, [(plain, 0, 2)], x["q"], x["k"], x["v"], x["g"], x["beta"])
    real = client._calls["Forward"]
    client._calls["Forward"] = lambda payload, **kw: real(payload, **kw) + b"\x78\x01"
    try:
        sid = client.create_session()
        o, positions = client.forward_with_positions(0, [(sid, 0, 2)], x["q"], x["k"], x["v"],
                                                     x["g"], x["beta"])
    finally:
        client._calls["Forward"] = real
    assert positions == [2]
    np.testing.assert_array_equal(o, want)


def test_numpy_calls_never_import_torch(server_bf16):
    """The inline path looks torch up in sys.modules (for CPU torch tensors)
    and never imports it: a process that uses numpy only stays without torch
    (a fresh interpreter, as this one may have imported torch already)."""
    script = r"""
import sys
import numpy as np
import gdn_serve
from gdn_serve import dtypes
c = gdn_serve.Client(sys.argv[1], timeout=60)
cfg = c.config
rng = np.random.default_rng(0)
bits = lambda *s: dtypes.float32_to_bf16_bits(rng.standard_normal(s).astype(np.float32))
q, k = bits(2, cfg.num_qk_heads, cfg.head_dim_k), bits(2, cfg.num_qk_heads, cfg.head_dim_k)
v = bits(2, cfg.num_v_heads, cfg.head_dim_v)
g = np.full((2, cfg.num_v_heads), -0.1, np.float32)
beta = np.full((2, cfg.num_v_heads), 0.5, np.float32)
sid = c.create_session()
o = c.forward(0, [(sid, 0, 1)], q[:1], k[:1], v[:1], g[:1], beta[:1])          # inline
q1 = dtypes.bf16_bits_to_float32(q[1:])  # float32: converted by PreparedForward
o = c.forward(0, [(sid, 1, 1)], q1, k[1:], v[1:], g[1:], beta[1:])
assert o.dtype == np.uint16, o.dtype
assert "torch" not in sys.modules, "torch was imported"
c.close_session(sid)
c.close()
print("ok")
"""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", script, server_bf16.address],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
