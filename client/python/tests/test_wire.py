"""gdn_serve.wire against the generated protobuf classes (no server)."""

import numpy as np
import pytest

from gdn_serve import wire
from gdn_serve.errors import InvalidArgument
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


def _ref_tensor(dtype, shape, region, offset, byte_size):
    return gdn_pb2.Tensor(dtype=dtype, shape=list(shape),
                          ref=gdn_pb2.RegionRef(region=region, offset=offset, byte_size=byte_size))


def test_references_and_o_region_equal_protobuf_serialization():
    """Tensor.ref (field 4) and ForwardRequest.o_region (13), mixed with inline tensors."""
    k = np.arange(2 * 3 * 4, dtype=np.uint16).reshape(2, 3, 4)
    refs = {"q": wire.RegionRef("shm-a", 0, 48), "v": wire.RegionRef("shm-a", 4096, 96),
            "g": wire.RegionRef("gpu/b:1", 12345678901, 24)}
    o_region = wire.RegionRef("shm-a", 1 << 20, 96)
    raw = wire.encode_forward_request(
        0, wire.encode_sequences([("s", 5, 2)])[0],
        [(3, 2, (2, 3, 4), refs["q"]), (4, 2, (2, 3, 4), k.reshape(-1).view(np.uint8)),
         (5, 2, (2, 6, 4), refs["v"]), (6, 1, (2, 3), refs["g"])],
        o_region=o_region)
    expected = gdn_pb2.ForwardRequest(
        sequences=[gdn_pb2.SequenceSpec(session_id="s", position=5, num_tokens=2)],
        q=_ref_tensor(2, (2, 3, 4), "shm-a", 0, 48),
        k=gdn_pb2.Tensor(dtype=2, shape=[2, 3, 4], data=k.tobytes()),
        v=_ref_tensor(2, (2, 6, 4), "shm-a", 4096, 96),
        g=_ref_tensor(1, (2, 3), "gpu/b:1", 12345678901, 24),
        o_region=gdn_pb2.RegionRef(region="shm-a", offset=1 << 20, byte_size=96))
    assert gdn_pb2.ForwardRequest.FromString(raw) == expected
    assert raw == expected.SerializeToString()
    parsed = gdn_pb2.ForwardRequest.FromString(raw)
    assert parsed.q.WhichOneof("payload") == "ref" and parsed.k.WhichOneof("payload") == "data"


def test_response_without_o_bytes():
    """With o_region the response's o has dtype and shape only."""
    msg = gdn_pb2.ForwardResponse(o=gdn_pb2.Tensor(dtype=2, shape=[3, 4, 64]), positions=[9, 200])
    raw = msg.SerializeToString()
    parsed = wire.parse_forward_response(raw)
    assert (parsed.o_dtype, parsed.o_shape, parsed.o_nbytes) == (2, (3, 4, 64), 0)
    assert parsed.positions == [9, 200]
    header = wire.tensor_header(1, 2, (3, 4, 64), 0)
    assert wire.parse_canonical(raw, header, 0) == (len(header), [9, 200])


def test_canonical_parse_and_expected_positions_equal_protobuf():
    o = np.arange(2 * 4 * 8, dtype=np.uint16)
    for positions in ([1], [127, 128, 16383, 16384, 2 ** 21 + 5, 2 ** 40], list(range(0, 9000, 90))):
        msg = gdn_pb2.ForwardResponse(o=gdn_pb2.Tensor(dtype=2, shape=[2, 4, 8], data=o.tobytes()),
                                      positions=positions)
        raw = msg.SerializeToString()
        header = wire.tensor_header(1, 2, (2, 4, 8), o.nbytes)
        assert raw.startswith(header)
        assert wire.parse_canonical(raw, header, o.nbytes) == (len(header), positions)
        # what a call expects the response to end with: the same bytes protobuf writes
        sequences = [("s%d" % i, max(0, p - 1), 1) for i, p in enumerate(positions)]
        if all(p >= 1 for p in positions):
            encoded, total, tail, expected = wire.encode_sequences_expecting(sequences)
            assert expected == positions and total == len(positions)
            assert tail == gdn_pb2.ForwardResponse(positions=positions).SerializeToString()
            assert encoded == wire.encode_sequences(sequences)[0]
    # anything else than the canonical form falls back (None)
    other = gdn_pb2.ForwardResponse(positions=[3], request_id=7).SerializeToString()
    assert wire.parse_canonical(other, b"", 0) is None


def test_split_parts_shift_references(server_bf16):
    """PreparedForward: each part names its rows of a referenced tensor and of o_region."""
    import gdn_serve
    from gdn_serve.forward_call import ForwardLayout, PreparedForward
    from inputs import direct_inputs
    config = gdn_serve.Client(server_bf16.address).config
    x = direct_inputs(np.random.default_rng(8), 200, config)
    v_bytes = 200 * config.num_v_heads * config.head_dim_v * 2
    tensors = dict(x, q=wire.RegionRef("r", 1000, 200 * 256), beta=wire.RegionRef("r", 0, 200 * 16))
    # inline k, v, g: 784 bytes a row, 157 KB in all; refs and o_region take no rows
    prepared = PreparedForward(ForwardLayout(config), 100_000, 0, [("a", 3, 120), ("b", 0, 80)],
                               tensors, out=wire.RegionRef("r", 1 << 20, v_bytes))
    assert len(prepared.parts) > 1
    o_rows = 0
    for part in prepared.parts:
        msg = gdn_pb2.ForwardRequest.FromString(prepared.payload(part))
        rows = part.end - part.begin
        assert part.begin == o_rows
        assert (msg.q.ref.offset, msg.q.ref.byte_size) == (1000 + part.begin * 256, rows * 256)
        assert (msg.beta.ref.offset, msg.beta.ref.byte_size) == (part.begin * 16, rows * 16)
        assert list(msg.k.shape) == [rows, 2, 64] and len(msg.k.data) == rows * 256
        assert (msg.o_region.offset, msg.o_region.byte_size) == \
            ((1 << 20) + part.begin * 512, rows * 512)
        o_rows += rows
    assert o_rows == 200


