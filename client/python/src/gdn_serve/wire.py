"""ForwardRequest / ForwardResponse bytes without building protobuf objects.

Forward is the hot path: a prefill moves tens of MiB, a decode call a few KiB
many thousand times a second. Built through protobuf messages, each tensor
would be copied three times (to bytes, into the message, into the serialized
string) and each call would allocate a dozen Python objects. Here the request
is written directly in protobuf wire format (proto3: default values omitted,
fields in number order, packed repeated scalars): the headers of a call shape
are cached, so a request is one `b"".join` of cached headers and the tensors'
own memory (one copy, into the bytes grpcio takes). The response is parsed
by hand: o is located inside the response bytes (numpy / torch view it in
place), the positions are read as varints. tests/test_wire.py checks both
directions against the generated gdn_pb2 classes.

ForwardRequest fields: layer 1, sequences 2 (SequenceSpec: session_id 1,
position 2, num_tokens 3), q 3, k 4, v 5, g 6, beta 7, a 8, b 9, a_log 10,
dt_bias 11, request_id 12, o_region 13; Tensor: dtype 1, shape 2 (packed),
oneof payload {data 3, ref 4}; RegionRef: region 1, offset 2, byte_size 3.
ForwardResponse: o 1, positions 2 (packed), request_id 3, error_code 4,
error_message 5 (parsed in wire_response).
"""

from operator import index as index_of
from typing import Dict, List, NamedTuple, Sequence, Tuple

from .errors import InvalidArgument
# The response side (parsed in place) lives in wire_response; re-exported here.
from .wire_response import ParsedResponse, parse_canonical, parse_forward_response  # noqa: F401

__all__ = ["encode_varint", "encode_sequences", "encode_sequences_expecting",
           "encode_forward_request", "tensor_header", "RegionRef", "tensor_ref_field",
           "o_region_field", "layer_field", "ParsedResponse", "parse_canonical",
           "parse_forward_response", "TENSOR_FIELDS"]

# Field numbers of the ForwardRequest tensors.
TENSOR_FIELDS = {"q": 3, "k": 4, "v": 5, "g": 6, "beta": 7, "a": 8, "b": 9, "a_log": 10,
                 "dt_bias": 11}
_LEN = 2  # wire type of length-delimited fields
_TABLE_SIZE = 1 << 14  # varints of 1 and 2 bytes, precomputed (positions, counts, lengths)
_TABLE = [bytes([i]) for i in range(128)] + [bytes([(i & 0x7F) | 0x80, i >> 7])
                                             for i in range(128, _TABLE_SIZE)]


def encode_varint(value: int) -> bytes:
    """Unsigned LEB128; negative values as 64-bit two's complement (int32/int64 fields)."""
    if 0 <= value < _TABLE_SIZE:
        return _TABLE[value]
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return encode_varint((field << 3) | wire_type)


def _length_delimited(field: int, body: bytes) -> bytes:
    return _key(field, _LEN) + encode_varint(len(body)) + body


_LAYER = [b""] + [b"\x08" + _TABLE[v] for v in range(1, 256)]


def layer_field(layer: int) -> bytes:
    """ForwardRequest.layer (field 1); empty for layer 0 (proto3 default)."""
    return _LAYER[layer] if 0 <= layer < 256 else b"\x08" + encode_varint(layer)


_SESSION_PREFIX_CACHE: Dict[str, bytes] = {}


def _session_prefix(index: int, session_id) -> bytes:
    """The session_id field of a SequenceSpec (cached: ids repeat every call)."""
    if type(session_id) is not str or not session_id:
        raise InvalidArgument("sequences[%d].session_id: must be a non-empty str, got %r"
                              % (index, session_id))
    raw = session_id.encode("utf-8")
    if len(_SESSION_PREFIX_CACHE) > 65536:
        _SESSION_PREFIX_CACHE.clear()
    prefix = _SESSION_PREFIX_CACHE[session_id] = b"\x0a" + encode_varint(len(raw)) + raw
    return prefix


# SequenceSpec.position (field 2) of small values, tagged.
_POSITION = [b""] + [b"\x10" + _TABLE[v] for v in range(1, _TABLE_SIZE)]
# position and num_tokens 1 of a decode step, together.
_DECODE_STEP = [p + b"\x18\x01" for p in _POSITION[:-1]]


def encode_sequences(sequences: Sequence[Tuple[str, int, int]]) -> Tuple[bytes, int]:
    """The repeated `sequences` field (2) for [(session_id, position, num_tokens)],
    and T = the sum of num_tokens. InvalidArgument for an empty list, an empty
    or non-str id, a position < 0 or a num_tokens < 1."""
    encoded = encode_sequences_expecting(sequences)
    return encoded[0], encoded[1]


