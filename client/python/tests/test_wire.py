"""gdn_serve.wire against the generated protobuf classes (no server)."""

import numpy as np

from gdn_serve import wire
from gdn_serve._proto import gdn_pb2


def test_varints():
    for value in (1, 127, 128, 300, 2 ** 31 - 1, 2 ** 63 - 1):  # 0 is omitted (proto3)
        m = gdn_pb2.SequenceSpec(position=value)
        assert m.SerializeToString() == b"\x10" + wire.encode_varint(value)
    negative = gdn_pb2.ForwardRequest(layer=-1).SerializeToString()
    assert negative == b"\x08" + wire.encode_varint(-1)


def test_request_equals_protobuf_serialization():
    q = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    beta = np.full((2, 3), 0.5, np.float32)
    sequences = [("alice", 0, 1), ("tenant/b\u00e9", 12345678901, 1)]
    raw = wire.encode_forward_request(
        7, wire.encode_sequences(sequences)[0],
        [(3, 1, q.shape, q.reshape(-1).view(np.uint8)), (7, 1, beta.shape, beta.reshape(-1).view(np.uint8))],
        request_id=99)
    expected = gdn_pb2.ForwardRequest(
        layer=7, request_id=99,
        sequences=[gdn_pb2.SequenceSpec(session_id=s, position=p, num_tokens=n) for s, p, n in sequences],
        q=gdn_pb2.Tensor(dtype=1, shape=list(q.shape), data=q.tobytes()),
        beta=gdn_pb2.Tensor(dtype=1, shape=list(beta.shape), data=beta.tobytes()))
    assert gdn_pb2.ForwardRequest.FromString(raw) == expected
    assert raw == expected.SerializeToString()


def test_response_parsed_in_place():
    o = np.arange(24, dtype=np.uint16)
    msg = gdn_pb2.ForwardResponse(
        o=gdn_pb2.Tensor(dtype=2, shape=[2, 3, 4], data=o.tobytes()), positions=[5, 300, 0],
        request_id=3, error_code=0, error_message="")
    raw = msg.SerializeToString()
    parsed = wire.parse_forward_response(raw)
    assert (parsed.o_dtype, parsed.o_shape, parsed.o_nbytes) == (2, (2, 3, 4), 48)
    assert parsed.positions == [5, 300, 0] and parsed.request_id == 3
    view = np.frombuffer(raw, np.uint16, count=24, offset=parsed.o_offset)
    np.testing.assert_array_equal(view, o)
    # o after the small fields (not the canonical order) parses the same.
    reordered = gdn_pb2.ForwardResponse(positions=[5, 300, 0], request_id=3).SerializeToString() + \
        gdn_pb2.ForwardResponse(o=msg.o).SerializeToString()
    again = wire.parse_forward_response(reordered)
    assert again.positions == [5, 300, 0] and again.o_shape == (2, 3, 4)
    np.testing.assert_array_equal(np.frombuffer(reordered, np.uint16, 24, again.o_offset), o)


def test_stream_error_fields():
    raw = gdn_pb2.ForwardResponse(error_code=9, error_message="boom").SerializeToString()
    parsed = wire.parse_forward_response(raw)
    assert (parsed.error_code, parsed.error_message, parsed.o_nbytes) == (9, "boom", 0)


def test_sequences_large_values_and_refusals():
    import pytest
    from gdn_serve import InvalidArgument
    sequences = [("s", 0, 1), ("t" * 200, 20000, 70000), ("u", 16383, 16384)]
    raw, total = wire.encode_sequences(sequences)
    assert total == 1 + 70000 + 16384
    parsed = gdn_pb2.ForwardRequest.FromString(raw).sequences
    assert [(s.session_id, s.position, s.num_tokens) for s in parsed] == sequences
    for bad, match in (([], "at least one"), ([("", 0, 1)], "session_id"), ([("s", -1, 1)], "position"),
                       ([("s", 0, 0)], "num_tokens"), ([("s", 0)], "expected")):
        with pytest.raises(InvalidArgument, match=match):
            wire.encode_sequences(bad)
