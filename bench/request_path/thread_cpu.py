#!/usr/bin/env python3
"""CPU time per call of each thread of a server process, under a load.

Reads /proc/PID/task/*/stat (user and system clock ticks) of the server
before and after a window of a load generator's run, and divides each
thread's CPU time by the calls the generator made in that window (its
first "decode" or "prefill" row's count, scaled from the run's length to
the window). Where the request path's CPU goes by thread: gRPC's polling
threads, the engine, timers.

  python3 bench/request_path/thread_cpu.py --pid SERVER_PID --run_s 6 \\
      --skip_s 2 --window_s 3 -- build-cpu/client/bench/gdn-bench \\
      --server=127.0.0.1:PORT --layers=4 --sessions=32 --sessions_per_call=32 \\
      --prefill_tokens=0 --decode_steps=1000000 --duration_s=6

--run_s is the generator's own duration (its row counts cover that long).
"""
import argparse
import os
import subprocess
import time

TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")


def snapshot(pid):
    """{tid: (name, user ticks, system ticks)} of every thread of pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = (name, int(fields[11]), int(fields[12]))
    return out


def calls_in(output, kinds=("decode", "prefill")):
    """The first row's call count of the generator's table for a kind."""
    for line in output.splitlines():
        cols = line.split()
        if len(cols) > 1 and cols[0] in kinds and cols[1].isdigit() and int(cols[1]) > 0:
            return int(cols[1])
    raise SystemExit("no decode / prefill row with calls in the generator's output")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pid", type=int, required=True, help="the server's process id")
    ap.add_argument("--run_s", type=float, required=True, help="the generator's duration")
    ap.add_argument("--skip_s", type=float, default=2.0, help="warm-up before the window")
    ap.add_argument("--window_s", type=float, default=3.0)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- the load generator")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    gen = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(args.skip_s)
    before = snapshot(args.pid)
    start = time.time()
    time.sleep(args.window_s)
    after = snapshot(args.pid)
    window = time.time() - start
    output = gen.communicate()[0]
    calls = calls_in(output) * window / args.run_s
    print(f"~{calls / window:.0f} calls/s; CPU per call by thread (us):")
    total = 0.0
    for tid, (name, user, system) in sorted(after.items()):
        if tid not in before:
            continue
        du = (user - before[tid][1]) * TICK_US / calls
        ds = (system - before[tid][2]) * TICK_US / calls
        if du + ds > 0:
            total += du + ds
            print(f"  {name:18s} {tid:>8s} {du + ds:8.1f}  (user {du:.1f}, system {ds:.1f})")
    print(f"  total {total:.1f}")


if __name__ == "__main__":
    main()
