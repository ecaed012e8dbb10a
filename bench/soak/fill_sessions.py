#!/usr/bin/env python3
"""Creates N sessions on a server and advances each by one token on every
layer (random inputs), so that a drain has N whole sessions to write.

    python3 bench/soak/fill_sessions.py --target 127.0.0.1:50051 --sessions 64
"""
import argparse

import numpy as np

import gdn_serve


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--target", required=True)
    p.add_argument("--sessions", type=int, default=16)
    a = p.parse_args()
    client = gdn_serve.Client(a.target, timeout=120)
    c = client.config
    rng = np.random.default_rng(0)
    ids = [client.create_session() for _ in range(a.sessions)]
    n = len(ids)
    for layer in range(c.num_layers):
        q = rng.standard_normal((n, c.num_qk_heads, c.head_dim_k)).astype(np.float32)
        v = rng.standard_normal((n, c.num_v_heads, c.head_dim_v)).astype(np.float32)
        g = -np.abs(rng.standard_normal((n, c.num_v_heads))).astype(np.float32)
        beta = np.full((n, c.num_v_heads), 0.5, np.float32)
        client.forward(layer, [(i, 0, 1) for i in ids], q, q, v, g, beta)
    print("filled %d sessions x %d layers" % (n, c.num_layers))


if __name__ == "__main__":
    main()