# Per session id: the head of its SequenceSpec record in a decode step (key
# 0x12, the record's length, the session_id field), for each length of the
# step's tail _DECODE_STEP[position] (2 bytes at position 0, 4 below 128, 5
# from 128), indexed by _DECODE_CLASS[position].
_DECODE_HEADS: Dict[str, Tuple[bytes, bytes, bytes]] = {}
_DECODE_CLASS = [0] + [1] * 127 + [2] * (len(_DECODE_STEP) - 128)


def _decode_heads(index: int, session_id) -> Tuple[bytes, bytes, bytes]:
    prefix = _SESSION_PREFIX_CACHE.get(session_id) or _session_prefix(index, session_id)
    if len(_DECODE_HEADS) > 65536:
        _DECODE_HEADS.clear()
    heads = _DECODE_HEADS[session_id] = tuple(
        b"\x12" + encode_varint(len(prefix) + tail) + prefix for tail in (2, 4, 5))
    return heads


def _encode_spec(index: int, spec) -> Tuple[bytes, int, int]:
    """(SequenceSpec record, num_tokens, position + num_tokens) of any spec
    (the general form: drafts, checkpoint intervals, large values), checked."""
    try:  # (session_id, position, num_tokens[, draft[, checkpoint_interval]])
        session_id, position, num_tokens, draft, interval = (tuple(spec) + (False, 0))[:5]
    except (TypeError, ValueError):
        raise InvalidArgument("sequences[%d]: expected (session_id, position, num_tokens"
                              "[, draft[, checkpoint_interval]]), got %r" % (index, spec)) from None
    prefix = (type(session_id) is str and _SESSION_PREFIX_CACHE.get(session_id)) or \
        _session_prefix(index, session_id)
    try:
        position, num_tokens, interval = index_of(position), index_of(num_tokens), \
            index_of(interval)
    except TypeError:
        raise InvalidArgument("sequences[%d]: position, num_tokens and checkpoint_interval must "
                              "be integers, got %r" % (index, spec)) from None
    if position < 0:
        raise InvalidArgument("sequences[%d].position: must be >= 0, got %d" % (index, position))
    if draft and not 2 <= num_tokens <= 8:
        raise InvalidArgument("sequences[%d].draft: a draft has 2..8 tokens, got %d"
                              % (index, num_tokens))
    if num_tokens < 1:
        raise InvalidArgument("sequences[%d].num_tokens: must be >= 1, got %d"
                              % (index, num_tokens))
    body = prefix + (b"\x10" + encode_varint(position) if position > 0 else b"") + \
        b"\x18" + encode_varint(num_tokens) + (b"\x20\x01" if draft else b"") + \
        (b"\x28" + encode_varint(interval) if interval > 0 else b"")
    return b"\x12" + encode_varint(len(body)) + body, num_tokens, position + num_tokens


# The last calls' encodings by their sequences: a model runner calls every
# layer of a token with the same sessions at the same positions, so all but
# the first layer's call reuse the first's bytes (a hash of the specs instead
# of encoding them; entries are dropped all at once when it is full).
_RECENT: Dict[tuple, Tuple[bytes, int, bytes, List[int]]] = {}
_RECENT_LIMIT = 256


def encode_sequences_expecting(sequences: Sequence[Tuple[str, int, int]]
                               ) -> Tuple[bytes, int, bytes, List[int]]:
    """encode_sequences, plus what the response will say when the call applies:
    ForwardResponse.positions (field 2, packed) as bytes and as the list
    [position + num_tokens] (take_whole compares bytes instead of parsing).
    Remembers the last few encodings (_RECENT)."""
    try:
        key = tuple(sequences)
        hit = _RECENT.get(key)
    except TypeError:  # a spec that is not hashable (a list): encoded, not remembered
        return _encode_sequences(sequences)
    if hit is not None:
        return hit[0], hit[1], hit[2], list(hit[3])
    encoded = _encode_sequences(key)
    if len(_RECENT) >= _RECENT_LIMIT:
        _RECENT.clear()
    _RECENT[key] = encoded[0], encoded[1], encoded[2], list(encoded[3])
    return encoded


