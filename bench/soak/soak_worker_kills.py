"""The soak driver's worker faults: kill -9 of a worker, preferably while a
call of it is in flight (on the schedule) or while a recovery replay runs
(right after a restart that lost sessions), and the negative check's fake
acks (--inject_fake_ack). A mixin of soak.py's Driver: it uses the driver's
workers, out, a, epochs, inject / injected and event().
"""

import json
import os
import signal
import time

from soak_common import read_log, session_id


class WorkerKills:
    """kill -9 of the checked workers and the fake acks injected while one is dead."""

    def worker_logs(self, w):
        return [os.path.join(self.out, "logs", session_id(i) + ".jsonl")
                for i in range(w, self.a.sessions, self.a.workers)]

    @staticmethod
    def last_record(path):
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 600))
            return f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]

    def kill_worker(self, w, why="schedule"):
        """kill -9 of worker w, preferably mid-call: for up to 3 s, wait until
        the last record of its most recently written log is an intent (a
        call sent and not yet acknowledged)."""
        logs = self.worker_logs(w)
        deadline, mid_call = time.time() + 3, False
        while time.time() < deadline and not mid_call:
            try:
                newest = max(logs, key=lambda p: os.stat(p).st_mtime_ns)
                mid_call = b'"e":"intent"' in self.last_record(newest)
            except (OSError, ValueError):
                pass
            time.sleep(0.001)
        self.workers[w].send_signal(signal.SIGKILL)
        self.workers[w].wait()
        self.event("worker_sigkill", worker=w, mid_call=mid_call, why=why)
        if "ack" in self.inject:
            self.inject_fake_ack(w, "ack")

    def kill_during_recovery(self, wait_s):
        """Right after a restart that lost sessions: kill -9 the first worker
        seen mid-replay (the last record of one of its logs a replay intent
        or ack), polling for up to wait_s; in its second half a "recover" or
        "imported" last record (a recovery before its replay) will do."""
        replay = (b'"how":"replay',)
        any_mark = replay + (b'"e":"recover"', b'"e":"imported"')
        start = time.time()
        deadline = start + wait_s
        while time.time() < deadline:
            marks = replay if time.time() < start + wait_s / 2 else any_mark
            for w in range(self.a.workers):
                for path in self.worker_logs(w):
                    try:
                        last = self.last_record(path)
                    except (OSError, ValueError):
                        continue
                    if any(m in last for m in marks):
                        self.workers[w].send_signal(signal.SIGKILL)
                        self.workers[w].wait()
                        self.event("worker_sigkill", worker=w, mid_call=b'"e":"intent"' in last,
                                   why="during_recovery", mid_recovery=True,
                                   session=os.path.basename(path)[:-6],
                                   last_record=last.decode(errors="replace")[:200])
                        if "replay" in self.inject:
                            self.inject_fake_ack(w, "replay")
                        return True
            time.sleep(0.001)
        self.event("worker_sigkill_skipped", why="no recovery seen in %.0f s" % wait_s)
        return False

    def inject_fake_ack(self, w, mode):
        """The negative check (--inject_fake_ack): while worker w is dead, log
        an ack that the server never gave: "ack", one more token at a resting
        session's acked position; "replay", one more replay token at a
        recovering session's replay progress. Its successor must flag it."""
        layers = [int(x) for x in self.a.check_layers.split(",")]
        for path in self.worker_logs(w):
            st = read_log(path, layers)
            if st["broken"] or (st["pending"] is not None and mode == "ack"):
                continue
            rec = st["recovery"]
            record = None
            if mode == "ack" and rec is None and st["created"]:
                l = layers[0]
                record = {"e": "ack", "l": l, "p": st["acked"][l], "n": 1, "how": "ok"}
            elif mode == "replay" and rec is not None:
                for l in layers:
                    prog, pend = rec["progress"][l], st["pending"]
                    dangling = pend and pend["l"] == l and pend["p"] == prog
                    if prog < st["acked"][l] and not dangling:
                        record = {"e": "ack", "l": l, "p": prog, "n": 1, "how": "replay"}
                        break
            if record is None:
                continue
            record.update(ep=self.epochs[-1]["epoch"], fake=True)
            with open(path, "a") as f:
                f.write(json.dumps(record, separators=(",", ":")) + "\n")
            self.inject.discard(mode)
            sid = os.path.basename(path)[:-6]
            self.injected.append({"mode": mode, "sid": sid, "record": record})
            self.event("fake_ack_injected", mode=mode, session=sid, record=record)
            return
        self.event("fake_ack_not_injected", mode=mode, worker=w)
