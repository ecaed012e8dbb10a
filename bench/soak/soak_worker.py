"""One soak worker: owns sessions i with i % workers == worker, sends their
Forward calls one at a time, logs every intent and ack, and reconciles with
the server whenever it starts (it may be taking over from a worker killed
with -9) or the driver announces a new server incarnation (epochs.json).

Reconciling one session (describe_session, per checked layer, acked
position a, dangling intent of n tokens at a or none):
  server == a, intent   the call may still be queued on the server: send it
                        again, same position, same tokens; OK or
                        FAILED_PRECONDITION with expected a + n both mean it
                        was applied exactly once
  server == a, none     in step
  server == a + n       the dead worker's call was applied: acked now
  anything else         a violation (a lost acknowledged call, or a call
                        applied that no one sent): the session is set aside
  NOT_FOUND             within the contract only after a SIGKILL or a failed
                        drain naming it (soak_common.loss_allowed); the
                        worker then recovers it (below), so the final oracle
                        check still covers every acknowledged call.

Recovery is a state of its own in the log: "recover" (base: the positions of
the worker's own last export it re-imports, or 0 when it re-creates the
session; target: the acked positions), "imported" once the server holds the
base, replay intents / acks (how "replay") from the base up to the acked
positions, layer by layer, and "recovered" when the replay has caught up. A
session found mid-recovery (a worker killed during the replay) is checked
against the replay's progress p (the base, or the end of the last replay
ack) instead of the acked position: server == p (a dangling replay intent
at p is sent again, as above) or p + n of the dangling replay intent, and
the replay then continues; any other position (below p: a lost replay ack;
below the base: a lost import) is a violation. NOT_FOUND mid-recovery is
allowed only before "imported" (the import may never have reached the
server), else as above.

Every call's returned position must be position + n; an export taken for a
checkpoint must hold exactly the acked positions. The worker reports in
OUT/status/worker-W.json, per session, the last server incarnation it has
seen the session on and caught up (at the acked positions): the driver's
barrier before the next server fault.
"""

import argparse
import os
import random
import sys
import time

import gdn_serve
from gdn_serve.errors import FailedPrecondition, NotFound
from gdn_serve.snapshot import decode_file

from soak_common import (SessionLog, is_replay, loss_allowed, read_epochs, read_log,
                         session_id, session_index, token_inputs, write_json_atomically)