def _encode_sequences(sequences) -> Tuple[bytes, int, bytes, List[int]]:
    """encode_sequences_expecting without the memory.

    The hot path of every Forward: a decode step (num_tokens 1, position
    below 16383) is two cached pieces per sequence; any other spec (a
    prefill chunk, a draft, a checkpoint interval) goes through _encode_spec."""
    if not sequences:
        raise InvalidArgument("sequences: at least one sequence is required")
    parts: List[bytes] = []
    extend = parts.extend
    expected: List[int] = []
    expect = expected.append
    decode_heads, classes, decode, decode_size = (_DECODE_HEADS, _DECODE_CLASS, _DECODE_STEP,
                                                  len(_DECODE_STEP))
    index = 0
    longer = 0  # tokens beyond one per sequence
    try:
        for spec in sequences:
            try:
                session_id, position, num_tokens = spec
            except (TypeError, ValueError):  # the 4- and 5-field forms
                num_tokens = 0
            if num_tokens == 1 and 0 <= position < decode_size:  # a decode step
                heads = decode_heads.get(session_id) or _decode_heads(index, session_id)
                extend((heads[classes[position]], decode[position]))
                expect(position + 1)
            else:
                record, num_tokens, after = _encode_spec(index, spec)
                parts.append(record)
                expect(after)
                longer += num_tokens - 1
            index += 1
    except TypeError:  # a value of the wrong type (a float position, an id that is a list)
        for i, spec in enumerate(sequences):
            _encode_spec(i, spec)  # raises InvalidArgument for the first bad spec
        raise
    table, size = _TABLE, _TABLE_SIZE
    values = b"".join([table[a] if a < size else encode_varint(a) for a in expected])
    return (b"".join(parts), index + longer, b"\x12" + encode_varint(len(values)) + values,
            expected)


def _dtype_shape(dtype: int, shape: Sequence[int]) -> bytes:
    body = b""
    if dtype:
        body += b"\x08" + encode_varint(dtype)
    if shape:
        packed = b"".join(encode_varint(d) for d in shape)
        body += b"\x12" + encode_varint(len(packed)) + packed
    return body


# Encoded fields that repeat call after call (shapes, a model runner's staging
# references), by their arguments; emptied when it grows past _CACHE_LIMIT.
_FIELD_CACHE: Dict[tuple, bytes] = {}
_CACHE_LIMIT = 4096


def _cached(key: tuple, make) -> bytes:
    """_FIELD_CACHE[key], made by make() on a miss."""
    value = _FIELD_CACHE.get(key)
    if value is None:
        if len(_FIELD_CACHE) > _CACHE_LIMIT:
            _FIELD_CACHE.clear()
        value = _FIELD_CACHE[key] = make()
    return value


def tensor_header(field: int, dtype: int, shape: Tuple[int, ...], nbytes: int) -> bytes:
    """Everything of an inline Tensor field up to (not including) its nbytes of data
    (cached: shapes repeat). nbytes 0 leaves `data` unset."""
    def make():
        body = _dtype_shape(dtype, shape)
        if nbytes:
            body += b"\x1a" + encode_varint(nbytes)
        return _key(field, _LEN) + encode_varint(len(body) + nbytes) + body
    return _cached(("header", field, dtype, shape, nbytes), make)


class RegionRef(NamedTuple):
    """Bytes [offset, offset + byte_size) of a registered region (gdn.v1.RegionRef)."""

    region: str
    offset: int
    byte_size: int


def _region_ref_body(ref: RegionRef) -> bytes:
    name = ref.region.encode("utf-8")
    body = b"\x0a" + encode_varint(len(name)) + name
    if ref.offset:
        body += b"\x10" + encode_varint(ref.offset)
    if ref.byte_size:
        body += b"\x18" + encode_varint(ref.byte_size)
    return body


def tensor_ref_field(field: int, dtype: int, shape: Tuple[int, ...], ref: RegionRef) -> bytes:
    """A whole Tensor field whose payload is `ref` (Tensor.ref, field 4; always
    written, even empty: a oneof member that is set). Cached: a model runner's
    staging buffers give the same references call after call."""
    return _cached(("ref", field, dtype, shape, ref), lambda: _length_delimited(
        field, _dtype_shape(dtype, shape) + _length_delimited(4, _region_ref_body(ref))))


def o_region_field(ref: RegionRef) -> bytes:
    """ForwardRequest.o_region (field 13; cached like tensor_ref_field)."""
    return _cached(("o_region", ref), lambda: _length_delimited(13, _region_ref_body(ref)))


def encode_forward_request(layer: int, sequences_bytes: bytes,
                           tensors: Sequence[Tuple[int, int, Tuple[int, ...], object]],
                           request_id: int = 0, o_region: RegionRef = None) -> bytes:
    """A serialized ForwardRequest.

    sequences_bytes: encode_sequences(...) output.
    tensors: [(field number, DType value, shape tuple, data)] in field-number
        order; data: a C-contiguous buffer (numpy array, memoryview, ...)
        holding the tensor's bytes, or a RegionRef.
    o_region: where the server writes o (None: o comes back inline).
    """
    parts: List[object] = [layer_field(layer), sequences_bytes]
    for field, dtype, shape, data in tensors:
        if type(data) is RegionRef:
            parts.append(tensor_ref_field(field, dtype, tuple(shape), data))
            continue
        nbytes = memoryview(data).nbytes
        parts.append(tensor_header(field, dtype, tuple(shape), nbytes))
        if nbytes:
            parts.append(data)
    if request_id:
        parts.append(b"\x60" + encode_varint(request_id))
    if o_region is not None:
        parts.append(o_region_field(o_region))
    return b"".join(parts)
