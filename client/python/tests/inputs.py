"""Random inputs of the operator, drawn as docs/operator.md says (never zeros):
q, k ~ N(0, 1) (the server L2-normalises them), v ~ N(0, 1),
g = logsigmoid(N(0, 1)) / 16, beta = sigmoid(N(0, 1)); fused gating:
a, b ~ N(0, 1), A_log = log(U(1, 16)), dt_bias ~ 1 + N(0, 0.1)."""

import numpy as np


def direct_inputs(rng, tokens, config):
    """dict q, k [T, Hqk, K], v [T, Hv, V], g, beta [T, Hv], all float32."""
    hqk, hv = config.num_qk_heads, config.num_v_heads
    kdim, vdim = config.head_dim_k, config.head_dim_v
    x = rng.standard_normal((tokens, hv))
    return {
        "q": rng.standard_normal((tokens, hqk, kdim)).astype(np.float32),
        "k": rng.standard_normal((tokens, hqk, kdim)).astype(np.float32),
        "v": rng.standard_normal((tokens, hv, vdim)).astype(np.float32),
        "g": (-np.logaddexp(0.0, -x) / 16).astype(np.float32),
        "beta": (1 / (1 + np.exp(-rng.standard_normal((tokens, hv))))).astype(np.float32),
    }


def fused_inputs(rng, tokens, config):
    """dict q, k, v as direct_inputs; a, b [T, Hv]; a_log, dt_bias [Hv]; float32."""
    out = direct_inputs(rng, tokens, config)
    del out["g"], out["beta"]
    hv = config.num_v_heads
    out["a"] = rng.standard_normal((tokens, hv)).astype(np.float32)
    out["b"] = rng.standard_normal((tokens, hv)).astype(np.float32)
    out["a_log"] = np.log(rng.uniform(1, 16, hv)).astype(np.float32)
    out["dt_bias"] = (1 + 0.1 * rng.standard_normal(hv)).astype(np.float32)
    return out


def rows(inputs, begin, end):
    """The token rows [begin, end) of every per-token tensor (a_log, dt_bias kept)."""
    return {n: (t if n in ("a_log", "dt_bias") else t[begin:end]) for n, t in inputs.items()}


# Output error bounds against the float64 reference, max|o - ref| / max|ref|:
# o is rounded once to the activation dtype (half an ulp: 2^-9 bf16, 2^-11
# fp16), plus the fp32 compute of the cpu backend (~1e-6 over these lengths);
# twice that for margin.
TOLERANCE = {"bf16": 2 * 2.0 ** -9 + 1e-5, "fp16": 2 * 2.0 ** -11 + 1e-5, "fp32": 2e-5}
