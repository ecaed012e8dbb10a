"""gdn_serve.fla: FLA's signatures on server sessions, numpy (and torch where importable)."""

import numpy as np
import pytest

import gdn_serve
from gdn_serve import dtypes, fla
from inputs import TOLERANCE, direct_inputs
from reference import gdn_reference, relative_error, round_to


def _batch(rng, config, batch, tokens):
    """FLA layout: q, k [B, T, Hqk, K], v [B, T, Hv, V], g, beta [B, T, Hv], float32."""
    xs = [direct_inputs(rng, tokens, config) for _ in range(batch)]
    return {n: np.stack([x[n] for x in xs]) for n in xs[0]}


def _ref(x, b, begin, end, state=None):
    r = {n: round_to(x[n][b, begin:end], dtypes.BF16) for n in ("q", "k", "v")}
    return gdn_reference(r["q"], r["k"], r["v"], x["g"][b, begin:end], x["beta"][b, begin:end],
                         state=state)


def _args(x, begin, end):
    return tuple(x[n][:, begin:end] for n in ("q", "k", "v", "g", "beta"))


def test_prefill_then_decode_with_remote_state(client):
    x = _batch(np.random.default_rng(60), client.config, 2, 10)
    o1, state = fla.chunk_gated_delta_rule(*_args(x, 0, 9), initial_state=None,
                                           output_final_state=True, use_qk_l2norm_in_kernel=True,
                                           client=client, layer=1)
    assert isinstance(state, fla.RemoteState) and state.shape == (2, 4, 64, 64)
    assert state.positions == [9, 9] and state.layer == 1
    o2, state2 = fla.fused_recurrent_gated_delta_rule(
        *_args(x, 9, 10), initial_state=state, output_final_state=True,
        use_qk_l2norm_in_kernel=True, client=client)
    assert state.consumed and state2.positions == [10, 10]
    for b in range(2):
        ref, final = _ref(x, b, 0, 10)
        o = np.concatenate([o1[b], o2[b]])
        assert relative_error(o, ref) < TOLERANCE["bf16"]
        assert relative_error(state2.tensor()[b], final) < 1e-5  # fp32 state pages
    with pytest.raises(gdn_serve.InvalidArgument, match="already continued"):
        fla.fused_recurrent_gated_delta_rule(*_args(x, 9, 10), initial_state=state, client=client,
                                             use_qk_l2norm_in_kernel=True)
    twin = state2.fork()
    a, _ = fla.fused_recurrent_gated_delta_rule(*_args(x, 0, 1), initial_state=state2,
                                                client=client, use_qk_l2norm_in_kernel=True)
    b, _ = fla.fused_recurrent_gated_delta_rule(*_args(x, 0, 1), initial_state=twin,
                                                client=client, use_qk_l2norm_in_kernel=True)
    np.testing.assert_array_equal(a, b)


def test_repeated_heads_varlen_and_imported_state(client):
    config = client.config
    rng = np.random.default_rng(61)
    x = _batch(rng, config, 1, 12)
    state0 = rng.standard_normal((2, 4, 64, 64)).astype(np.float32) * 0.1
    cu = np.array([0, 5, 12])
    rep = {n: np.repeat(x[n], 2, axis=2) if n in ("q", "k") else x[n] for n in x}  # Hv heads
    fla.set_default_client(client)
    try:
        o, none = fla.chunk_gated_delta_rule(*_args(rep, 0, 12), initial_state=state0,
                                             cu_seqlens=cu, use_qk_l2norm_in_kernel=True)
    finally:
        fla.set_default_client(None)
    assert none is None and o.shape == (1, 12, 4, 64)
    for i, (begin, end) in enumerate([(0, 5), (5, 12)]):
        ref, _ = _ref(x, 0, begin, end, state=state0[i])
        assert relative_error(o[0, begin:end], ref) < TOLERANCE["bf16"]


def test_refusals(client):
    x = _batch(np.random.default_rng(62), client.config, 1, 2)
    with pytest.raises(gdn_serve.InvalidArgument, match="L2-normalises"):
        fla.chunk_gated_delta_rule(*_args(x, 0, 2), client=client)
    with pytest.raises(gdn_serve.InvalidArgument, match="scale"):
        fla.chunk_gated_delta_rule(*_args(x, 0, 2), scale=0.5, client=client,
                                   use_qk_l2norm_in_kernel=True)
    with pytest.raises(gdn_serve.InvalidArgument, match="no client"):
        fla.chunk_gated_delta_rule(*_args(x, 0, 2), use_qk_l2norm_in_kernel=True)


def test_torch_tensors(client):
    torch = pytest.importorskip("torch")
    x = _batch(np.random.default_rng(63), client.config, 2, 3)
    t = {n: torch.from_numpy(a) for n, a in x.items()}
    o, state = fla.chunk_gated_delta_rule(
        t["q"].bfloat16(), t["k"].bfloat16(), t["v"].bfloat16(), t["g"], t["beta"],
        output_final_state=True, use_qk_l2norm_in_kernel=True, client=client)
    assert o.dtype == torch.bfloat16 and tuple(o.shape) == (2, 3, 4, 64)
    assert isinstance(state.tensor(like=o), torch.Tensor)
    state.close()
