"""The float64 reference of the operator (/work/shared/GDN.md, docs/operator.md), in numpy.

Per sequence and value head j (q/k head j // G, G = Hv / Hqk), token t:

    q, k <- x / sqrt(sum(x^2) + 1e-6)          (when l2_norm_qk)
    S    <- exp(g_t) S                          decay
    u_t   = beta_t (v_t - S^T k_t)              delta-rule correction
    S    <- S + k_t u_t^T                       rank-1 write
    o_t   = S^T (scale q_t)                     scale = K^-1/2 when 0

Fused gating: g = -exp(A_log) * softplus(a + dt_bias) (softplus(x) = x for
x > 20), beta = sigmoid(b). Inputs are first rounded to the wire dtype by the
caller (round_to), as the server sees them.
"""

import numpy as np

from gdn_serve import dtypes


def round_to(x: np.ndarray, wire: int) -> np.ndarray:
    """x rounded to the wire dtype, back as float64."""
    x = np.asarray(x, dtype=np.float32)
    if wire == dtypes.BF16:
        return dtypes.bf16_bits_to_float32(dtypes.float32_to_bf16_bits(x)).astype(np.float64)
    if wire == dtypes.FP16:
        return x.astype(np.float16).astype(np.float64)
    return x.astype(np.float64)


def fused_gates(a, b, a_log, dt_bias):
    """(g, beta) [T, Hv] float64 of Qwen3-Next's fused gating from fp32 inputs."""
    x = np.asarray(a, np.float64) + np.asarray(dt_bias, np.float64)[None, :]
    softplus = np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))
    g = -np.exp(np.asarray(a_log, np.float64))[None, :] * softplus
    beta = 1.0 / (1.0 + np.exp(-np.asarray(b, np.float64)))
    return g, beta


def gdn_reference(q, k, v, g, beta, state=None, l2_norm_qk=True, scale=0.0):
    """One sequence: q, k [T, Hqk, K], v [T, Hv, V], g, beta [T, Hv] -> (o [T, Hv, V], S [Hv, K, V]).

    All float64; state: the initial [Hv, K, V] (zero when None).
    """
    q = np.asarray(q, np.float64)
    k = np.asarray(k, np.float64)
    v = np.asarray(v, np.float64)
    t_len, hqk, kdim = q.shape
    hv, vdim = v.shape[1], v.shape[2]
    group = hv // hqk
    if l2_norm_qk:
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6)
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    scale = scale or kdim ** -0.5
    s = np.zeros((hv, kdim, vdim)) if state is None else np.array(state, np.float64)
    o = np.zeros((t_len, hv, vdim))
    heads = np.arange(hv) // group
    for t in range(t_len):
        qt, kt = q[t, heads], k[t, heads]  # [Hv, K]
        s *= np.exp(np.asarray(g[t], np.float64))[:, None, None]
        u = np.asarray(beta[t], np.float64)[:, None] * (v[t] - np.einsum("hkv,hk->hv", s, kt))
        s += kt[:, :, None] * u[:, None, :]
        o[t] = np.einsum("hkv,hk->hv", s, scale * qt)
    return o, s


def relative_error(got, ref) -> float:
    """max|got - ref| / max|ref|."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
