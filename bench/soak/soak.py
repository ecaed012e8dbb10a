"""The soak driver (issue 21): one gdn-server under gdn-bench load for
--duration_s, W soak_worker.py processes whose sessions are checked against
the float64 oracle, and faults on a schedule. README.md says what each
fault's check is and why; soak_report.py writes summary.md / summary.json,
soak_server.py runs each server incarnation and its faults (SIGKILL, SIGTERM
drain, the full snapshot dir), soak_worker_kills.py the kill -9 of workers.

Server incarnations (epochs.json tells the workers which one is current and
how the previous one ended):
  0  normal              ends by SIGKILL (nominally at 15% of the run)
  1  tiny snapshot dir   ends by SIGTERM (nominally 27%): the drain must
                         fail, exit 3 and name the sessions it lost
  2  normal              ends by SIGTERM (nominally 39%): a clean drain, exit 0
  3  normal              the steady tail (RSS / device memory flatness),
                         then the final oracle check and a last clean drain
A fault fires at its nominal time, but never before every worker has
reported each of its sessions caught up on the current server (the settle
barrier: OUT/status/worker-W.json, written by the live worker's pid) and
--min_fault_gap_s has passed since; a fault that would leave less than
--min_tail_s (plus the gaps of the faults after it) is not fired, and the
summary says so. Workers are killed with -9 every --worker_kill_every_s
throughout (a new worker takes their sessions over at once), and once right
after each restart that loses sessions, while a recovery replay is running
(--kill_during_recovery).
"""

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from multiprocessing import Pool

from soak_common import read_json, read_log, session_id, write_json_atomically
import soak_report
from soak_server import (Server, block_snapshot_dir, free_port, gpu_mib, probe_full_method,
                         rss_kib, unblock_snapshot_dir)
from soak_worker_kills import WorkerKills

HERE = os.path.dirname(os.path.abspath(__file__))


