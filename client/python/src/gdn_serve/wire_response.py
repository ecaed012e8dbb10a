"""ForwardResponse bytes parsed by hand, o left in place (the other half of
gdn_serve.wire, which re-exports these).

ForwardResponse: o 1 (Tensor: dtype 1, shape 2 packed, data 3), positions 2
(packed int64), request_id 3, error_code 4, error_message 5. The server
writes o first; with o_region set, o carries dtype and shape but no data.
tests/test_wire.py checks the parsers against the generated gdn_pb2 classes.
"""

from typing import List, NamedTuple, Tuple

from .errors import Internal

__all__ = ["ParsedResponse", "parse_canonical", "parse_forward_response", "read_varint"]

_LEN = 2  # wire type of length-delimited fields


def read_varint(buf, pos: int) -> Tuple[int, int]:
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
    """A ForwardResponse with o left in place: o's bytes are buf[o_offset:o_offset+o_nbytes]
    (o_nbytes 0 when the call named an o_region: o is there, the response has dtype
    and shape only)."""

    o_dtype: int
    o_shape: Tuple[int, ...]
    o_offset: int
    o_nbytes: int
    positions: List[int]
    request_id: int
    error_code: int
    error_message: str


def _read_packed(buf, pos: int, stop: int, out: List[int]) -> int:
    """Appends the packed varints in buf[pos:stop] to out (1-byte ones inline:
    shapes and positions are mostly small); returns stop."""
    while pos < stop:
        byte = buf[pos]
        if byte < 0x80:
            out.append(byte)
            pos += 1
        else:
            value, pos = read_varint(buf, pos)
            out.append(value)
    return pos


def _parse_tensor(buf, pos: int, end: int) -> Tuple[int, Tuple[int, ...], int, int]:
    """Tensor bytes [pos, end) -> (dtype, shape, data offset, data bytes), any field order."""
    dtype, shape, offset, nbytes = 0, [], 0, 0
    while pos < end:
        key = buf[pos]
        pos += 1
        if key == 0x08:
            dtype, pos = read_varint(buf, pos)
        elif key == 0x12:  # packed shape
            length, pos = read_varint(buf, pos)
            pos = _read_packed(buf, pos, pos + length, shape)
        elif key == 0x1A:  # data
            nbytes, pos = read_varint(buf, pos)
            offset = pos
            pos += nbytes
        elif key == 0x10:  # unpacked shape element
            value, pos = read_varint(buf, pos)
            shape.append(value)
        else:
            pos = _skip(buf, pos - 1, end)
    if pos != end:
        raise Internal("malformed ForwardResponse.o")
    return dtype, tuple(shape), offset, nbytes


def _skip(buf, pos: int, end: int) -> int:
    """Skips the field whose key starts at pos; returns the position after it."""
    key, pos = read_varint(buf, pos)
    wire_type = key & 7
    if wire_type == 0:
        _, pos = read_varint(buf, pos)
    elif wire_type == _LEN:
        length, pos = read_varint(buf, pos)
        pos += length
    elif wire_type == 1:
        pos += 8
    elif wire_type == 5:
        pos += 4
    else:
        raise Internal("unexpected wire type %d in ForwardResponse" % wire_type)
    if pos > end:
        raise Internal("truncated ForwardResponse")
    return pos


def parse_canonical(buf: bytes, o_header: bytes, o_nbytes: int):
    """(o's data offset, positions) of a response in the form the server writes:
    o first with exactly `o_header` (tensor_header(1, dtype, shape, o_nbytes):
    the expected dtype, shape and size) and o_nbytes of data, then only the
    packed positions. None for anything else (parse_forward_response then).
    The hot path of a Forward: no objects but the positions list."""
    if not buf.startswith(o_header):
        return None
    offset = len(o_header)
    pos = offset + o_nbytes
    end = len(buf)
    positions: List[int] = []
    if pos == end:
        return offset, positions
    if buf[pos] != 0x12:
        return None
    length = buf[pos + 1]
    if length < 0x80:
        pos += 2
    else:
        length, pos = read_varint(buf, pos + 1)
    if pos + length != end:
        return None
    append = positions.append
    while pos < end:  # varints of 1 and 2 bytes inline, longer ones through _read_varint
        b0 = buf[pos]
        if b0 < 0x80:
            append(b0)
            pos += 1
            continue
        b1 = buf[pos + 1]
        if b1 < 0x80:
            append((b0 & 0x7F) | (b1 << 7))
            pos += 2
            continue
        value, pos = read_varint(buf, pos)
        append(value)
    return (offset, positions) if pos == end else None


def parse_forward_response(buf: bytes) -> ParsedResponse:
    """Parses a serialized ForwardResponse; o stays in `buf` (see ParsedResponse).

    Fields may come in any order (the server writes o first); unknown fields
    are skipped, as protobuf would.
    """
    end = len(buf)
    pos = 0
    o = (0, (), 0, 0)
    positions: List[int] = []
    request_id = error_code = 0
    message = ""
    while pos < end:
        key = buf[pos]
        if key == 0x0A:  # o
            length, pos = read_varint(buf, pos + 1)
            o = _parse_tensor(buf, pos, pos + length)
            pos += length
        elif key == 0x12:  # positions, packed
            length, pos = read_varint(buf, pos + 1)
            pos = _read_packed(buf, pos, pos + length, positions)
        elif key == 0x10:  # positions, unpacked
            value, pos = read_varint(buf, pos + 1)
            positions.append(value)
        elif key == 0x18:
            request_id, pos = read_varint(buf, pos + 1)
        elif key == 0x20:
            error_code, pos = read_varint(buf, pos + 1)
            if error_code >= 1 << 63:
                error_code -= 1 << 64
        elif key == 0x2A:
            length, pos = read_varint(buf, pos + 1)
            message = bytes(buf[pos:pos + length]).decode("utf-8", "replace")
            pos += length
        else:
            pos = _skip(buf, pos, end)
    if pos != end:
        raise Internal("truncated ForwardResponse")
    return ParsedResponse(o[0], o[1], o[2], o[3], positions, request_id, error_code, message)
