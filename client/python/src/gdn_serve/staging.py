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
"""

from collections import OrderedDict
from typing import Dict

from .tensors import torch_wire_dtypes

__all__ = ["CudaStaging", "StagingUnavailable", "same_host"]


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
    """One capacity's registered buffer and its per-tensor (offset, row bytes, dtype, row shape)."""

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

    def views(self, tokens: int) -> Dict[str, object]:
        out = {}
        for name, (offset, row_bytes, dtype, row) in self.fields.items():
            out[name] = self.memory[offset:offset + tokens * row_bytes].view(dtype).view(
                (tokens,) + row)
        return out


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

    def views(self, tokens: int):
        """Views [tokens, ...] named q, k, v, g, beta, o into a registered buffer
        (registering one on first use of a capacity), or None when too large.
        StagingUnavailable when a new buffer cannot be allocated or registered."""
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
        return buffer.views(tokens)

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
