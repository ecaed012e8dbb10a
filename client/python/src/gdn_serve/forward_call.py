"""One Forward call, prepared: checked against the server's layer config,
tensors taken as wire bytes (or as references into registered regions),
split into parts that fit a message, and the parts' responses merged back
into o. Shared by the sync and asyncio clients (which only send the parts).

Shapes (T = sum of num_tokens, packed in the order of `sequences`):

    q, k      [T, Hqk, K]  activation dtype on the wire
    v         [T, Hv, V]   activation dtype on the wire
    g, beta   [T, Hv]      fp32 (gating "direct")
    a, b      [T, Hv]      fp32 (gating "fused")
    a_log     [Hv]         fp32 (gating "fused")
    dt_bias   [Hv]         fp32 (gating "fused")
    o         [T, Hv, V]   returned as the kind, dtype and device of v (or in `out`)

This is the client's hot path (issue 17: its own time per call <= 10% of a
no-compute server's call). Per call and tensor it does a handful of
attribute checks; everything that depends only on T (shapes, tensor
headers, byte counts) is computed once per T and cached in the layout. A
tensor already contiguous in the wire dtype is never copied before the one
`b"".join` that writes the request; o is a view of the response bytes. The
commonest call (numpy arrays or CPU torch tensors already in the wire dtype,
contiguous, one message, no regions) does not build a PreparedForward at
all: ForwardLayout.inline_request writes it and Client.forward views o in
the answer (on the 2-core VM: overhead over the transport 13-15% -> 10% at
decode 32 x 1 for numpy; CPU torch bf16, 8 ABBA rounds: 21.2% -> 18.7% at
decode 1 x 1, 18.6% -> 17.3% at 32 x 1; what torch still costs over numpy
is torch's own calls: five attribute reads per tensor, and making o a torch
tensor, which PreparedForward pays the same).
"""

import ctypes
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import dtypes, split, wire
from ._proto import gdn_pb2
from .errors import Internal, InvalidArgument
from .tensors import torch_view, torch_wire_dtypes, to_wire, unpack_like

__all__ = ["ForwardLayout", "PreparedForward", "SequenceTokens"]

SequenceTokens = Tuple[str, int, int]  # (session_id, position, num_tokens)

# Bytes of a Tensor field besides its data (key, lengths, dtype, 3 shape varints), at most.
_TENSOR_HEADER_BYTES = 64
_PLAN_CACHE_SIZE = 1024
_NDARRAY = np.ndarray
_REGION_REF = wire.RegionRef
_O_NUMPY, _O_TORCH, _O_CONVERT = 0, 1, 2  # PreparedForward._o_mode


class _TokenPlan:
    """What a call of T tokens looks like (ForwardLayout.plan): per field of the
    layout (name, field number, wire dtype, numpy storage dtype number, shape,
    bytes, inline Tensor header, ctypes char array type of those bytes, row
    shape or None, bytes per token row or 0); o's shape, bytes and headers."""

    __slots__ = ("total", "fields", "request_bytes", "response_bytes", "o_shape", "o_nbytes",
                 "o_header", "o_header_ref", "whole", "inline")

    def canonical_o(self, raw: bytes, tail: bytes) -> int:
        """Where o starts in `raw` when it is the server's usual answer to a
        whole call of this plan with o inline (o with exactly o_header and
        o_nbytes, then the positions `tail` the call expects), else -1."""
        header = self.o_header
        if len(raw) == len(header) + self.o_nbytes + len(tail) and raw.startswith(header) and \
                raw.endswith(tail):
            return len(header)
        return -1


