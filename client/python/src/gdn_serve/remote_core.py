"""The GDN core of a model layer, [B, T, H, D] tensors, run on server sessions.

Shared by gdn_serve.transformers (one session per batch row) and gdn_serve.fla
(one session per sequence). The model-side layout is flash-linear-attention's:

    q, k      [B, T, H, K]  H = Hqk, or Hv when the model repeated q/k to the
                            value heads (repeat_interleave: head j is q/k head
                            j // G): every G-th head is sent, the server expands
    v         [B, T, Hv, V]
    g, beta   [B, T, Hv]    log-space decay and write strength (fp32 on the wire)
    o         [B, T, Hv, V] like v

With cu_seqlens (B = 1) the T tokens are N packed sequences, cu_seqlens[i] ..
cu_seqlens[i+1]. The server's layer config decides the rest: it must use
gating "direct"; an L2 norm of q/k the caller asks for and the server does not
do is done here (fp32); a scale other than the server's is applied to q here
when the server does not normalise q (else refused).
"""

from typing import List, Optional, Sequence, Tuple

import numpy as np

from .errors import InvalidArgument
from .tensors import is_torch

__all__ = ["sequence_lengths", "prepare_qk", "run_core"]


def sequence_lengths(batch: int, tokens: int, cu_seqlens) -> List[int]:
    """Tokens of each sequence: B x T, or the N lengths of cu_seqlens (B must be 1)."""
    if cu_seqlens is None:
        return [tokens] * batch
    if batch != 1:
        raise InvalidArgument("cu_seqlens needs batch size 1, got %d" % batch)
    bounds = [int(x) for x in (cu_seqlens.tolist() if hasattr(cu_seqlens, "tolist") else cu_seqlens)]
    if bounds[0] != 0 or bounds[-1] != tokens or any(b < a for a, b in zip(bounds, bounds[1:])):
        raise InvalidArgument("cu_seqlens %s does not partition %d tokens" % (bounds, tokens))
    return [b - a for a, b in zip(bounds, bounds[1:])]


def _l2norm(x):
    """x / sqrt(sum(x^2) + 1e-6) over the last dim, in fp32 (the server's formula)."""
    if is_torch(x):
        x = x.float()
        return x * (x * x).sum(-1, keepdim=True).add(1e-6).rsqrt()
    x = np.asarray(x, np.float32)
    return x / np.sqrt((x * x).sum(-1, keepdims=True) + np.float32(1e-6))


def prepare_qk(config, q, k, use_qk_l2norm: bool, scale: Optional[float]):
    """q, k [B, T, H, K] -> [B, T, Hqk, K] as the server must see them (see module doc)."""
    hqk, hv, kdim = config.num_qk_heads, config.num_v_heads, config.head_dim_k
    heads = q.shape[2]
    if q.shape[-1] != kdim or k.shape != q.shape:
        raise InvalidArgument("q %s / k %s: expected [B, T, H, %d] each"
                              % (list(q.shape), list(k.shape), kdim))
    if heads != hqk:
        if heads != hv or hv % hqk:
            raise InvalidArgument("q has %d heads; the server takes %d (or %d repeated)"
                                  % (heads, hqk, hv))
        group = hv // hqk
        q, k = q[:, :, ::group], k[:, :, ::group]
    if use_qk_l2norm and not config.l2_norm_qk:
        q, k = _l2norm(q), _l2norm(k)
    elif config.l2_norm_qk and not use_qk_l2norm:
        raise InvalidArgument("the server L2-normalises q and k (l2_norm_qk); this call asks for "
                              "no normalisation (use_qk_l2norm_in_kernel=False)")
    server_scale = config.scale or kdim ** -0.5
    want = kdim ** -0.5 if scale is None else float(scale)
    if abs(want - server_scale) > 1e-6 * server_scale:
        if config.l2_norm_qk:
            raise InvalidArgument("scale %g differs from the server's %g, and the server "
                                  "normalises q, so it cannot be applied here" % (want, server_scale))
        q = q * (want / server_scale)
    return q, k


def _flat(x, rows: int):
    """[B, T, ...] -> [B*T, ...] (a view where the memory allows)."""
    return x.reshape((rows,) + tuple(x.shape[2:]))


def run_core(client, layer: int, sequences: Sequence[Tuple[str, int]], q, k, v, g, beta, *,
             use_qk_l2norm: bool, scale: Optional[float] = None, cu_seqlens=None,
             staging=None):
    """One core call: o [B, T, Hv, V] like v, and the new position of each sequence.

    sequences: [(session_id, position)] per row (or per cu_seqlens sequence).
    g None: no decay (zeros); beta None: ones (fused_recurrent's defaults).
    staging: a gdn_serve.staging.CudaStaging for CUDA tensors (inputs and o go
    through its registered buffer, never through host memory), or None.
    """
    config = client.config
    if config.gating_mode != "direct":
        raise InvalidArgument("the server uses gating=%s; model-side gates (g, beta) need a "
                              "server started with --gating=direct" % config.gating_mode)
    batch, tokens = v.shape[0], v.shape[1]
    lengths = sequence_lengths(batch, tokens, cu_seqlens)
    if len(lengths) != len(sequences):
        raise InvalidArgument("%d sequences of tokens, %d sessions" % (len(lengths), len(sequences)))
    q, k = prepare_qk(config, q, k, use_qk_l2norm, scale)
    rows = batch * tokens
    hv = v.shape[2]
    zeros_like = (lambda shape: v.new_zeros(shape, dtype=_torch_float32())) if is_torch(v) else \
        (lambda shape: np.zeros(shape, np.float32))
    if g is None:
        g = zeros_like((batch, tokens, hv))
    if beta is None:
        beta = zeros_like((batch, tokens, hv)) + 1
    specs, keep = [], []
    for (session_id, position), n in zip(sequences, lengths):
        if n:
            specs.append((session_id, position, n))
        keep.append(n > 0)
    positions = [p for _, p in sequences]
    if not specs:  # no tokens at all: o is as empty as v
        return (v.clone() if is_torch(v) else np.array(v)), positions
    slot = staging.slot(batch, tokens) if staging is not None else None
    if slot is not None:  # copied into the registered buffer on the device, o written there
        inputs = slot.inputs
        for name, x in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
            inputs[name].copy_(x)  # [B, T, ...] rows in order
        # The slot's references as they are (no lookup), or its views looked up.
        sent = slot.refs or {n: _flat(x, rows) for n, x in dict(inputs, o=slot.o).items()}
        _, new = client.forward_with_positions(
            layer, specs, sent["q"], sent["k"], sent["v"], sent["g"], sent["beta"], out=sent["o"])
        o = slot.o.to(dtype=v.dtype, copy=True)  # the buffer is reused by the next call
    else:
        o, new = client.forward_with_positions(layer, specs, _flat(q, rows), _flat(k, rows),
                                               _flat(v, rows), _flat(g, rows), _flat(beta, rows))
    it = iter(new)
    positions = [next(it) if kept else p for kept, p in zip(keep, positions)]
    return o.reshape(tuple(v.shape)), positions


def _torch_float32():
    import torch
    return torch.float32
