"""Errors are typed: each GdnError subclass carries the gRPC code and the
server's message; FailedPrecondition names the expected position."""

import socket

import grpc
import numpy as np
import pytest

import gdn_serve
from inputs import direct_inputs

_TINY = {"device_state_budget": "128KiB", "host_state_budget": "128KiB"}  # 2 + 2 pages of 64 KiB


@pytest.fixture(scope="module")
def server_tiny():
    from conftest import _start
    server = _start(dict(_TINY, activation_dtype="bf16"))
    yield server
    server.stop()


def _x(client, tokens=2, seed=20):
    return direct_inputs(np.random.default_rng(seed), tokens, client.config)


def _forward(client, sid, position, x, layer=0):
    return client.forward(layer, [(sid, position, x["q"].shape[0])], x["q"], x["k"], x["v"],
                          x["g"], x["beta"])


def test_not_found(client):
    with pytest.raises(gdn_serve.NotFound) as e:
        _forward(client, "no-such-session", 0, _x(client))
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    assert "no-such-session" in e.value.message
    with pytest.raises(gdn_serve.NotFound):
        client.describe_session("no-such-session")


def test_failed_precondition_names_expected_position(client):
    sid = client.create_session()
    x = _x(client, 3)
    _forward(client, sid, 0, x)
    with pytest.raises(gdn_serve.FailedPrecondition) as e:
        _forward(client, sid, 0, x)  # the same call again: already applied
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert e.value.expected_position == 3
    assert "is at position 3" in e.value.message
    assert isinstance(e.value, gdn_serve.GdnError)


def test_invalid_argument_from_the_server(client):
    sid = client.create_session()
    x = _x(client)
    x["q"][1, 0, 5] = np.nan
    with pytest.raises(gdn_serve.InvalidArgument) as e:
        _forward(client, sid, 0, x)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "q" in e.value.message
    x = _x(client)
    x["g"][0, 0] = 0.5  # a log-space decay must be <= 0
    with pytest.raises(gdn_serve.InvalidArgument, match="g: element 0 is 0.5"):
        _forward(client, sid, 0, x)
    assert client.describe_session(sid).layers[0].position == 0  # nothing applied


def test_invalid_argument_checked_client_side(client):
    with pytest.raises(gdn_serve.InvalidArgument) as e:
        client.forward(0, [], np.zeros((0, 2, 64)), np.zeros((0, 2, 64)), np.zeros((0, 4, 64)),
                       np.zeros((0, 4)), np.zeros((0, 4)))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "at least one sequence" in str(e.value)


def test_already_exists(client):
    sid = client.create_session("dup-" + gdn_serve.new_session_id())
    with pytest.raises(gdn_serve.AlreadyExists) as e:
        client.create_session(sid)
    assert e.value.code == grpc.StatusCode.ALREADY_EXISTS


def test_resource_exhausted(server_tiny):
    client = gdn_serve.Client(server_tiny.address, timeout=60)
    x = _x(client, 1)
    with pytest.raises(gdn_serve.ResourceExhausted) as e:
        for i in range(8):  # 8 (session, layer) states > 4 pages
            _forward(client, client.create_session(), 0, x)
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and e.value.message
    client.close()


def test_unavailable_without_a_server():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = gdn_serve.Client("127.0.0.1:%d" % port, timeout=10, retry=gdn_serve.NO_RETRY)
    with pytest.raises(gdn_serve.Unavailable) as e:
        client.info()
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    client.close()


def test_deadline_exceeded_and_nothing_applied(client):
    """A position ahead waits for the gap until the deadline, then fails unapplied."""
    sid = client.create_session()
    x = _x(client, 1)
    with pytest.raises(gdn_serve.DeadlineExceeded) as e:
        client.forward(0, [(sid, 5, 1)], x["q"], x["k"], x["v"], x["g"], x["beta"], timeout=0.3)
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert client.describe_session(sid).layers[0].position == 0
    _forward(client, sid, 0, x)  # the gap filled from 0: works


def test_error_for_code_maps_every_class():
    for cls in (gdn_serve.InvalidArgument, gdn_serve.FailedPrecondition, gdn_serve.NotFound,
                gdn_serve.ResourceExhausted, gdn_serve.Unavailable, gdn_serve.DeadlineExceeded):
        error = gdn_serve.errors.error_for_code(cls.code, "m")
        assert type(error) is cls and error.message == "m" and str(error) == cls.code.name + ": m"
    assert type(gdn_serve.errors.error_for_code(grpc.StatusCode.ABORTED, "x")) is gdn_serve.GdnError