def test_prepared_request_equals_protobuf(server_bf16):
    """PreparedForward's whole-call payload (one join of cached headers and the
    tensors' memory) is the protobuf serialization of the same request."""
    import gdn_serve
    from gdn_serve import dtypes
    from gdn_serve.forward_call import ForwardLayout, PreparedForward
    from inputs import direct_inputs
    config = gdn_serve.Client(server_bf16.address).config
    x = direct_inputs(np.random.default_rng(9), 3, config)
    bits = {n: dtypes.float32_to_bf16_bits(x[n]) for n in ("q", "k", "v")}
    sequences = [("a", 7, 2), ("b", 0, 1)]
    prepared = PreparedForward(ForwardLayout(config), 1 << 26, 2, sequences, dict(x, **bits),
                               request_id=77)
    expected = gdn_pb2.ForwardRequest(
        layer=2, request_id=77,
        sequences=[gdn_pb2.SequenceSpec(session_id=s, position=p, num_tokens=n) for s, p, n in sequences],
        **{n: gdn_pb2.Tensor(dtype=2 if n in bits else 1, shape=list(x[n].shape),
                             data=(bits[n] if n in bits else x[n]).tobytes())
           for n in ("q", "k", "v", "g", "beta")})
    assert prepared.payload(prepared.parts[0]) == expected.SerializeToString()


def _sequences_bytes(specs):
    """protobuf's own bytes of ForwardRequest.sequences for (id, position, num_tokens[, draft[, interval]])."""
    msg = gdn_pb2.ForwardRequest()
    for spec in specs:
        draft, interval = (tuple(spec[3:]) + (False, 0))[:2]
        msg.sequences.add(session_id=spec[0], position=spec[1], num_tokens=spec[2], draft=draft,
                          checkpoint_interval=interval)
    return msg.SerializeToString()


def test_decode_step_batches_equal_protobuf():
    """A batch of decode steps: every position class (0, one-byte, two-byte,
    past the decode table) and id length (one- and two-byte lengths) agrees with
    protobuf, on the first call and on the next (ids cached)."""
    rng = np.random.default_rng(17)
    ids = ["d%d-%s" % (i, "x" * int(rng.integers(0, 200))) for i in range(40)]
    for round_ in range(6):
        positions = [int(p) for p in rng.choice([0, 1, 127, 128, 5000, 16382], size=len(ids))]
        if round_ == 5:
            positions[7] = 16383  # past the decode table: the general loop
        specs = [(s, p, 1) for s, p in zip(ids, positions)]
        for _ in range(2):
            encoded, total, tail, expected = wire.encode_sequences_expecting(specs)
            assert encoded == _sequences_bytes(specs)
            assert total == len(ids) and expected == [p + 1 for p in positions]
            assert tail == gdn_pb2.ForwardResponse(positions=expected).SerializeToString()


def test_decode_steps_among_longer_specs():
    """A 5-field spec among decode steps keeps its checkpoint interval; a
    one-token draft and a negative position are refused, ids cached or not."""
    specs = [("c%d" % i, 10 + i, 1) for i in range(4)]
    wire.encode_sequences_expecting(specs)
    with_interval = specs[:2] + [("c2", 12, 1, False, 4)] + specs[3:]
    assert wire.encode_sequences_expecting(with_interval)[0] == _sequences_bytes(with_interval)
    with pytest.raises(InvalidArgument, match="draft"):
        wire.encode_sequences_expecting(specs[:3] + [("c3", 13, 1, True)])
    with pytest.raises(InvalidArgument, match="position"):
        wire.encode_sequences_expecting(specs[:3] + [("c3", -1, 1)])


def test_repeated_sequences_reuse_their_encoding():
    """The same specs again (the next layer of a token) give the same bytes and
    a fresh positions list (changing one does not change the next); a list
    spec is encoded without being remembered; bad specs are never remembered."""
    specs = [("layer-a", 40, 1), ("layer-b", 7, 3)]
    first = wire.encode_sequences_expecting(specs)
    first[3].append(99)
    again = wire.encode_sequences_expecting(list(specs))
    assert again[:3] == first[:3] and again[3] == [41, 10]
    assert again[0] == _sequences_bytes(specs)
    assert wire.encode_sequences_expecting([list(s) for s in specs])[0] == first[0]
    for _ in range(2):
        with pytest.raises(InvalidArgument, match="num_tokens"):
            wire.encode_sequences_expecting([("layer-a", 40, 0)])


def test_values_of_the_wrong_type_are_invalid_arguments():
    """A float position or count, an id that is not a str: InvalidArgument
    naming the spec, on the decode-step path and the general one alike."""
    for specs, match in (([("w", 5.0, 1)], "integers"), ([("w", 5, 2.0)], "integers"),
                         ([("w", 1, 1), (["w"], 2, 1)], r"sequences\[1\].session_id"),
                         ([("w", 1, 1), (7, 2, 3)], r"sequences\[1\].session_id")):
        with pytest.raises(InvalidArgument, match=match):
            wire.encode_sequences_expecting(specs)
    assert wire.encode_sequences_expecting([("w", np.int64(5), np.int64(1))])[3] == [6]