class Driver(WorkerKills):
    def __init__(self, a):
        self.a = a
        self.out = os.path.abspath(a.out)
        # Bulky files (exports, drained sessions) go to work_dir, so that OUT
        # holds only what a result needs (logs, summary).
        self.work = os.path.abspath(a.work_dir or self.out)
        os.makedirs(os.path.join(self.out, "logs"), exist_ok=True)
        os.makedirs(os.path.join(self.out, "status"), exist_ok=True)
        os.makedirs(os.path.join(self.work, "ckpt"), exist_ok=True)
        self.snap_dir = os.path.abspath(a.snapshot_dir or os.path.join(self.work, "snapshots"))
        self.snap_alias = os.path.join(self.work, "snapshots-real")
        for path in (self.snap_dir, self.snap_alias):
            os.makedirs(path, exist_ok=True)
        self.port = a.port or free_port()
        self.epochs = [{"epoch": 0, "prev_end": None, "lost_ids": []}]
        self.events, self.samples, self.workers, self.worker_exits = [], [], {}, []
        self.full_method = (a.full_method if a.full_method != "auto"
                            else probe_full_method(self.work, a.backend))
        self.load, self.load_runs = None, []
        self.stopping = threading.Event()
        self.faults, self.settles = [], []   # what each fault and each restart's settling did
        self.inject = set(x for x in a.inject_fake_ack.split(",") if x)
        self.injected = []

    def event(self, kind, **info):
        info.update(kind=kind, t=round(time.time() - self.t0, 1), epoch=self.epochs[-1]["epoch"])
        self.events.append(info)
        print("soak: %6.1fs %s %s" % (info["t"], kind, json.dumps(
            {k: v for k, v in info.items() if k not in ("kind", "t", "lost_ids")})), flush=True)

    def start_server(self, full=False):
        self.server = Server(self, self.epochs[-1]["epoch"], full)
        self.event("server_started", pid=self.server.pid, ready_s=round(self.server.ready_s, 1),
                   full_dir=self.server.full_method or False)

    def next_epoch(self, end, lost_ids=()):
        self.epochs.append({"epoch": len(self.epochs), "prev_end": end, "lost_ids": list(lost_ids)})
        write_json_atomically(os.path.join(self.out, "epochs.json"), self.epochs)

    def end_server(self, how, full_next=False):
        """SIGKILL or SIGTERM the current server, record how it ended, start the next."""
        server = self.server
        if how == "sigterm" and server.full_method == "enotdir":
            block_snapshot_dir(self.snap_dir)
        t = time.time()
        stall = self.a.stall_full_drain_s if how == "sigterm" and server.full_method else 0
        result = server.stop(signal.SIGKILL if how == "sigkill" else signal.SIGTERM,
                             self.a.drain_wait_s, stall)
        result["stalled_s"] = stall
        if server.full_method == "enotdir":
            unblock_snapshot_dir(self.snap_dir)
        result["stop_s"] = round(time.time() - t, 1)
        end = {"sigkill": "sigkill"}.get(how, "sigterm_ok" if result["rc"] == 0 else "drain_failed")
        self.event("server_" + how, full_dir=server.full_method or False, **result)
        self.next_epoch(end, result["lost_ids"])
        self.start_server(full=full_next)
        result.update(full_dir=server.full_method or False, prev_end=end)
        return result

    def start_worker(self, w):
        a = self.a
        cmd = [sys.executable, os.path.join(HERE, "soak_worker.py"), "--target",
               "127.0.0.1:%d" % self.port, "--out", self.out, "--work_dir", self.work,
               "--worker", str(w), "--workers",
               str(a.workers), "--sessions", str(a.sessions), "--layers", a.check_layers,
               "--seed", str(a.seed), "--calls_per_s", str(a.calls_per_s / a.workers),
               "--ckpt_every", str(a.ckpt_every), "--max_tokens", str(a.max_tokens)]
        err = open(os.path.join(self.out, "worker-%d.log" % w), "a")
        self.workers[w] = subprocess.Popen(cmd, stderr=err, stdout=err, cwd=HERE)

    def start_load(self):
        remaining = self.a.duration_s - (time.time() - self.t0)
        if self.a.load_sessions <= 0 or remaining < 5:
            return
        path = os.path.join(self.out, "load-%d.json" % len(self.load_runs))
        cmd = [self.a.bench_bin, "--server=127.0.0.1:%d" % self.port, "--mode=closed",
               "--sessions=%d" % self.a.load_sessions, "--progress=false", "--json_out=" + path,
               "--duration_s=%d" % remaining, "--retry_s=%d" % self.a.drain_wait_s
               ] + shlex.split(self.a.load_args)
        log = open(os.path.join(self.out, "load.log"), "a")
        self.load = subprocess.Popen(cmd, stdout=log, stderr=log)
        self.load_runs.append({"json": path, "t": round(time.time() - self.t0, 1), "cmd": cmd})

    def sample(self):
        while not self.stopping.wait(self.a.sample_s):
            server = self.server
            self.samples.append({"t": round(time.time() - self.t0, 1), "pid": server.pid,
                                 "epoch": self.epochs[-1]["epoch"], "rss_kib": rss_kib(server.pid),
                                 "gpu_mib": gpu_mib(server.pid, server.metrics)})

    def supervise(self):
        """Restart workers that ended (ours by -9, or crashed: recorded) and a
        load generator that ended before the run's end."""
        for w, proc in list(self.workers.items()):
            if proc.poll() is not None:
                self.worker_exits.append({"worker": w, "rc": proc.returncode,
                                          "t": round(time.time() - self.t0, 1)})
                if proc.returncode != -signal.SIGKILL:
                    self.event("worker_crashed", worker=w, rc=proc.returncode)
                self.start_worker(w)
        if self.load is not None and self.load.poll() is not None:
            self.event("load_ended", rc=self.load.returncode)
            self.load = None
            self.start_load()

    def settled_sessions(self, epoch):
        """Per checked session: its live worker (status file written by the
        pid we started) has seen it caught up on server `epoch` ("ok"), set
        it aside ("broken"), or not yet (None)."""
        out = {}
        for w in range(self.a.workers):
            st = read_json(os.path.join(self.out, "status", "worker-%d.json" % w), {})
            proc = self.workers.get(w)
            fresh = proc is not None and st.get("pid") == proc.pid
            for i in range(w, self.a.sessions, self.a.workers):
                v = st.get("sessions", {}).get(session_id(i)) if fresh else None
                out[session_id(i)] = "ok" if v == epoch else ("broken" if v == "broken" else None)
        return out

    def check_settle(self, settle):
        """True once the restart's settling is over: every session caught up
        (or broken), or --settle_timeout_s passed (those not seen: named)."""
        now = time.time()
        state = self.settled_sessions(settle["epoch"])
        missing = sorted(s for s, v in state.items() if v is None)
        if missing and now - settle["since"] < self.a.settle_timeout_s:
            return False
        settle.update(settle_s=round(now - settle["since"], 1), unobserved=missing,
                      broken=sorted(s for s, v in state.items() if v == "broken"),
                      timed_out=bool(missing))
        self.event("settle_timeout" if missing else "settled", settled_epoch=settle["epoch"],
                   settle_s=settle["settle_s"], unobserved=missing)
        self.settles.append(settle)
        return True

    def run(self):
        a = self.a
        self.t0 = time.time()
        write_json_atomically(os.path.join(self.out, "epochs.json"), self.epochs)
        self.start_server()
        threading.Thread(target=self.sample, daemon=True).start()
        for w in range(a.workers):
            self.start_worker(w)
        self.start_load()
        schedule = [{"name": "server SIGKILL + restart", "how": "sigkill", "full_next": True,
                     "at": 0.15},
                    {"name": "full snapshot dir + SIGTERM", "how": "sigterm", "full_next": False,
                     "at": 0.27},
                    {"name": "server SIGTERM drain + restart", "how": "sigterm",
                     "full_next": False, "at": 0.39}]
        self.schedule = schedule
        min_tail = a.min_tail_s if a.min_tail_s > 0 else max(30.0, 0.25 * a.duration_s)
        settle = {"epoch": 0, "since": self.t0, "fault": None}
        last_settled = self.t0
        next_kill = a.worker_kill_every_s
        kill_turn = 0
        while time.time() - self.t0 < a.duration_s:
            self.supervise()
            if settle is not None and self.check_settle(settle):
                settle, last_settled = None, time.time()
            now = time.time() - self.t0
            if schedule and settle is None:
                f = schedule[0]
                due = max(f["at"] * a.duration_s, last_settled - self.t0 + a.min_fault_gap_s)
                latest = a.duration_s - min_tail - (len(schedule) - 1) * a.min_fault_gap_s
                if now >= due and now > latest:
                    self.event("faults_not_run", faults=[x["name"] for x in schedule],
                               why="%.0f s left, %.0f s needed (a %.0f s tail + %d gaps of "
                                   "%.0f s)" % (a.duration_s - now, a.duration_s - latest,
                                                min_tail, len(schedule) - 1,
                                                a.min_fault_gap_s))
                    self.not_run = [dict(x, why="out of time at %.0f s" % now) for x in schedule]
                    schedule.clear()
                elif now >= due:
                    schedule.pop(0)
                    settle = self.fire(f, now)
            if a.worker_kill_every_s > 0 and time.time() - self.t0 >= next_kill:
                w = kill_turn % a.workers
                kill_turn += 1
                self.kill_worker(w)
                # no catch-up volleys after a long drain: the next one a period on
                next_kill = time.time() - self.t0 + a.worker_kill_every_s
            time.sleep(0.2)
        if settle is not None:  # the run ended before the last restart settled
            settle.update(settle_s=None, unobserved=["(run ended)"], timed_out=True, broken=[])
            self.settles.append(settle)
        if schedule:
            self.not_run = getattr(self, "not_run", []) + [
                dict(x, why="run ended before it was due or settled") for x in schedule]
        return self.finish()

    def fire(self, f, now):
        """One server fault; judged: the sessions caught up on the server it
        ends (the restart's checks are judged on those only)."""
        epoch = self.epochs[-1]["epoch"]
        state = self.settled_sessions(epoch)
        record = {"name": f["name"], "how": f["how"],
                  "nominal_s": round(f["at"] * self.a.duration_s, 1),
                  "fired_s": round(now, 1), "ended_epoch": epoch,
                  "judged": sorted(s for s, v in state.items() if v == "ok"),
                  "not_judged": sorted(s for s, v in state.items() if v != "ok")}
        record["late_s"] = round(record["fired_s"] - record["nominal_s"], 1)
        result = self.end_server(f["how"], f["full_next"])
        record.update(result, epoch=self.epochs[-1]["epoch"],
                      restarted_s=round(time.time() - self.t0, 1))
        self.faults.append(record)
        settle = {"epoch": self.epochs[-1]["epoch"], "since": time.time(), "fault": f["name"]}
        if self.a.kill_during_recovery and result["prev_end"] in ("sigkill", "drain_failed"):
            self.kill_during_recovery(self.a.kill_during_recovery_wait_s)
        return settle

    def abort(self):
        """The driver failed: stop what it started (workers, load, server)."""
        open(os.path.join(self.out, "stop"), "w").close()
        procs = list(self.workers.values()) + [self.load]
        server = getattr(self, "server", None)
        for proc in procs:
            if proc is not None and proc.poll() is None:
                proc.kill()
        if server is not None:
            try:
                os.kill(server.pid, signal.SIGCONT)
                os.kill(server.pid, signal.SIGKILL)
            except OSError:
                pass

    def finish(self):
        open(os.path.join(self.out, "stop"), "w").close()
        for w, proc in self.workers.items():
            try:
                rc = proc.wait(self.a.drain_wait_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = "timeout"
            if rc not in (0,):
                self.event("worker_crashed", worker=w, rc=rc)
            self.worker_exits.append({"worker": w, "rc": rc, "t": round(time.time() - self.t0, 1)})
        if self.load is not None:
            try:
                self.load.wait(60)
            except subprocess.TimeoutExpired:
                self.load.send_signal(signal.SIGINT)
                self.load.wait(30)
            self.event("load_ended", rc=self.load.returncode)
        self.stopping.set()
        t = time.time()
        with Pool(self.a.check_procs) as pool:
            checks = pool.map(final_check, [(self.out, "127.0.0.1:%d" % self.port, session_id(i),
                                             self.a.check_layers, self.a.seed, self.a.state_tol,
                                             self.a.o_tol)
                                            for i in range(self.a.sessions)])
        self.event("oracle_checked", seconds=round(time.time() - t, 1))
        result = self.server.stop(signal.SIGTERM, self.a.drain_wait_s)
        self.event("server_final_sigterm", **result)
        return soak_report.write(self, checks)


def final_check(job):
    """One session: a call its worker never saw answered is settled from the
    server's position (as a takeover would), then the oracle check."""
    out, target, sid, layers, seed, state_tol, o_tol = job
    import gdn_serve
    from soak_common import oracle_check
    layers = [int(x) for x in layers.split(",")]
    st = read_log(os.path.join(out, "logs", sid + ".jsonl"), layers)
    with gdn_serve.Client(target, timeout=300) as client:
        try:
            server = {i.layer: i.position for i in client.describe_session(sid).layers}
        except gdn_serve.GdnError as e:
            return {"sid": sid, "ok": False, "problems": ["describe: %s" % e], "broken": True}
        p = st["pending"]
        if (st["recovery"] is None and p and p.get("how") in (None, "resent")
                and p["p"] == st["acked"][p["l"]] and server.get(p["l"], 0) == p["p"] + p["n"]):
            st["acked"][p["l"]] = p["p"] + p["n"]
        result = oracle_check(client, sid, seed, st["acked"], state_tol, o_tol)
        if st["recovery"] is not None:
            result["problems"].append("recovery unfinished: %s" % st["recovery"])
            result["ok"] = False
    result["broken"] = st["broken"]
    result["tokens"] = sum(st["acked"].values())
    result["ok"] = result["ok"] and not st["broken"]
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server_bin", required=True)
    p.add_argument("--bench_bin", default="", help="gdn-bench (the background load)")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--server_args", default="", help="more gdn-server flags (the shape)")
    p.add_argument("--out", required=True)
    p.add_argument("--work_dir", default="", help="exports and snapshots (default: OUT)")
    p.add_argument("--snapshot_dir", default="", help="default: WORK_DIR/snapshots")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--duration_s", type=float, default=150)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--sessions", type=int, default=8, help="oracle-checked sessions")
    p.add_argument("--check_layers", default="0,1", help="layers the checked sessions use")
    p.add_argument("--calls_per_s", type=float, default=40, help="checked calls/s, all workers")
    p.add_argument("--max_tokens", type=int, default=16)
    p.add_argument("--ckpt_every", type=int, default=25)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--load_sessions", type=int, default=0, help="gdn-bench --sessions (0: none)")
    p.add_argument("--load_args", default="", help="more gdn-bench flags")
    p.add_argument("--worker_kill_every_s", type=float, default=20)
    p.add_argument("--min_fault_gap_s", type=float, default=15,
                   help="seconds between a restart's settling and the next server fault")
    p.add_argument("--settle_timeout_s", type=float, default=120,
                   help="longest wait for every session to be seen caught up after a restart")
    p.add_argument("--min_tail_s", type=float, default=0,
                   help="fault-free time left after the last fault (0: max(30, 25%% of the run))")
    p.add_argument("--kill_during_recovery", type=int, default=1,
                   help="1: kill -9 a worker mid-recovery right after each lossy restart")
    p.add_argument("--kill_during_recovery_wait_s", type=float, default=20)
    p.add_argument("--inject_fake_ack", default="",
                   help="negative check: ack (at the first scheduled worker kill) and / or "
                        "replay (at the kill during recovery), comma separated")
    p.add_argument("--stall_full_drain_s", type=float, default=0,
                   help="dry runs: SIGSTOP the full-dir server this long right after its "
                        "SIGTERM (the H200's 61 s ENOSPC drain, on a CPU)")
    p.add_argument("--sample_s", type=float, default=2)
    p.add_argument("--drain_timeout_s", type=int, default=10)
    p.add_argument("--drain_wait_s", type=float, default=240, help="longest wait for a drain")
    p.add_argument("--tiny_bytes", type=int, default=262144, help="the full dir's tmpfs size")
    p.add_argument("--full_method", default="auto",
                   choices=["auto", "unshare", "unshare-user", "enotdir"])
    p.add_argument("--rss_tol", type=float, default=0.05)
    p.add_argument("--state_tol", type=float, default=1e-4,
                   help="max|S - ref| / max|ref| (fp32 pages; the cpu backend tests' 1e-4)")
    p.add_argument("--o_tol", type=float, default=0,
                   help="0: client/python/tests/inputs.py TOLERANCE of the wire dtype")
    p.add_argument("--check_procs", type=int, default=max(1, min(8, (os.cpu_count() or 2) - 1)))
    driver = Driver(p.parse_args())
    try:
        sys.exit(0 if driver.run() else 1)
    except Exception:
        driver.abort()
        raise


if __name__ == "__main__":
    main()