class Worker:
    def __init__(self, a):
        self.a = a
        self.layers = [int(x) for x in a.layers.split(",")]
        retry = gdn_serve.RetryPolicy(max_attempts=100000, max_backoff=0.5, max_total=a.retry_s)
        self.client = gdn_serve.Client(a.target, timeout=a.call_timeout_s, retry=retry)
        self.config = self.client.config
        self.rng = random.Random(a.seed * 1000 + a.worker + os.getpid())
        self.ids = [session_id(i) for i in range(a.sessions) if i % a.workers == a.worker]
        self.logs = {sid: SessionLog(self.path(sid, "jsonl")) for sid in self.ids}
        self.states = {sid: read_log(self.path(sid, "jsonl"), self.layers) for sid in self.ids}
        self.calls = {sid: 0 for sid in self.ids}
        self.epoch = self.current_epoch()
        # per session: the incarnation it was last seen on and caught up, or "broken"
        self.settled = {sid: None for sid in self.ids}
        self.status_path = os.path.join(a.out, "status", "worker-%d.json" % a.worker)

    def path(self, sid, ext):
        if ext == "gdnsnap":
            return os.path.join(self.a.work_dir, "ckpt", sid + ".gdnsnap")
        return os.path.join(self.a.out, "logs", "%s.%s" % (sid, ext))

    def current_epoch(self):
        return read_epochs(self.a.out)[-1]["epoch"]

    def write_status(self):
        write_json_atomically(self.status_path, {
            "pid": os.getpid(), "worker": self.a.worker, "epoch": self.epoch, "t": time.time(),
            "sessions": {sid: "broken" if self.states[sid]["broken"] else self.settled[sid]
                         for sid in self.ids}})

    def settle(self, sid):
        """The session is at its acked positions on server self.epoch."""
        self.settled[sid] = self.epoch
        self.write_status()

    def violation(self, sid, what):
        self.logs[sid].write(e="violation", what=what, ep=self.epoch, t=time.time())
        self.states[sid]["broken"] = True
        print("soak worker %d: VIOLATION %s: %s" % (self.a.worker, sid, what), file=sys.stderr)

    def send(self, sid, layer, pos, n, how="ok"):
        """One logged call at `pos` of n tokens. True when applied (once)."""
        log = self.logs[sid]
        st = self.states[sid]
        # The epoch known before sending: the call may land on a later server,
        # so "seen on" may only err towards an earlier epoch (loss_allowed).
        if how == "ok":
            log.write(e="intent", l=layer, p=pos, n=n, ep=self.epoch)
        else:
            log.write(e="intent", l=layer, p=pos, n=n, how=how, ep=self.epoch)
        st["pending"] = {"l": layer, "p": pos, "n": n}
        x = token_inputs(self.a.seed, session_index(sid), layer, pos, n, self.config)
        try:
            _, positions = self.client.forward_with_positions(layer, [(sid, pos, n)], **x)
        except FailedPrecondition as e:
            if e.expected_position != pos + n:
                self.violation(sid, "layer %d %s call at %d (%d tokens): server expects %s"
                               % (layer, how, pos, n, e.expected_position))
                return False
            how = how + "-precondition" if is_replay(how) else "precondition"
        else:
            if positions[0] != pos + n:
                self.violation(sid, "layer %d %s call at %d returned position %d"
                               % (layer, how, pos, positions[0]))
                return False
        log.write(e="ack", l=layer, p=pos, n=n, how=how, ep=self.epoch)
        st["acked"][layer] = max(st["acked"][layer], pos + n)
        st["pending"] = None
        st["seen_epoch"] = max(st["seen_epoch"], self.epoch)
        if st["recovery"] is not None and is_replay(how):
            st["recovery"]["progress"][layer] = max(st["recovery"]["progress"][layer], pos + n)
        return True

    def start_session(self, sid):
        st = self.states[sid]
        if st["created"]:
            return self.reconcile(sid, "takeover")
        try:
            self.client.create_session(sid)
        except gdn_serve.errors.AlreadyExists:
            pass  # created by a worker killed before it logged it: no call was sent
        self.logs[sid].write(e="created", ep=self.epoch)
        st["created"] = True
        st["seen_epoch"] = max(st["seen_epoch"], self.epoch)

    def reconcile(self, sid, reason):
        st = self.states[sid]
        if st["broken"]:
            return
        rec = st["recovery"]
        try:
            described = self.client.describe_session(sid)
        except NotFound:
            if rec is not None and not rec["imported"]:
                # killed between "recover" and "imported": the import may never
                # have reached the server; the recovery starts again
                return self.recover(sid, reason + "-recovering", allowed=True)
            return self.recover(sid, reason)
        server = {i.layer: i.position for i in described.layers}
        if rec is not None:
            return self.continue_recovery(sid, reason, server)
        pending = st["pending"]
        verdicts = []
        for layer in self.layers:
            acked, have = st["acked"][layer], server.get(layer, 0)
            dangling = (pending if pending and pending["l"] == layer and pending["p"] == acked
                        else None)
            if have == acked and dangling:
                verdicts.append("resent" if self.send(sid, layer, acked, dangling["n"], "resent")
                                else "violation")
            elif have == acked:
                verdicts.append("exact")
            elif dangling and have == acked + dangling["n"]:
                self.logs[sid].write(e="ack", l=layer, p=acked, n=dangling["n"], how="resolved",
                                     ep=self.epoch)
                st["acked"][layer] = have
                st["pending"] = None
                verdicts.append("applied")
            else:
                self.violation(sid, "%s: layer %d at %d on the server, acked %d, in flight %s"
                               % (reason, layer, have, acked, dangling and dangling["n"]))
                verdicts.append("violation")
        st["seen_epoch"] = max(st["seen_epoch"], self.epoch)
        self.logs[sid].write(e="check", reason=reason, verdicts=verdicts, ep=self.epoch)

    def continue_recovery(self, sid, reason, server):
        """A session found mid-recovery: the server must be where the replay
        got to (or one dangling replay call further); then the replay goes on."""
        st = self.states[sid]
        rec = st["recovery"]
        pending = st["pending"]
        verdicts, resend = [], None
        for layer in self.layers:
            prog, have = rec["progress"][layer], server.get(layer, 0)
            dangling = (pending if pending and pending["l"] == layer and pending["p"] == prog
                        else None)
            if have == prog and dangling:
                resend = dangling  # may still be queued: the same call again
                verdicts.append("recovering-resend")
            elif have == prog:
                verdicts.append("recovering")
            elif dangling and have == prog + dangling["n"]:
                self.logs[sid].write(e="ack", l=layer, p=prog, n=dangling["n"],
                                     how="replay-resolved", ep=self.epoch)
                rec["progress"][layer] = have
                st["pending"] = None
                verdicts.append("recovering-applied")
            else:
                self.violation(sid, "%s mid-recovery: layer %d at %d on the server, replayed "
                               "to %d (base %d), acked %d, in flight %s"
                               % (reason, layer, have, prog, rec["base"][layer],
                                  st["acked"][layer], dangling and dangling["n"]))
                verdicts.append("violation")
        rec["imported"] = True  # the server holds it
        st["seen_epoch"] = max(st["seen_epoch"], self.epoch)
        self.logs[sid].write(e="check", reason=reason, verdicts=verdicts, recovering=True,
                             ep=self.epoch)
        if "violation" in verdicts:
            return
        try:
            self.replay(sid, resend)
        except NotFound:
            self.recover(sid, reason + "-replay")

    def recover(self, sid, reason, allowed=None):
        st = self.states[sid]
        # self.epoch stays: run() must still see the new epoch and reconcile
        # the worker's other sessions; the record names the server that lost it.
        for attempt in range(3):  # the server may be killed again during the replay
            epochs = read_epochs(self.a.out)
            if allowed is None:
                allowed = loss_allowed(epochs, st["seen_epoch"], sid)
            self.logs[sid].write(e="lost", reason=reason, allowed=allowed,
                                 since=st["seen_epoch"], ep=epochs[-1]["epoch"])
            if not allowed:
                return self.violation(sid, "%s: NOT_FOUND after clean drains since epoch %d"
                                      % (reason, st["seen_epoch"]))
            st["pending"] = None  # a dangling call died with the server; only acks are replayed
            try:
                return self.restore_and_replay(sid)
            except NotFound:
                allowed, reason = None, reason + "-again"
        self.violation(sid, "could not re-establish the session in 3 tries")

    def restore_and_replay(self, sid):
        """Our own last export (its positions read from the file itself: a
        worker killed between writing it and logging it left a newer file than
        the log says), or a new session, then every acked token after it."""
        st = self.states[sid]
        base = {l: 0 for l in self.layers}
        path = self.path(sid, "gdnsnap")
        data = None
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            base.update({s.layer: s.position for s in decode_file(data, sid).layers
                         if s.layer in base})
        if any(base[l] > st["acked"][l] for l in self.layers):
            return self.violation(sid, "export at %s, beyond acked %s" % (base, st["acked"]))
        # The epoch read now is at most the server's that gets the import.
        ep = self.current_epoch()
        self.logs[sid].write(e="recover", base={str(l): p for l, p in base.items()},
                             target={str(l): p for l, p in st["acked"].items()},
                             from_ckpt=data is not None, ep=ep)
        st["recovery"] = {"base": dict(base), "progress": dict(base), "imported": False,
                          "ep": ep}
        try:
            if data is not None:
                self.client.import_session(data, session_id=sid)
            else:
                self.client.create_session(sid)
        except gdn_serve.errors.AlreadyExists:
            # a dead worker's import / create (or its retry) got there first
            have = {i.layer: i.position for i in self.client.describe_session(sid).layers}
            if any(have.get(l, 0) != base[l] for l in self.layers):
                return self.violation(sid, "re-import: session exists at %s, base %s"
                                      % (have, base))
        self.logs[sid].write(e="imported", ep=ep)
        st["recovery"]["imported"] = True
        st["seen_epoch"] = max(st["seen_epoch"], ep)
        self.replay(sid)

    def replay(self, sid, resend=None):
        """From the recovery's progress up to the acked positions, layer by
        layer; `resend`: a dangling replay call to send first, unchanged."""
        st = self.states[sid]
        rec = st["recovery"]
        replayed = 0
        for layer in self.layers:
            pos = rec["progress"][layer]
            while pos < st["acked"][layer]:
                n = min(16, st["acked"][layer] - pos)
                if resend and resend["l"] == layer and resend["p"] == pos:
                    n, resend = resend["n"], None
                if not self.send(sid, layer, pos, n, "replay"):
                    return
                pos, replayed = pos + n, replayed + n
        self.logs[sid].write(e="recovered", replayed=replayed, ep=max(self.epoch, rec["ep"]))
        st["recovery"] = None

    def checkpoint(self, sid):
        """The session's export, checked against the acked positions, kept as
        the point a recovery starts from."""
        data = self.client.export_session(sid)
        snap = decode_file(data, sid)
        have = {s.layer: s.position for s in snap.layers}
        acked = self.states[sid]["acked"]
        if any(have.get(l, 0) != p for l, p in acked.items()):
            return self.violation(sid, "export at %s, acked %s" % (have, acked))
        path = self.path(sid, "gdnsnap")
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
        self.logs[sid].write(e="ckpt", pos={str(l): p for l, p in acked.items()}, ep=self.epoch)

    def step(self, sid):
        st = self.states[sid]
        layer = self.layers[self.calls[sid] % len(self.layers)]
        n = 1 if self.rng.random() < 0.8 else self.rng.randint(2, self.a.max_tokens)
        try:
            self.send(sid, layer, st["acked"][layer], n)
        except NotFound:
            return self.recover(sid, "forward")
        self.calls[sid] += 1
        if self.calls[sid] % self.a.ckpt_every == 0 and not st["broken"]:
            self.checkpoint(sid)

    def reconcile_all(self, reason):
        for sid in self.ids:
            if reason == "takeover":
                self.start_session(sid)
            else:
                self.reconcile(sid, reason)
            self.settle(sid)

    def run(self):
        self.reconcile_all("takeover")
        period = len(self.ids) / self.a.calls_per_s if self.a.calls_per_s > 0 else 0.0
        stop = os.path.join(self.a.out, "stop")
        next_round = time.monotonic()
        while not os.path.exists(stop):
            epoch = self.current_epoch()
            if epoch != self.epoch:  # a new server: every session must be where it was
                self.epoch = epoch
                self.reconcile_all("epoch")
            for sid in self.ids:
                if not self.states[sid]["broken"]:
                    self.step(sid)
            next_round += period
            time.sleep(max(0.0, next_round - time.monotonic()))
        self.client.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work_dir", required=True, help="where the exports go")
    p.add_argument("--worker", type=int, required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--sessions", type=int, required=True)
    p.add_argument("--layers", required=True, help="checked layers, comma separated")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--calls_per_s", type=float, default=20.0, help="this worker's call rate")
    p.add_argument("--ckpt_every", type=int, default=25, help="calls per session between exports")
    p.add_argument("--max_tokens", type=int, default=16, help="largest small prefill")
    p.add_argument("--retry_s", type=float, default=300, help="UNAVAILABLE retried this long")
    p.add_argument("--call_timeout_s", type=float, default=120)
    Worker(p.parse_args()).run()


if __name__ == "__main__":
    main()
