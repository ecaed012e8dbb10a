"""One Forward call, prepared: checked against the server's layer config,
tensors packed to wire bytes, split into parts that fit a message, and the
parts' responses merged back into o. Shared by the sync and asyncio clients
(which only send the parts).

Shapes (T = sum of num_tokens, packed in the order of `sequences`):

    q, k      [T, Hqk, K]  activation dtype on the wire
    v         [T, Hv, V]   activation dtype on the wire
    g, beta   [T, Hv]      fp32 (gating "direct")
    a, b      [T, Hv]      fp32 (gating "fused")
    a_log     [Hv]         fp32 (gating "fused")
    dt_bias   [Hv]         fp32 (gating "fused")
    o         [T, Hv, V]   returned as the kind, dtype and device of v

This is the client's hot path: per call it does a few dict lookups per
tensor, no per-element work for tensors already in the wire dtype, and no
copy before the one into the request bytes.
"""

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import dtypes, split, wire
from ._proto import gdn_pb2
from .errors import Internal, InvalidArgument
from .tensors import pack_tensors, unpack_like

__all__ = ["ForwardLayout", "PreparedForward", "SequenceTokens"]

SequenceTokens = Tuple[str, int, int]  # (session_id, position, num_tokens)

# Bytes of a Tensor field besides its data (key, lengths, dtype, 3 shape varints), at most.
_TENSOR_HEADER_BYTES = 64


class ForwardLayout:
    """What a server's LayerConfig asks of a Forward, computed once per server.

    fields: (name, field number, wire dtype, shape after T or None for [Hv]
    per-head tensors), in field-number order; unused: names that must be None.
    """

    def __init__(self, config: gdn_pb2.LayerConfig):
        self.num_layers = config.num_layers
        self.gating = config.gating_mode
        act = self.activation = config.activation_dtype
        hqk, hv = config.num_qk_heads, config.num_v_heads
        kdim, vdim = config.head_dim_k, config.head_dim_v
        rows = {"q": (act, (hqk, kdim)), "k": (act, (hqk, kdim)), "v": (act, (hv, vdim))}
        fused = self.gating == "fused"
        for name in (("a", "b") if fused else ("g", "beta")):
            rows[name] = (dtypes.FP32, (hv,))
        if fused:
            rows["a_log"] = rows["dt_bias"] = (dtypes.FP32, None)
        self.per_head_shape = (hv,)
        self.fields = [(n, f, rows[n][0], rows[n][1]) for n, f in wire.TENSOR_FIELDS.items()
                       if n in rows]
        self.unused = [n for n in wire.TENSOR_FIELDS if n not in rows]
        self.o_row = (hv, vdim)
        self.o_row_bytes = hv * vdim * dtypes.ITEMSIZE[act]


class PreparedForward:
    """A Forward ready to send: `payload(part)` for each of `parts`, then `finish`.

    layout: the server's ForwardLayout. max_message_bytes: the smaller of the
    client's and the server's limit. Raises InvalidArgument (nothing sent) for
    a layer out of range, a missing or superfluous gating tensor, or a shape
    that differs from the config's.
    """

    def __init__(self, layout: ForwardLayout, max_message_bytes: int, layer: int,
                 sequences: Sequence[SequenceTokens], tensors: dict, request_id: int = 0):
        if not 0 <= layer < layout.num_layers:
            raise InvalidArgument("layer: must be in [0, %d), got %d" % (layout.num_layers, layer))
        self.layout = layout
        self.layer = int(layer)
        self.sequences = sequences
        self.sequences_bytes, total = wire.encode_sequences(sequences)
        self.total_tokens = total
        self.request_id = request_id
        items = []
        for name, _, wire_dtype, row in layout.fields:
            x = tensors.get(name)
            if x is None:
                raise InvalidArgument("%s: required%s" % (name, "" if name in "qkv" else
                                                          " with gating=" + layout.gating))
            items.append((name, x, wire_dtype, layout.per_head_shape if row is None else (total,) + row))
        for name in layout.unused:
            if tensors.get(name) is not None:
                raise InvalidArgument("%s: not used with gating=%s; leave it unset"
                                      % (name, layout.gating))
        self.like = tensors["v"]
        self.packed = pack_tensors(items)
        request_row_bytes = fixed = 0
        for (_, _, _, row), t in zip(layout.fields, self.packed):
            if row is None:
                fixed += t.data.nbytes
            else:
                request_row_bytes += t.data.nbytes // total
        fixed += len(self.sequences_bytes) + 32 + _TENSOR_HEADER_BYTES * len(self.packed)
        self.parts = split.plan_parts(sequences, request_row_bytes, layout.o_row_bytes, fixed,
                                      max_message_bytes, total)

    def payload(self, part: split.Part) -> bytes:
        """The serialized ForwardRequest of one part."""
        whole = len(self.parts) == 1
        sequences_bytes = self.sequences_bytes if whole else wire.encode_sequences(
            [(s, p, n) for _, s, p, n in part.pieces])[0]
        fields = []
        for (_, number, _, row), t in zip(self.layout.fields, self.packed):
            if whole or row is None:
                fields.append((number, t.dtype, t.shape, t.data))
            else:
                fields.append((number, t.dtype, (part.end - part.begin,) + t.shape[1:],
                               t.data[part.begin:part.end]))
        return wire.encode_forward_request(self.layer, sequences_bytes, fields, self.request_id)

    def finish(self, responses: List[Tuple[bytes, wire.ParsedResponse]]) -> Tuple[Any, List[int]]:
        """(o, new positions) from the parts' (response bytes, parsed) in order.

        o: [T, Hv, V] like v (kind, dtype, device); positions: one per sequence.
        """
        layout = self.layout
        o_shape = (self.total_tokens,) + layout.o_row
        if len(responses) == 1:
            buf, parsed = responses[0]
            self._check(parsed, self.total_tokens, len(self.sequences))
            return (unpack_like(buf, parsed.o_offset, layout.activation, o_shape, self.like),
                    parsed.positions)
        positions: List[Optional[int]] = [None] * len(self.sequences)
        merged = np.empty(self.total_tokens * layout.o_row_bytes, dtype=np.uint8)
        for part, (buf, parsed) in zip(self.parts, responses):
            self._check(parsed, part.end - part.begin, len(part.pieces))
            for (index, _, _, _), pos in zip(part.pieces, parsed.positions):
                positions[index] = pos
            start = part.begin * layout.o_row_bytes
            merged[start:start + parsed.o_nbytes] = np.frombuffer(
                buf, dtype=np.uint8, count=parsed.o_nbytes, offset=parsed.o_offset)
        return unpack_like(merged, 0, layout.activation, o_shape, self.like, owned=True), positions

    def _check(self, parsed: wire.ParsedResponse, rows: int, sequences: int) -> None:
        want = rows * self.layout.o_row_bytes
        if parsed.o_dtype != self.layout.activation or parsed.o_nbytes != want:
            raise Internal("server returned o of dtype %d and %d bytes, expected dtype %d and %d"
                           % (parsed.o_dtype, parsed.o_nbytes, self.layout.activation, want))
        if len(parsed.positions) != sequences:
            raise Internal("server answered %d positions for %d sequences"
                           % (len(parsed.positions), sequences))