class ForwardLayout:
    """What a server's LayerConfig asks of a Forward, computed once per server.

    fields: (name, field number, wire dtype, numpy storage dtype number, shape
    after T or None for [Hv] per-head tensors), in field-number order;
    unused: names that must be None.
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
        self.fields = [(n, f, rows[n][0], dtypes.NUMPY_STORAGE[rows[n][0]].num, rows[n][1])
                       for n, f in wire.TENSOR_FIELDS.items() if n in rows]
        self.unused = [n for n in wire.TENSOR_FIELDS if n not in rows]
        self.o_row = (hv, vdim)
        self.o_row_bytes = hv * vdim * dtypes.ITEMSIZE[act]
        self.o_storage = dtypes.NUMPY_STORAGE[act]  # o's numpy dtype (bf16: uint16 bits)
        self.plans: Dict[int, _TokenPlan] = {}

    def inline_request(self, max_message_bytes: int, layer: int,
                       sequences: Sequence[SequenceTokens], q, k, v, g, beta, a, b, a_log,
                       dt_bias):
        """The most common call, written without a PreparedForward: every tensor
        a numpy array already in its wire storage dtype, shape and C order, or a
        CPU torch.Tensor (exactly that type) of its wire dtype, shape and
        contiguous (either sent as it is, the unused gating tensors None), and
        the whole call in one message. Returns (request bytes, plan, the
        positions field the response should end with, the new positions,
        torch): torch is the torch module when v is a torch tensor (o then
        comes back as PreparedForward's would: torch_view of the answer), else
        None (o a numpy view). None for any other call (PreparedForward then
        checks, converts or splits it, and raises what is wrong).
        InvalidArgument for malformed sequences, as there."""
        if self.gating == "fused":
            tensors, unused = (q, k, v, a, b, a_log, dt_bias), (g, beta)
        else:
            tensors, unused = (q, k, v, g, beta), (a, b, a_log, dt_bias)
        if not 0 <= layer < self.num_layers:
            return None
        for x in unused:
            if x is not None:
                return None
        sequences_bytes, total, tail, positions = wire.encode_sequences_expecting(sequences)
        plan = self.plans.get(total) or self.plan(total)
        if plan.request_bytes + len(sequences_bytes) + 16 > max_message_bytes or \
                plan.response_bytes > max_message_bytes:
            return None
        chunks = [wire.layer_field(layer), sequences_bytes]
        append = chunks.append
        torch = tensor_type = None  # looked up at the first tensor that is not numpy
        for (storage_num, shape, header, ctype, wire_dtype), x in zip(plan.inline, tensors):
            kind = type(x)
            if kind is _NDARRAY:
                if x.dtype.num != storage_num or x.shape != shape or not x.flags.c_contiguous:
                    return None
                append(header)
                append(x)
                continue
            if tensor_type is None:
                # sys.modules, never an import: a numpy user's process stays without torch.
                torch = sys.modules.get("torch")
                if torch is None:
                    return None
                tensor_type = torch.Tensor
                torch_dtypes = torch_wire_dtypes(torch)
            # Exactly torch.Tensor (subclasses such as Parameter go through
            # PreparedForward, as they always did); the checks PreparedForward
            # makes before it takes a tensor's memory as it is.
            if kind is not tensor_type or x.dtype is not torch_dtypes[wire_dtype] or \
                    not x.is_cpu or x.shape != shape or not x.is_contiguous():
                return None
            append(header)
            # A ctypes array over the tensor's memory: of the ways to hand its
            # bytes to join, the cheapest (~0.4 us on the VM, against ~1.3 us
            # for x.numpy() of fp32 and ~2.6 us for x.view(torch.int16).numpy()
            # of bf16; the join itself copies it as fast as a numpy array).
            # Nothing keeps x alive through it, but x outlives the join below.
            append(ctype.from_address(x.data_ptr()))
        return b"".join(chunks), plan, tail, positions, torch if type(v) is tensor_type else None

    def plan(self, total: int) -> _TokenPlan:
        """The shapes, byte counts and inline headers of a call of `total` tokens (cached)."""
        plan = self.plans.get(total)
        if plan is not None:
            return plan
        plan = _TokenPlan()
        plan.total = total
        plan.fields = []
        request_bytes = 0
        for name, number, wire_dtype, storage_num, row in self.fields:
            shape = self.per_head_shape if row is None else (total,) + row
            nbytes = int(np.prod(shape)) * dtypes.ITEMSIZE[wire_dtype]
            header = wire.tensor_header(number, wire_dtype, shape, nbytes)
            plan.fields.append((name, number, wire_dtype, storage_num, shape, nbytes, header,
                                ctypes.c_char * nbytes, row, 0 if row is None else nbytes // total))
            request_bytes += len(header) + nbytes
        plan.request_bytes = request_bytes
        plan.o_shape = (total,) + self.o_row
        plan.o_nbytes = total * self.o_row_bytes
        plan.o_header = wire.tensor_header(1, self.activation, plan.o_shape, plan.o_nbytes)
        plan.o_header_ref = wire.tensor_header(1, self.activation, plan.o_shape, 0)
        plan.response_bytes = plan.o_nbytes + split.SLACK_BYTES
        plan.whole = [split.Part(0, total, None)]
        # inline_request's checks per field: (numpy storage dtype number, shape,
        # header, ctypes array type of its bytes, wire dtype).
        plan.inline = [(f[3], f[4], f[6], f[7], f[2]) for f in plan.fields]
        if len(self.plans) >= _PLAN_CACHE_SIZE:
            self.plans.clear()
        self.plans[total] = plan
        return plan


class PreparedForward:
    """A Forward ready to send: `payload(part)` for each of `parts`; then, for
    one part, `take_whole(response)`, for several, `check` and `merge` of each
    part's response (or `finish(responses)` for any); then `result()`.

    layout: the server's ForwardLayout. max_message_bytes: the smaller of the
    client's and the server's limit. regions: the client's RegionTable when it
    has registered regions (tensors inside one go as references), else None.
    out: where o goes (a view in a registered region), else None.
    Raises InvalidArgument (nothing sent) for a layer out of range, a missing
    or superfluous gating tensor, or a shape that differs from the config's.
    """

    __slots__ = ("layout", "layer", "sequences", "sequences_bytes", "total_tokens", "request_id",
                 "plan", "tensors", "cuda_devices", "buffers", "like", "out", "o_ref", "chunks",
                 "parts", "_expected_tail", "_expected", "_o_mode", "_o_dst", "_o", "_positions")

    def __init__(self, layout: ForwardLayout, max_message_bytes: int, layer: int,
                 sequences: Sequence[SequenceTokens], tensors: dict, request_id: int = 0,
                 regions=None, out=None):
        if not 0 <= layer < layout.num_layers:
            raise InvalidArgument("layer: must be in [0, %d), got %d" % (layout.num_layers, layer))
        self.layout = layout
        self.layer = layer
        self.sequences = sequences
        # The response of a call applied whole says positions + num_tokens:
        # take_whole compares those bytes instead of parsing them.
        self.sequences_bytes, total, self._expected_tail, self._expected = \
            wire.encode_sequences_expecting(sequences)
        self.total_tokens = total
        self.request_id = request_id
        plan = self.plan = layout.plans.get(total) or layout.plan(total)
        self.tensors = tensors  # keeps every buffer below alive until the request is written
        torch = sys.modules.get("torch")
        tensor_type = torch.Tensor if torch is not None else None
        torch_dtypes = torch_wire_dtypes(torch) if torch is not None else None
        # Devices of the CUDA regions referenced: their streams are synced before sending.
        self.cuda_devices: List[int] = []
        # The whole request as one join: layer, sequences, then per tensor its
        # header and its buffer (or its reference field).
        chunks: List[Any] = [wire.layer_field(layer), self.sequences_bytes]
        buffers: List[Any] = []  # per field: a buffer of its wire bytes, or a RegionRef
        refs = 0
        slow = None
        for name, number, wire_dtype, storage_num, shape, nbytes, header, ctype, _, _ in plan.fields:
            x = tensors.get(name)
            kind = type(x)
            # In a registered region (or an explicit RegionRef): a reference.
            if regions is not None and x is not None:
                ref = regions.ref_of(x, wire_dtype, shape, nbytes)
            else:
                ref = x if kind is _REGION_REF else None
            if ref is not None:
                buffers.append(ref)
                chunks.append(wire.tensor_ref_field(number, wire_dtype, shape, ref))
                if regions is not None:
                    self._note_device(regions.cuda_device(ref))
                refs += 1
                continue
            if kind is _NDARRAY:
                if x.dtype.num == storage_num and x.shape == shape and x.flags.c_contiguous:
                    buffers.append(x)  # as it is
                    chunks.append(header)
                    chunks.append(x)
                    continue
            elif kind is tensor_type:
                if (x.dtype is torch_dtypes[wire_dtype] and x.is_cpu and x.shape == shape
                        and x.is_contiguous()):
                    data = ctype.from_address(x.data_ptr())  # its memory; x is kept alive
                    buffers.append(data)
                    chunks.append(header)
                    chunks.append(data)
                    continue
            elif x is None:
                raise InvalidArgument("%s: required%s" % (name, "" if name in "qkv" else
                                                          " with gating=" + layout.gating))
            if slow is None:
                slow = []
            slow.append((len(buffers), len(chunks) + 1))
            buffers.append(None)
            chunks.append(header)
            chunks.append(None)
        for name in layout.unused:
            if tensors.get(name) is not None:
                raise InvalidArgument("%s: not used with gating=%s; leave it unset"
                                      % (name, layout.gating))
        if slow is not None:
            fields = plan.fields
            converted = to_wire([(fields[b][0], tensors[fields[b][0]], fields[b][2], fields[b][4])
                                 for b, _ in slow])
            for (b, c), data in zip(slow, converted):
                buffers[b] = chunks[c] = data
        self.buffers = buffers
        like = self.like = tensors["v"]
        # How o comes back when v was taken as it is (numpy or CPU torch in the
        # wire dtype): a view of the response (numpy read-only; torch through
        # torch.from_numpy: one tensor made after the wait, where each torch
        # call costs 5-10 us on a cold cache); anything else through unpack_like.
        v_buffer = buffers[2]
        self._o_mode = _O_NUMPY if v_buffer is like or type(like) is wire.RegionRef else \
            _O_TORCH if type(v_buffer) is plan.fields[2][7] else _O_CONVERT
        self._o_dst = None  # a split call's merged o: flat uint8 memoryview of self._o[0]
        self.out = out
        self.o_ref = None
        if out is not None:
            self.o_ref = regions.ref_of(out, layout.activation, plan.o_shape, plan.o_nbytes) \
                if regions is not None else out if type(out) is wire.RegionRef else None
            if self.o_ref is None:
                raise InvalidArgument("out: must be a contiguous %s [%s] view into a registered "
                                      "region" % (dtypes.NAMES[layout.activation],
                                                  ", ".join(map(str, plan.o_shape))))
            if regions is not None:
                self._note_device(regions.cuda_device(self.o_ref))
        if request_id:
            chunks.append(b"\x60" + wire.encode_varint(request_id))
        if self.o_ref is not None:
            chunks.append(wire.o_region_field(self.o_ref))
        self.chunks = chunks
        self._positions: List[Optional[int]] = [None] * len(sequences)
        self._o = None  # (buffer holding o, offset): the response (one part) or the merged o
        if refs == 0 and out is None:
            if (plan.request_bytes + len(self.sequences_bytes) + 16 <= max_message_bytes
                    and plan.response_bytes <= max_message_bytes):
                self.parts = plan.whole
                return
            request_row_bytes = sum(f[9] for f in plan.fields)
            request_bytes = plan.request_bytes + len(self.sequences_bytes) + 16
            response_row_bytes = layout.o_row_bytes
        else:  # references take a few bytes, not rows; o in a region takes none
            inline = [f for f, b in zip(plan.fields, buffers) if type(b) is not wire.RegionRef]
            request_row_bytes = sum(f[9] for f in inline)
            request_bytes = sum(f[5] + len(f[6]) for f in inline) + len(self.sequences_bytes) + \
                16 + _TENSOR_HEADER_BYTES * (refs + 1)
            response_row_bytes = 0 if out is not None else layout.o_row_bytes
        self.parts = split.plan_parts(sequences, request_row_bytes, response_row_bytes,
                                      request_bytes - total * request_row_bytes,
                                      max_message_bytes, total)

    def _note_device(self, device: int) -> None:
        if device >= 0 and device not in self.cuda_devices:
            self.cuda_devices.append(device)

    # --- the request ---------------------------------------------------------
    def payload(self, part: split.Part) -> bytes:
        """The serialized ForwardRequest of one part."""
        if part.pieces is None:  # the whole call
            return b"".join(self.chunks)
        rows = part.end - part.begin
        chunks: List[Any] = [wire.layer_field(self.layer), wire.encode_sequences(
            [(s, p, n) + tuple(self.sequences[i][3:5]) for i, s, p, n in part.pieces])[0]]
        for (_, number, dtype, _, shape, _, _, _, row, row_bytes), data in zip(
                self.plan.fields, self.buffers):
            if row is not None:  # a token-packed tensor: rows [begin, end)
                shape = (rows,) + row
            if type(data) is wire.RegionRef:
                if row is not None:
                    data = wire.RegionRef(data.region, data.offset + part.begin * row_bytes,
                                          rows * row_bytes)
                chunks.append(wire.tensor_ref_field(number, dtype, shape, data))
                continue
            flat = memoryview(data).cast("B")
            if row is not None:
                flat = flat[part.begin * row_bytes:part.end * row_bytes]
            chunks.append(wire.tensor_header(number, dtype, shape, flat.nbytes))
            chunks.append(flat)
        if self.request_id:
            chunks.append(b"\x60" + wire.encode_varint(self.request_id))
        if self.o_ref is not None:
            o_row = self.layout.o_row_bytes
            chunks.append(wire.o_region_field(wire.RegionRef(
                self.o_ref.region, self.o_ref.offset + part.begin * o_row, rows * o_row)))
        return b"".join(chunks)

    # --- the responses -------------------------------------------------------
    def take_whole(self, raw: bytes) -> None:
        """The response of a call sent whole (one part): check and take o and
        the positions (the server's usual form without building anything; any
        other form through check)."""
        plan = self.plan
        if self.o_ref is None:
            offset = plan.canonical_o(raw, self._expected_tail)
            if offset >= 0:
                self._positions = self._expected
                self._o = (raw, offset)
                return
            header, nbytes = plan.o_header, plan.o_nbytes
        else:
            header, nbytes = plan.o_header_ref, 0
        found = wire.parse_canonical(raw, header, nbytes)
        if found is None or len(found[1]) != len(self.sequences):
            self.merge(0, raw, self.check(0, raw))
            return
        self._positions = found[1]
        self._o = (raw, found[0])

    def check(self, index: int, raw: bytes) -> wire.ParsedResponse:
        """Parses part `index`'s response and checks o's dtype and size and the
        number of positions; records the positions."""
        parsed = wire.parse_forward_response(raw)
        part = self.parts[index]
        rows = part.end - part.begin
        want = 0 if self.o_ref is not None else rows * self.layout.o_row_bytes
        if parsed.o_dtype != self.layout.activation or parsed.o_nbytes != want:
            raise Internal("server returned o of dtype %d and %d bytes, expected dtype %d and %d"
                           % (parsed.o_dtype, parsed.o_nbytes, self.layout.activation, want))
        positions = parsed.positions
        pieces = part.pieces
        if len(positions) != (len(self.sequences) if pieces is None else len(pieces)):
            raise Internal("server answered %d positions for %d sequences"
                           % (len(positions), len(self.sequences) if pieces is None else len(pieces)))
        if pieces is None:
            self._positions = positions
        else:
            for (seq, _, _, _), position in zip(pieces, positions):
                self._positions[seq] = position
        return parsed

    def merge(self, index: int, raw: bytes, parsed: wire.ParsedResponse) -> None:
        """Takes part `index`'s o: a view of `raw` for a whole call, else copied
        into the merged o (rows [begin, end) of [T, Hv, V])."""
        if self.o_ref is not None:
            return
        if len(self.parts) == 1:
            self._o = (raw, parsed.o_offset)
            return
        if self._o_dst is None:
            merged = np.empty(self.plan.o_nbytes, dtype=np.uint8)
            self._o = (merged, 0)
            self._o_dst = memoryview(merged)
        start = self.parts[index].begin * self.layout.o_row_bytes
        self._o_dst[start:start + parsed.o_nbytes] = \
            memoryview(raw)[parsed.o_offset:parsed.o_offset + parsed.o_nbytes]

    def result(self) -> Tuple[Any, List[int]]:
        """(o, new positions) after every part was merged.

        o: [T, Hv, V] like v (kind, dtype, device), or `out` when given;
        positions: one per sequence.
        """
        if self.out is not None:
            return self.out, self._positions
        mode = self._o_mode
        raw, offset = self._o
        if mode == _O_NUMPY:
            return np.ndarray(self.plan.o_shape, dtypes.NUMPY_STORAGE[self.layout.activation], raw,
                              offset), self._positions
        if mode == _O_TORCH:
            return torch_view(sys.modules["torch"], raw, offset, self.plan.o_shape,
                              self.layout.activation), self._positions
        return unpack_like(raw, offset, self.layout.activation, self.plan.o_shape,
                           self.like), self._positions

    def finish(self, responses: List[bytes]) -> Tuple[Any, List[int]]:
        """(o, new positions) from the parts' response bytes in order (check,
        merge and result in one)."""
        responses = [r[0] if type(r) is tuple else r for r in responses]  # (raw, parsed) too
        if len(self.parts) == 1:
            self.take_whole(responses[0])
        else:
            for index, raw in enumerate(responses):
                self.merge(index, raw, self.check(index, raw))
        return self.result()
