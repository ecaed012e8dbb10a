"""Positions make calls exactly-once: a retried call whose first try was
applied is refused (FailedPrecondition) and the Session takes the server's
position; an unapplied try (deadline while waiting) leaves nothing behind;
UNAVAILABLE is retried by the client; multi-session calls advance every session."""

import numpy as np
import pytest

import gdn_serve
from gdn_serve import retry
from inputs import direct_inputs, rows


def _args(x):
    return x["q"], x["k"], x["v"], x["g"], x["beta"]


def test_retry_of_an_applied_call_is_refused_and_resynced(client):
    x = direct_inputs(np.random.default_rng(40), 6, client.config)
    s = client.session()
    s.forward(1, *_args(rows(x, 0, 4)))
    # Another writer (or a lost answer of an earlier try) moved the layer on.
    client.forward(1, [(s.id, 4, 1)], *_args(rows(x, 4, 5)))
    with pytest.raises(gdn_serve.FailedPrecondition) as e:
        s.forward(1, *_args(rows(x, 4, 5)))
    assert e.value.expected_position == 5
    assert s.positions[1] == 5  # took the server's position
    s.forward(1, *_args(rows(x, 5, 6)))
    assert s.positions[1] == 6
    s.close()


def test_timed_out_call_then_retry_applies_once(client):
    x = direct_inputs(np.random.default_rng(41), 2, client.config)
    s = client.session()
    s.positions[0] = 1  # a position ahead: the server waits for the gap, then times out
    with pytest.raises(gdn_serve.DeadlineExceeded):
        s.forward(0, *_args(rows(x, 1, 2)), timeout=0.2)
    assert s.positions[0] == 1  # unchanged: the call was not applied
    s.resync()
    assert s.positions == [0, 0, 0]
    s.forward(0, *_args(rows(x, 0, 2)))
    assert client.describe_session(s.id).layers[0].position == 2


def test_forward_sessions_advances_each(client):
    x = direct_inputs(np.random.default_rng(42), 5, client.config)
    a, b = client.session(), client.session()
    gdn_serve.forward_sessions(client, 2, [a, b], [3, 2], *_args(x))
    assert (a.positions[2], b.positions[2]) == (3, 2)
    b.positions[2] = 0  # stale
    with pytest.raises(gdn_serve.FailedPrecondition):
        gdn_serve.forward_sessions(client, 2, [a, b], [1, 1], *_args(rows(x, 0, 2)))
    assert (a.positions[2], b.positions[2]) == (3, 2)  # resynced from the server


def test_unavailable_is_retried_then_raised():
    policy = retry.RetryPolicy(max_attempts=5, initial_backoff=0.001, max_backoff=0.002)
    assert retry.call_with_retry(policy, lambda n: _raise_rpc(n, 3)) == "ok"
    with pytest.raises(gdn_serve.Unavailable):
        retry.call_with_retry(retry.RetryPolicy(max_attempts=2, initial_backoff=0.001),
                              lambda n: _raise_rpc(n, 10))
    with pytest.raises(gdn_serve.NotFound):  # never retried
        retry.call_with_retry(policy, lambda n: _raise_rpc(n, 10, code="NOT_FOUND"))


def _raise_rpc(attempt, succeed_at, code="UNAVAILABLE"):
    import grpc

    class FakeRpcError(grpc.RpcError):
        def code(self):
            return getattr(grpc.StatusCode, code)

        def details(self):
            return "try %d" % attempt

    if attempt < succeed_at:
        raise FakeRpcError()
    return "ok"


def test_metadata_carries_token_and_route():
    client = gdn_serve.Client("127.0.0.1:1", token="s3cret")
    md = dict(client._md("tenant7/chat-3"))
    assert md == {"authorization": "Bearer s3cret", "x-gdn-route": "tenant7"}
    assert gdn_serve.routing.route_header_value("caf\u00e9 %") == "caf%C3%A9%20%25"
    assert dict(gdn_serve.Client("127.0.0.1:1")._md(None)) == {}
