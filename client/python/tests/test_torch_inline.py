"""CPU torch tensors on Client.forward's inline path (ForwardLayout.inline_request).

A torch.Tensor on the CPU, of the wire dtype, shape and contiguous, is written
into the request as it is (no PreparedForward); o comes back as the slow path
(PreparedForward.result) returns it: a torch tensor of v's dtype on the CPU, a
writable view of the response bytes. Anything else goes through
PreparedForward as before: converted, or refused with the same error.
"""

import numpy as np
import pytest

import gdn_serve
from gdn_serve import dtypes
from gdn_serve.forward_call import ForwardLayout, PreparedForward
from inputs import direct_inputs, fused_inputs

torch = pytest.importorskip("torch")

_TORCH = {dtypes.BF16: torch.bfloat16, dtypes.FP16: torch.float16, dtypes.FP32: torch.float32}


def _wire_numpy(x, wire):
    """Inputs as numpy in their wire storage (bf16: uint16 bits; gating fp32)."""
    def one(name, t):
        if name not in ("q", "k", "v"):
            return t
        if wire == dtypes.BF16:
            return dtypes.float32_to_bf16_bits(t)
        return t.astype(dtypes.NUMPY_STORAGE[wire])
    return {n: one(n, t) for n, t in x.items()}


def _as_torch(bits, wire):
    """The same bytes as CPU torch tensors of the wire dtypes (bf16 from its bits)."""
    out = {}
    for n, t in bits.items():
        if n in ("q", "k", "v") and wire == dtypes.BF16:
            out[n] = torch.from_numpy(t.view(np.int16)).view(torch.bfloat16)
        else:
            out[n] = torch.from_numpy(t)
    return out


def _non_contiguous(t):
    """t's values in a non-contiguous tensor (the transpose of a transposed copy)."""
    nc = t.transpose(0, -1).contiguous().transpose(0, -1)
    assert not nc.is_contiguous() and torch.equal(nc, t)
    return nc


def _bits_of(o):
    """o's bytes as a numpy array of its storage dtype (bf16: uint16 bits)."""
    if isinstance(o, np.ndarray):
        return o
    if o.dtype is torch.bfloat16:
        return o.view(torch.int16).numpy().view(np.uint16)
    return o.numpy()


class _Recorder:
    """Wraps client._calls["Forward"]: keeps each response's bytes."""

    def __init__(self, client):
        self.client, self.real, self.responses = client, client._calls["Forward"], []

    def __enter__(self):
        def call(payload, **kw):
            raw = self.real(payload, **kw)
            self.responses.append(raw)
            return raw
        self.client._calls["Forward"] = call
        return self

    def __exit__(self, *exc):
        self.client._calls["Forward"] = self.real


def _assert_view_of(o, raw):
    """o (a torch tensor) lies inside the response bytes `raw`: a view, not a copy."""
    base = np.frombuffer(raw, np.uint8).ctypes.data
    assert base <= o.data_ptr() and o.data_ptr() + o.nbytes <= base + len(raw)


def _call(client, layer, tokens, t):
    """(o, positions) of `tokens` tokens of inputs t in a new session, closed
    after it (the servers are shared: test_transformers counts sessions)."""
    args = {n: t.get(n) for n in ("a", "b", "a_log", "dt_bias")}
    sid = client.create_session()
    try:
        return client.forward_with_positions(layer, [(sid, 0, tokens)], t["q"], t["k"], t["v"],
                                             t.get("g"), t.get("beta"), **args)
    finally:
        client.close_session(sid)


@pytest.mark.parametrize("server, make", [("server_bf16", direct_inputs),
                                          ("server_fused", fused_inputs)],
                         ids=["direct", "fused"])
def test_torch_inline_matches_numpy_and_prepared(request, server, make):
    """numpy inline, torch inline and torch through PreparedForward (q not
    contiguous) give the same request bytes, bit-identical o and the same
    positions; torch's o is what PreparedForward returns: bf16, cpu, v's
    shape, contiguous, a writable view of the response."""
    client = gdn_serve.Client(request.getfixturevalue(server).address, timeout=60)
    config = client.config
    wire = config.activation_dtype
    layout = ForwardLayout(config)
    bits = _wire_numpy(make(np.random.default_rng(70), 5, config), wire)
    fast = _as_torch(bits, wire)
    slow = dict(fast, q=_non_contiguous(fast["q"]))
    seqs = [("s", 2, 5)]

    def inline(t):
        return layout.inline_request(1 << 20, 1, seqs, t["q"], t["k"], t["v"], t.get("g"),
                                     t.get("beta"), t.get("a"), t.get("b"), t.get("a_log"),
                                     t.get("dt_bias"))

    from_numpy, from_torch = inline(bits), inline(fast)
    assert from_numpy[4] is None and from_torch[4] is torch  # o as numpy / as torch
    assert from_torch[0] == from_numpy[0]
    assert inline(slow) is None
    prepared = PreparedForward(layout, 1 << 20, 1, seqs, dict(slow))
    assert prepared.payload(prepared.parts[0]) == from_numpy[0]

    results = []
    with _Recorder(client) as recorder:
        for t in (bits, fast, slow):
            results.append(_call(client, 1, 5, t))
    (o_numpy, p_numpy), (o_fast, p_fast), (o_slow, p_slow) = results
    assert p_numpy == p_fast == p_slow == [5]
    np.testing.assert_array_equal(_bits_of(o_fast), o_numpy)
    assert torch.equal(o_fast, o_slow)
    for o, raw in ((o_fast, recorder.responses[1]), (o_slow, recorder.responses[2])):
        assert type(o) is torch.Tensor and o.dtype is fast["v"].dtype and o.device.type == "cpu"
        assert tuple(o.shape) == tuple(fast["v"].shape) and o.is_contiguous()
        assert not o.requires_grad
        _assert_view_of(o, raw)
    o_fast[0, 0, 0] = 1.0  # writable, as PreparedForward's o is
    o_slow[0, 0, 0] = 1.0
    assert torch.equal(o_fast, o_slow)
    client.close()


