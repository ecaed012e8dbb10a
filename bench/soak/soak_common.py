"""What the soak's driver and workers share: deterministic inputs, the
per-session call log, the epoch file and the float64 oracle check.

Inputs are a pure function of (seed, session index, layer, position): one
token's q, k, v, g, beta come from their own generator, so any split of a
session's tokens into calls (a worker's, a replay after recovery, the final
probe) sends the same values, and the oracle recomputes them from the
positions alone. The operator and its draws are the client tests' own
(client/python/tests/reference.py and inputs.py), imported, not copied.
"""

import json
import os
import sys

import numpy as np

_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python",
                      "tests")
sys.path.insert(0, os.path.normpath(_TESTS))
from inputs import TOLERANCE, direct_inputs  # noqa: E402  (client/python/tests)
from reference import gdn_reference, relative_error, round_to  # noqa: E402

from gdn_serve import dtypes  # noqa: E402

__all__ = ["TOLERANCE", "session_id", "session_index", "token_inputs", "SessionLog", "read_log",
           "read_epochs", "write_json_atomically", "loss_allowed", "oracle_check", "is_replay",
           "OBSERVED", "read_json"]


def session_id(index: int) -> str:
    return "soak-%04d" % index


def session_index(sid: str) -> int:
    return int(sid.rsplit("-", 1)[1])


def token_inputs(seed: int, index: int, layer: int, begin: int, count: int, config):
    """q, k, v, g, beta (float32) of positions [begin, begin + count) of one (session, layer)."""
    rows = [direct_inputs(np.random.default_rng([seed, index, layer, p]), 1, config)
            for p in range(begin, begin + count)]
    return {name: np.concatenate([r[name] for r in rows]) for name in rows[0]}


def write_json_atomically(path: str, value) -> None:
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(value, f)
    os.replace(tmp, path)


