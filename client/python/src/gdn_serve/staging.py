"""Registered CUDA staging buffers: a model's q/k/v/g/beta and o stay on the GPU.

Used by gdn_serve.transformers (use_remote_gdn(..., regions=...)) when the
model runs on CUDA and the server runs --backend=cuda on the same host and
GPU. Per token capacity C (a power of two >= the call's T) one torch uint8
buffer on the model's device holds, each 256-byte aligned:

    q, k   [C, Hqk, K]  activation dtype
    v      [C, Hv, V]   activation dtype
    g, beta [C, Hv]     fp32
    o      [C, Hv, V]   activation dtype

registered once as a CUDA region. A call copies its inputs into the first T
rows (on the current stream; converted to the wire dtypes there), sends
references (Forward syncs the stream first), and the server writes o into
the buffer; the caller copies o out before the next call may reuse it.
At most `max_buffers` capacities are kept (least recently used unregistered).

The per-call host work is a model runner's cost on every layer (issue 18:
a remote decode step within 1.2x of in-process FLA), so a buffer keeps one
StagingSlot per call shape (batch, tokens): the views, already in the
model's [B, T, ...] shape, and their RegionRefs, made once.
"""

from collections import OrderedDict
from typing import Dict, NamedTuple, Optional, Tuple

from .tensors import torch_wire_dtypes
from .wire import RegionRef

__all__ = ["CudaStaging", "StagingSlot", "StagingUnavailable", "same_host"]

_INPUTS = ("q", "k", "v", "g", "beta")
_MAX_SLOTS = 64  # call shapes kept per buffer (a generate() loop uses two or three)


class StagingSlot(NamedTuple):
    """One call shape's place in a registered buffer.

    inputs: q, k [B, T, Hqk, K], v [B, T, Hv, V], g, beta [B, T, Hv] views
            (the first B * T rows of each field, in the wire dtypes);
    o:      [B, T, Hv, V] view where the server writes o;
    refs:   the RegionRef of each of q, k, v, g, beta and o (None: let the
            client's region table find them)."""

    inputs: Dict[str, object]
    o: object
    refs: Optional[Dict[str, RegionRef]]


class StagingUnavailable(RuntimeError):
    """A staging buffer could not be allocated or registered (nothing was sent)."""

_ALIGN = 256


def same_host(target: str) -> bool:
    """Whether a gRPC target is this machine: a unix socket or a loopback address
    ("127.0.0.1:50051", "localhost:50051", "[::1]:50051", "dns:///localhost:50051", ...)."""
    if target.startswith(("unix:", "unix-abstract:")):
        return True
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if target.startswith(scheme):
            target = target[len(scheme):]
            break
    if target.startswith("["):
        host = target[1:target.find("]")]
    else:
        host = target.rsplit(":", 1)[0] if ":" in target else target
    return host in ("localhost", "::1") or host.startswith("127.")


class _Buffer:
    """One capacity's registered buffer, its per-tensor (offset, row bytes,
    dtype, row shape), and its slots by call shape."""

    def __init__(self, client, device, capacity: int, fields):
        import torch
        self.capacity = capacity
        self.fields = {}
        offset = 0
        for name, dtype, row in fields:
            row_bytes = dtype.itemsize
            for d in row:
                row_bytes *= d
            self.fields[name] = (offset, row_bytes, dtype, row)
            offset += -(-capacity * row_bytes // _ALIGN) * _ALIGN
        self.memory = torch.empty(offset, dtype=torch.uint8, device=device)
        self.region = client.register_cuda_region(self.memory)
        self._slots: Dict[Tuple[int, int], StagingSlot] = {}

    def views(self, tokens: int) -> Dict[str, object]:
        """[tokens, ...] views of the first `tokens` rows of each field."""
        out = {}
        for name, (offset, row_bytes, dtype, row) in self.fields.items():
            out[name] = self.memory[offset:offset + tokens * row_bytes].view(dtype).view(
                (tokens,) + row)
        return out

    def slot(self, batch: int, tokens: int) -> StagingSlot:
        """The slot of a [batch, tokens] call (made on first use)."""
        slot = self._slots.get((batch, tokens))
        if slot is not None:
            return slot
        rows = batch * tokens
        shaped, refs = {}, {}
        base = getattr(self.region, "base", None)
        for name, view in self.views(rows).items():
            shaped[name] = view.view((batch, tokens) + tuple(view.shape[1:]))
            nbytes = view.numel() * view.element_size()
            refs[name] = None if base is None else \
                RegionRef(self.region.name, view.data_ptr() - base, nbytes)
        if len(self._slots) >= _MAX_SLOTS:
            self._slots.clear()
        slot = self._slots[(batch, tokens)] = StagingSlot(
            {n: shaped[n] for n in _INPUTS}, shaped["o"], None if base is None else refs)
        return slot


class CudaStaging:
    """The staging buffers of one client and CUDA device (see the module docstring).

    max_bytes: a call needing a larger buffer gets None from `views` (the
    caller sends it inline)."""

    def __init__(self, client, device, max_buffers: int = 3, max_bytes: int = 1 << 30):
        import torch
        self.client = client
        self.device = torch.device(device)
        self.max_buffers = max_buffers
        self.max_bytes = max_bytes
        c = client.config
        act = torch_wire_dtypes(torch)[c.activation_dtype]
        hqk, hv, kdim, vdim = c.num_qk_heads, c.num_v_heads, c.head_dim_k, c.head_dim_v
        self.fields = [("q", act, (hqk, kdim)), ("k", act, (hqk, kdim)), ("v", act, (hv, vdim)),
                       ("g", torch.float32, (hv,)), ("beta", torch.float32, (hv,)),
                       ("o", act, (hv, vdim))]
        self.row_bytes = sum(d.itemsize * _prod(r) for _, d, r in self.fields)
        self._buffers: "OrderedDict[int, _Buffer]" = OrderedDict()

    def slot(self, batch: int, tokens: int) -> Optional[StagingSlot]:
        """The StagingSlot of a [batch, tokens] call, or None when too large
        (as `views`)."""
        buffer = self._buffer(batch * tokens)
        return None if buffer is None else buffer.slot(batch, tokens)

    def views(self, tokens: int):
        """Views [tokens, ...] named q, k, v, g, beta, o into a registered buffer
        (registering one on first use of a capacity), or None when too large.
        StagingUnavailable when a new buffer cannot be allocated or registered."""
        buffer = self._buffer(tokens)
        return None if buffer is None else buffer.views(tokens)

    def _buffer(self, tokens: int) -> Optional[_Buffer]:
        """The buffer of `tokens` rows' capacity (see views), or None when too large."""
        capacity = 1 << max(0, tokens - 1).bit_length()
        if capacity * self.row_bytes > self.max_bytes:
            return None
        buffer = self._buffers.get(capacity)
        if buffer is None:
            while len(self._buffers) >= self.max_buffers:
                _, old = self._buffers.popitem(last=False)
                self._release(old)
            try:
                buffer = _Buffer(self.client, self.device, capacity, self.fields)
            except Exception as e:  # a GdnError, torch's or an allocation failure
                raise StagingUnavailable("%s: %s" % (type(e).__name__, e)) from e
            self._buffers[capacity] = buffer
        else:
            self._buffers.move_to_end(capacity)
        return buffer

    def _release(self, buffer: _Buffer) -> None:
        try:
            self.client.unregister_region(buffer.region.name)
        except Exception:  # the server may be gone; the memory is ours to free anyway
            pass

    def close(self) -> None:
        """Unregisters every buffer (their memory is freed with them)."""
        while self._buffers:
            self._release(self._buffers.popitem()[1])


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