def test_torch_inline_in_every_activation_dtype(any_dtype_client):
    """bf16, fp16 and fp32 servers: torch tensors of the activation dtype go
    inline, and give numpy's o bit for bit in v's torch dtype."""
    client = any_dtype_client
    config = client.config
    wire = config.activation_dtype
    bits = _wire_numpy(direct_inputs(np.random.default_rng(71), 3, config), wire)
    fast = _as_torch(bits, wire)
    assert client._layout.inline_request(
        client._limit, 0, [("s", 0, 3)], fast["q"], fast["k"], fast["v"], fast["g"],
        fast["beta"], None, None, None, None) is not None
    o_numpy, _ = _call(client, 0, 3, bits)
    o_torch, positions = _call(client, 0, 3, fast)
    assert positions == [3]
    assert o_torch.dtype is _TORCH[wire] and tuple(o_torch.shape) == o_numpy.shape
    np.testing.assert_array_equal(_bits_of(o_torch), o_numpy)


def test_mixed_numpy_and_torch_give_o_like_v(client):
    """Each tensor may be numpy or torch on the inline path; o follows v's kind
    (as PreparedForward's does)."""
    config = client.config
    layout = client._layout
    bits = _wire_numpy(direct_inputs(np.random.default_rng(72), 2, config), dtypes.BF16)
    fast = _as_torch(bits, dtypes.BF16)
    torch_v = dict(bits, v=fast["v"])
    numpy_v = dict(fast, v=bits["v"])
    for t, kind in ((torch_v, torch.Tensor), (numpy_v, np.ndarray)):
        found = layout.inline_request(client._limit, 0, [("s", 0, 2)], t["q"], t["k"], t["v"],
                                      t["g"], t["beta"], None, None, None, None)
        assert found is not None and (found[4] is torch) == (kind is torch.Tensor)
        o, _ = _call(client, 0, 2, t)
        assert type(o) is kind
        prepared = PreparedForward(layout, client._limit, 0, [("s", 0, 2)], dict(t))
        assert prepared.payload(prepared.parts[0]) == found[0]


def test_torch_tensors_the_inline_path_does_not_take(client):
    """Another dtype, not contiguous, a subclass (Parameter), requires_grad:
    still work (PreparedForward converts them, or takes them as they are),
    with the same o; a wrong shape or a superfluous tensor raises what numpy
    inputs raise."""
    config = client.config
    layout = client._layout
    x = direct_inputs(np.random.default_rng(73), 4, config)
    bits = _wire_numpy(x, dtypes.BF16)
    fast = _as_torch(bits, dtypes.BF16)
    want, _ = _call(client, 0, 4, fast)

    def inline(t):
        return layout.inline_request(client._limit, 0, [("s", 0, 4)], t["q"], t["k"], t["v"],
                                     t["g"], t["beta"], None, None, None, None)

    cases = {
        "float32 q, k, v": dict(fast, **{n: fast[n].float() for n in ("q", "k", "v")}),
        "float64 g": dict(fast, g=fast["g"].double()),
        "bf16 beta": dict(fast, beta=fast["beta"].bfloat16()),
        "non-contiguous v": dict(fast, v=_non_contiguous(fast["v"])),
        "non-contiguous g": dict(fast, g=_non_contiguous(fast["g"])),
        "Parameter k": dict(fast, k=torch.nn.Parameter(fast["k"], requires_grad=False)),
    }
    for name, t in cases.items():
        assert inline(t) is None, name
        o, positions = _call(client, 0, 4, t)
        assert positions == [4], name
        assert type(o) is torch.Tensor and o.dtype is t["v"].dtype, name
        if name == "bf16 beta":  # beta rounded to bf16: another o
            continue
        assert torch.equal(o.to(want.dtype), want), name
    # requires_grad: the same memory, taken inline; o carries no graph (as before).
    grad = dict(fast, q=fast["q"].float().requires_grad_(True).bfloat16(),
                g=fast["g"].clone().requires_grad_(True))
    assert inline(grad) is not None
    o, _ = _call(client, 0, 4, grad)
    assert torch.equal(o, want) and not o.requires_grad

    wrong = np.zeros((4, 4, 64), np.uint16)
    for q in (wrong, torch.from_numpy(wrong.view(np.int16)).view(torch.bfloat16)):
        with pytest.raises(gdn_serve.InvalidArgument,
                           match=r"q: shape \[4, 4, 64\], expected \[4, 2, 64\]$"):
            client.forward(0, [("nobody", 0, 4)], q, fast["k"], fast["v"], fast["g"],
                           fast["beta"])
    with pytest.raises(gdn_serve.InvalidArgument, match="a: not used with gating=direct"):
        client.forward(0, [("nobody", 0, 4)], fast["q"], fast["k"], fast["v"], fast["g"],
                       fast["beta"], a=fast["g"])
    with pytest.raises(gdn_serve.InvalidArgument, match="beta: required"):
        client.forward(0, [("nobody", 0, 4)], fast["q"], fast["k"], fast["v"], fast["g"])