def read_json(path: str, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def read_epochs(out_dir: str):
    """The driver's list of server incarnations: [{epoch, prev_end, lost_ids}]."""
    with open(os.path.join(out_dir, "epochs.json")) as f:
        return json.load(f)


def loss_allowed(epochs, since_epoch: int, sid: str) -> bool:
    """A session the server no longer has is within the contract only when a
    server between `since_epoch` (the last one the session was seen on) and
    now ended by SIGKILL (no drain, nothing written) or by a drain that named
    this session as not written (exit status 3). After a clean drain every
    session must come back from --snapshot_dir."""
    for inc in epochs:
        if inc["epoch"] <= since_epoch:
            continue
        if inc["prev_end"] == "sigkill":
            return True
        if inc["prev_end"] == "drain_failed" and sid in inc["lost_ids"]:
            return True
    return False


class SessionLog:
    """One session's append-only JSON-lines log. A record is one os.write of
    one line, so a worker killed mid-write leaves at most a torn last line,
    which read_log skips. The intent is written before a call is sent and the
    ack after its response: a dangling intent is the one call that may or may
    not have been applied."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, **record) -> None:
        os.write(self.fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())

    def close(self) -> None:
        os.close(self.fd)


# Records that prove the session was on the server of their epoch (an
# intent, a "lost" or a "recover" record proves nothing about the server).
OBSERVED = ("created", "ack", "check", "imported", "recovered", "ckpt")


def is_replay(how) -> bool:
    return str(how).startswith("replay")


def read_log(path: str, layers):
    """The session's state as its log says: acked positions per layer (the
    highest acked end: a replay's acks are below it), the dangling intent
    (or None), the last epoch it was seen on, the recovery in progress (or
    None) and every record (for the summary).

    A recovery starts with a "recover" record (base: the positions of the
    export it re-imports, or 0 for a re-created session; target: the acked
    positions), then "imported" once the server holds the base, replay
    intents / acks (how "replay...") from base up to the acked positions,
    and ends with "recovered". progress: per layer, the base or the end of
    the last replay ack, i.e. where the server must be."""
    state = {"acked": {l: 0 for l in layers}, "pending": None, "seen_epoch": -1,
             "records": [], "created": False, "broken": False, "recovery": None}
    if not os.path.exists(path):
        return state
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a torn last line
            state["records"].append(r)
            e = r["e"]
            rec = state["recovery"]
            if e == "created":
                state["created"] = True
            elif e == "intent":
                state["pending"] = r
            elif e == "ack":
                l, end = r["l"], r["p"] + r["n"]
                state["acked"][l] = max(state["acked"][l], end)
                state["pending"] = None
                if rec is not None and is_replay(r.get("how")):
                    rec["progress"][l] = max(rec["progress"][l], end)
                    rec["imported"] = True  # a replay ack: the server had the base
            elif e == "recover":
                base = {l: 0 for l in layers}
                base.update({int(l): p for l, p in r["base"].items() if int(l) in base})
                state["recovery"] = {"base": base, "progress": dict(base), "imported": False,
                                     "ep": r["ep"]}
                state["pending"] = None
            elif e == "imported" and rec is not None:
                rec["imported"] = True
            elif e == "recovered":
                state["recovery"] = None
            elif e == "violation":
                state["broken"] = True
            if "ep" in r and e in OBSERVED:
                state["seen_epoch"] = max(state["seen_epoch"], r["ep"])
    return state


def _state_array(data: bytes, config):
    shape = (config.num_v_heads, config.head_dim_k, config.head_dim_v)
    if not data:
        return np.zeros(shape)
    return np.frombuffer(data, np.float32).reshape(shape).astype(np.float64)


def oracle_check(client, sid: str, seed: int, acked: dict, state_tol: float, o_tol: float = 0):
    """Every checked layer of one session against the float64 oracle over
    exactly its acknowledged tokens: the exported state (fp32 state pages
    only: other dtypes are compressed) and the o of one more token (the
    probe, sent at the acked position, so it also proves the server holds no
    extra token). o_tol 0: the client tests' bound for the wire dtype.
    Returns a dict of errors and the verdict."""
    from gdn_serve.snapshot import decode_file
    config = client.config
    wire = config.activation_dtype
    o_tol = o_tol or TOLERANCE[dtypes.NAMES[wire]]
    snap = decode_file(client.export_session(sid), sid)
    by_layer = {s.layer: s for s in snap.layers}
    index = session_index(sid)
    result = {"sid": sid, "state_err": 0.0, "o_err": 0.0, "problems": []}
    for layer, pos in sorted(acked.items()):
        have = by_layer[layer].position if layer in by_layer else 0
        if have != pos:
            result["problems"].append("layer %d at %d, acked %d" % (layer, have, pos))
            continue
        x = token_inputs(seed, index, layer, 0, pos + 1, config)
        q, k, v = (round_to(x[n], wire) for n in ("q", "k", "v"))
        o_ref, s_ref = gdn_reference(q[:pos], k[:pos], v[:pos], x["g"][:pos], x["beta"][:pos],
                                     l2_norm_qk=config.l2_norm_qk, scale=config.scale)
        if config.state_dtype == "fp32" and layer in by_layer:
            err = relative_error(_state_array(by_layer[layer].data, config), s_ref)
            result["state_err"] = max(result["state_err"], err)
            if not err < state_tol:
                result["problems"].append("layer %d state error %.3g" % (layer, err))
        o_probe, s_next = gdn_reference(q[pos:], k[pos:], v[pos:], x["g"][pos:], x["beta"][pos:],
                                        state=s_ref, l2_norm_qk=config.l2_norm_qk,
                                        scale=config.scale)
        probe = {n: t[pos:] for n, t in x.items()}
        o, positions = client.forward_with_positions(layer, [(sid, pos, 1)], **probe)
        err = relative_error(np.asarray(o, np.float32), o_probe)
        result["o_err"] = max(result["o_err"], err)
        if not err < o_tol or positions[0] != pos + 1:
            result["problems"].append("layer %d probe o error %.3g, position %d"
                                      % (layer, err, positions[0]))
    result["ok"] = not result["problems"]
    return result
