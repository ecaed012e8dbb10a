"""Runs the chunked prefill's two kernels once each under a profiler window,
for `ncu --profile-from-start off` (scripts/device/profile_visit.sh): per
row, a warm-up call outside the window (grows the workspace), then kernel 1
(chunk table + prep) and kernel 2 (state pass) inside it.

  python3 bench/prefill/profile_kernels.py --capi libgdn_capi.so --rows 16/32/1/32768,2/8/1/32768

With --tables (no ncu): our kernels under torch.profiler, the time of each;
--fla adds flash-linear-attention's chunk_gated_delta_rule on the same inputs
(which stage of the peer is faster than ours), ours once per --state-variants.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_fla import Ours, Problem, fla_run, kernel_times  # noqa: E402  (same inputs as the benchmark)


def kernel_table(fn, reps=3):
    """Prints fn's kernels with their time per call (compare_fla.kernel_times)."""
    rows = kernel_times(fn, reps)
    for t, n, key in rows:
        print(f"  {t:9.1f} us  x{n:<3d} {key[:90]}")
    print(f"  {sum(r[0] for r in rows):9.1f} us  total")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--capi", required=True)
    ap.add_argument("--rows", default="16/32/1/32768", help="Hqk/Hv/N/L, comma-separated")
    ap.add_argument("--v-tile", type=int, default=0)
    ap.add_argument("--prep-variants", default="-1", help="kernel-1 codes to profile, comma-separated (-1 or 4: the one kernel 1; 3 was removed in issue 22)")
    ap.add_argument("--state-variants", default="-1", help="kernel-2 variants to profile, comma-separated")
    ap.add_argument("--tables", action="store_true", help="our kernel tables, no ncu window")
    ap.add_argument("--fla", action="store_true", help="--tables with FLA's beside")
    args = ap.parse_args()
    ours = Ours(args.capi)
    if args.fla:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_fn
    for spec in args.rows.split(","):
        hqk, hv, n, length = (int(x) for x in spec.split("/"))
        p = Problem(hqk, hv, 128, 128, [length] * n, seed=7)
        call = ours.prepare(p, pages_out=[n + i for i in range(n)])
        variants = [int(x) for x in args.prep_variants.split(",")]
        states = [int(x) for x in args.state_variants.split(",")]
        # Whole calls of every kernel-2 form first: the largest workspace (the
        # split form's) is then in place for the state pass alone below.
        for state in states:
            ours.call(call, v_tile=args.v_tile, state=state)
        torch.cuda.synchronize()
        if args.fla or args.tables:
            if args.fla:
                h0 = p.h0.float().clone()
                print(f"{spec}: FLA kernels", flush=True)
                kernel_table(lambda: fla_run(fla_fn, p, h0))
            for state in states:
                print(f"{spec}: our kernels, kernel 2 variant {state}", flush=True)
                kernel_table(lambda: ours.call(call, v_tile=args.v_tile, state=state))
            del p, call
            continue
        for prep in variants:  # outside the window: each variant's first launch
            ours.call(call, stages=1, prep=prep)
        for state in states:
            ours.call(call, stages=2, v_tile=args.v_tile, state=state)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        for prep in variants:
            ours.call(call, stages=1, prep=prep)
        for state in states:
            ours.call(call, stages=2, v_tile=args.v_tile, state=state)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        print(f"profiled {spec}", flush=True)
        del p, call
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
