"""ForwardRequest / ForwardResponse bytes without building protobuf objects.

Forward is the hot path: a prefill moves tens of MiB. Built through protobuf
messages, each tensor would be copied three times (to bytes, into the message,
into the serialized string). Here the request is written directly in protobuf
wire format (proto3: default values omitted, fields in number order, packed
repeated scalars), so each tensor's bytes are copied once, into the message
passed to gRPC; and o is located inside the response bytes so that numpy can
view it in place. tests/test_wire.py checks both against the generated
gdn_pb2 classes.

ForwardRequest fields: layer 1, sequences 2 (SequenceSpec: session_id 1,
position 2, num_tokens 3), q 3, k 4, v 5, g 6, beta 7, a 8, b 9, a_log 10,
dt_bias 11, request_id 12; Tensor: dtype 1, shape 2 (packed), data 3.
ForwardResponse: o 1, positions 2 (packed), request_id 3, error_code 4,
error_message 5.
"""

from typing import Dict, List, NamedTuple, Sequence, Tuple

from ._proto import gdn_pb2
from .errors import Internal, InvalidArgument

__all__ = ["encode_varint", "encode_sequences", "encode_forward_request", "ParsedResponse",
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


# Tagged fields of SequenceSpec for small values: position (2) and num_tokens (3).
_POSITION = [b""] + [b"\x10" + _TABLE[v] for v in range(1, _TABLE_SIZE)]
_NUM_TOKENS = [b""] + [b"\x18" + _TABLE[v] for v in range(1, _TABLE_SIZE)]


def encode_sequences(sequences: Sequence[Tuple[str, int, int]]) -> Tuple[bytes, int]:
    """The repeated `sequences` field (2) for [(session_id, position, num_tokens)],
    and T = the sum of num_tokens. InvalidArgument for an empty list, an empty
    or non-str id, a position < 0 or a num_tokens < 1."""
    if not sequences:
        raise InvalidArgument("sequences: at least one sequence is required")
    parts: List[bytes] = []
    append = parts.append
    cache, positions, counts, table, size = (_SESSION_PREFIX_CACHE, _POSITION, _NUM_TOKENS,
                                             _TABLE, _TABLE_SIZE)
    total = 0
    for index, spec in enumerate(sequences):
        try:
            session_id, position, num_tokens = spec
        except (TypeError, ValueError):
            raise InvalidArgument("sequences[%d]: expected (session_id, position, num_tokens), "
                                  "got %r" % (index, spec)) from None
        body = cache.get(session_id) or _session_prefix(index, session_id)
        if 0 <= position < size and 0 < num_tokens < size:
            body += positions[position] + counts[num_tokens]
        else:
            if position < 0:
                raise InvalidArgument("sequences[%d].position: must be >= 0, got %d" % (index, position))
            if num_tokens < 1:
                raise InvalidArgument("sequences[%d].num_tokens: must be >= 1, got %d"
                                      % (index, num_tokens))
            if position:
                body += b"\x10" + encode_varint(position)
            body += b"\x18" + encode_varint(num_tokens)
        append(b"\x12" + (table[len(body)] if len(body) < size else encode_varint(len(body))) + body)
        total += num_tokens
    return b"".join(parts), total


_HEADER_CACHE: Dict[tuple, bytes] = {}


def _tensor_header(field: int, dtype: int, shape: Sequence[int], nbytes: int) -> bytes:
    """Everything of a Tensor field up to (not including) its data bytes (cached: shapes repeat)."""
    key = (field, dtype, shape, nbytes)
    cached = _HEADER_CACHE.get(key)
    if cached is None:
        if len(_HEADER_CACHE) > 4096:
            _HEADER_CACHE.clear()
        cached = _HEADER_CACHE[key] = _build_tensor_header(field, dtype, shape, nbytes)
    return cached


def _build_tensor_header(field: int, dtype: int, shape: Sequence[int], nbytes: int) -> bytes:
    body = b""
    if dtype:
        body += b"\x08" + encode_varint(dtype)
    if shape:
        packed = b"".join(encode_varint(d) for d in shape)
        body += b"\x12" + encode_varint(len(packed)) + packed
    if nbytes:
        body += b"\x1a" + encode_varint(nbytes)
    return _key(field, _LEN) + encode_varint(len(body) + nbytes) + body


def encode_forward_request(layer: int, sequences_bytes: bytes, tensors: Sequence[Tuple[int, int, Sequence[int], object]],
                           request_id: int = 0) -> bytes:
    """A serialized ForwardRequest.

    sequences_bytes: encode_sequences(...) output.
    tensors: [(field number, DType value, shape tuple, data)] in field-number order,
        data a C-contiguous numpy array holding the tensor's bytes.
    """
    parts: List[object] = [b"\x08" + encode_varint(layer)] if layer else []
    parts.append(sequences_bytes)
    for field, dtype, shape, data in tensors:
        nbytes = data.nbytes
        parts.append(_tensor_header(field, dtype, shape, nbytes))
        if nbytes:
            parts.append(data)
    if request_id:
        parts.append(b"\x60" + encode_varint(request_id))
    return b"".join(parts)


def _read_varint(buf, pos: int) -> Tuple[int, int]:
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise Internal("malformed varint in ForwardResponse")


class ParsedResponse(NamedTuple):
    """A ForwardResponse with o left in place: o's bytes are buf[o_offset:o_offset+o_nbytes]."""

    o_dtype: int
    o_shape: Tuple[int, ...]
    o_offset: int
    o_nbytes: int
    positions: List[int]
    request_id: int
    error_code: int
    error_message: str


def _parse_tensor(buf, start: int, end: int) -> Tuple[int, Tuple[int, ...], int, int]:
    dtype, shape, offset, nbytes = 0, [], start, 0
    pos = start
    while pos < end:
        key, pos = _read_varint(buf, pos)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = _read_varint(buf, pos)
            if field == 1:
                dtype = value
            elif field == 2:
                shape.append(value)
        elif wire_type == _LEN:
            length, pos = _read_varint(buf, pos)
            if field == 2:
                sub = pos
                while sub < pos + length:
                    value, sub = _read_varint(buf, sub)
                    shape.append(value)
            elif field == 3:
                offset, nbytes = pos, length
            pos += length
        else:
            raise Internal("unexpected wire type %d in ForwardResponse.o" % wire_type)
    return dtype, tuple(shape), offset, nbytes


_EMPTY_RESPONSE = gdn_pb2.ForwardResponse()


def _parse_canonical_tensor(buf, pos: int, end: int):
    """A Tensor written in field order (dtype, packed shape, data), as the server
    writes it: (dtype, shape, data offset, data bytes); None for any other form."""
    dtype = 0
    shape = ()
    if pos < end and buf[pos] == 0x08:
        dtype, pos = _read_varint(buf, pos + 1)
    if pos < end and buf[pos] == 0x12:
        length, pos = _read_varint(buf, pos + 1)
        stop = pos + length
        dims = []
        while pos < stop:
            byte = buf[pos]
            if byte < 0x80:
                dims.append(byte)
                pos += 1
            else:
                value, pos = _read_varint(buf, pos)
                dims.append(value)
        shape = tuple(dims)
    offset = nbytes = 0
    if pos < end and buf[pos] == 0x1A:
        nbytes, offset = _read_varint(buf, pos + 1)
        pos = offset + nbytes
    return (dtype, shape, offset, nbytes) if pos == end else None


def parse_forward_response(buf: bytes) -> ParsedResponse:
    """Parses a serialized ForwardResponse; o stays in `buf` (see ParsedResponse).

    The small fields (positions, ids, errors) are parsed by protobuf from the
    bytes after o (o comes first in the server's field order; any other
    order takes the general path).
    """
    if buf[:1] == b"\x0a":
        length, pos = _read_varint(buf, 1)
        end = pos + length
        tensor = _parse_canonical_tensor(buf, pos, end) or _parse_tensor(buf, pos, end)
        if buf[end:end + 1] != b"\x0a":
            small = gdn_pb2.ForwardResponse.FromString(buf[end:]) if end < len(buf) else _EMPTY_RESPONSE
            return ParsedResponse(tensor[0], tensor[1], tensor[2], tensor[3], list(small.positions),
                                  small.request_id, small.error_code, small.error_message)
    return _parse_general(buf)


def _parse_general(buf: bytes) -> ParsedResponse:
    view = memoryview(buf)
    o = (0, (), 0, 0)
    rest: List[object] = []
    pos = 0
    end = len(buf)
    while pos < end:
        start = pos
        key, pos = _read_varint(view, pos)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, pos = _read_varint(view, pos)
        elif wire_type == _LEN:
            length, pos = _read_varint(view, pos)
            if field == 1:
                o = _parse_tensor(view, pos, pos + length)
                pos += length
                continue
            pos += length
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        else:
            raise Internal("unexpected wire type %d in ForwardResponse" % wire_type)
        rest.append(view[start:pos])
    small = gdn_pb2.ForwardResponse.FromString(b"".join(rest)) if rest else gdn_pb2.ForwardResponse()
    return ParsedResponse(o[0], o[1], o[2], o[3], list(small.positions), small.request_id,
                          small.error_code, small.error_message)

