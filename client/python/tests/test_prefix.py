"""Prefix reuse from Python: forward(..., checkpoint_interval=64) keeps states,
Session.fork(at_position=) continues from them, against the float64 reference
on the fp32 server; other positions are FailedPrecondition naming the ones
available."""

import numpy as np
import pytest

import gdn_serve
from inputs import direct_inputs, rows
from reference import gdn_reference, relative_error

TOLERANCE = 2e-4  # fp32 activations and state


def _args(x):
    return x["q"], x["k"], x["v"], x["g"], x["beta"]


def test_fork_at_kept_positions(server_fp32):
    with gdn_serve.Client(server_fp32.address, timeout=60) as client:
        layers = client.config.num_layers
        x = direct_inputs(np.random.default_rng(100), 204, client.config)
        s = client.session()
        for layer in range(layers):
            s.forward(layer, *_args(rows(x, 0, 200)), checkpoint_interval=64)
        info = client.describe_session(s.id).layers[0]
        assert list(info.kept_positions) == [64, 128, 192]
        for at in (64, 128, 192):
            child = s.fork(at_position=at)
            assert child.positions == [at] * layers
            tail = {key: np.concatenate([x[key][:at], x[key][200:204]]) for key in x}
            o = child.forward(1, *_args(rows(x, 200, 204)))
            ref, _ = gdn_reference(*_args(tail))
            assert relative_error(o, ref[-4:]) < TOLERANCE
            child.close()
        with pytest.raises(gdn_serve.FailedPrecondition) as e:
            s.fork(at_position=100)
        assert "positions available on every layer: [64, 128, 192, 200]" in str(e.value)
        with pytest.raises(gdn_serve.InvalidArgument):
            s.forward(0, *_args(rows(x, 200, 204)), checkpoint_interval=32)
        s.close()


def test_sequence_flags_encode_like_protobuf():
    from gdn_serve import wire
    from gdn_serve._proto import gdn_pb2

    sequences = [("a", 64, 70, False, 64), ("b", 0, 3, True), ("c", 5, 1), ("d", 0, 130, False, 128)]
    got = wire.encode_sequences(sequences)
    want = gdn_pb2.ForwardRequest(sequences=[
        gdn_pb2.SequenceSpec(session_id="a", position=64, num_tokens=70, checkpoint_interval=64),
        gdn_pb2.SequenceSpec(session_id="b", position=0, num_tokens=3, draft=True),
        gdn_pb2.SequenceSpec(session_id="c", position=5, num_tokens=1),
        gdn_pb2.SequenceSpec(session_id="d", position=0, num_tokens=130, checkpoint_interval=128),
    ]).SerializeToString()
    assert got == (want, 204)
