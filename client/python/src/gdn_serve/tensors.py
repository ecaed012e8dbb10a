"""numpy arrays and torch tensors to wire bytes, and wire bytes back.

Inputs (`pack_tensors`): numpy arrays or torch tensors (CPU or CUDA) of any
float dtype. Each is converted once to the wire dtype and handed over as a
flat uint8 view of its own memory (no Python loop over elements, no copy when
it already is contiguous in the wire dtype):

    wire bf16  torch bf16: its own bits (tensor.view(torch.int16)), never
               through float32; numpy uint16 (bits) or ml_dtypes.bfloat16:
               as is; float numpy / torch: rounded to nearest even once
    wire fp16  float16 as is, other floats rounded once
    wire fp32  float32 as is, other floats converted

CUDA tensors are converted on the device and copied to the host together
(one concatenated copy for all tensors of a call).

Outputs (`unpack_like`): o is parsed with numpy.frombuffer and returned as the
kind, dtype and device of a reference tensor (v): numpy results of the wire
dtype are read-only views of the response (copy() to write); torch results
are their own (writable) memory.
"""

import sys
from typing import Any, List, NamedTuple, Sequence, Tuple

import numpy as np

from . import dtypes
from .errors import InvalidArgument

__all__ = ["WireTensor", "pack_tensors", "unpack_like", "is_torch", "shape_of"]


class WireTensor(NamedTuple):
    """One tensor as the wire carries it: DType value, shape, data (C-contiguous
    numpy array of the wire storage: float32, uint16 bf16 bits or float16)."""

    dtype: int
    shape: Tuple[int, ...]
    data: np.ndarray


# numpy dtype numbers of each wire dtype's storage (fast checks on the hot path).
_STORAGE_NUM = {w: d.num for w, d in dtypes.NUMPY_STORAGE.items()}
_NDARRAY = np.ndarray


def is_torch(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def shape_of(x: Any) -> Tuple[int, ...]:
    return tuple(x.shape)


def _torch_wire_dtype(torch, wire: int):
    if wire == dtypes.BF16:
        return torch.bfloat16
    return torch.float32 if wire == dtypes.FP32 else torch.float16


def _numpy_to_wire(x: np.ndarray, wire: int, name: str) -> np.ndarray:
    """x (numpy, any float dtype or bf16 bits) -> contiguous array in the wire storage."""
    src = x.dtype
    if src.kind not in "fu" and src.name != "bfloat16":
        raise InvalidArgument("%s: dtype %s is not a floating type" % (name, src))
    if src.kind == "u" and src != np.uint16:
        raise InvalidArgument("%s: dtype %s; integer arrays are taken only as uint16 bf16 bits"
                              % (name, src))
    if dtypes.is_bf16_numpy(src):
        if wire == dtypes.BF16:
            return np.ascontiguousarray(x).view(np.uint16)
        x = dtypes.bf16_bits_to_float32(np.ascontiguousarray(x).view(np.uint16))
    if wire == dtypes.BF16:
        return dtypes.float32_to_bf16_bits(x)
    return np.ascontiguousarray(x, dtype=dtypes.NUMPY_STORAGE[wire])


def _torch_to_host(tensors: List[Any]) -> List[np.ndarray]:
    """Contiguous torch tensors (already in their wire dtype) -> numpy arrays of host memory
    (float32, float16, or uint16 bits for bf16), shaped like the tensors.

    CUDA tensors go down in one copy: their bytes are concatenated on the device.
    """
    torch = sys.modules["torch"]
    storage = {torch.float32: np.float32, torch.float16: np.float16, torch.bfloat16: np.uint16}
    raw: List[Any] = [None] * len(tensors)  # uint8 [nbytes] numpy, host memory
    on_device = [i for i, t in enumerate(tensors) if t.device.type != "cpu"]
    if len(on_device) > 1:
        flat = torch.cat([tensors[i].reshape(-1).view(torch.uint8) for i in on_device]).cpu()
        offset = 0
        for i in on_device:
            n = tensors[i].numel() * tensors[i].element_size()
            raw[i] = flat[offset:offset + n].numpy()
            offset += n
    elif on_device:
        raw[on_device[0]] = tensors[on_device[0]].reshape(-1).view(torch.uint8).cpu().numpy()
    out = []
    for t, r in zip(tensors, raw):
        if r is None:
            r = t.reshape(-1).view(torch.uint8).numpy()
        out.append(r.view(storage[t.dtype]).reshape(tuple(t.shape)))
    return out


def pack_tensors(items: Sequence[Tuple[str, Any, int, Tuple[int, ...]]]) -> List[WireTensor]:
    """[(name, array or tensor, wire DType, expected shape)] -> [WireTensor].

    InvalidArgument (nothing sent) when a shape differs from the expected one
    or a dtype is not a float type.
    """
    result: List[Any] = []
    torch_items = []
    storage = _STORAGE_NUM
    for i, (name, x, wire, shape) in enumerate(items):
        if not hasattr(x, "shape"):  # a list or another array-like
            x = np.asarray(x, dtype=np.float32)
        if x.shape != shape and tuple(x.shape) != shape:
            raise InvalidArgument("%s: shape %s, expected %s" % (name, list(x.shape), list(shape)))
        if type(x) is _NDARRAY:
            if x.dtype.num == storage[wire] and x.flags.c_contiguous:
                result.append(WireTensor(wire, shape, x))  # the fast path: as it is
            else:
                result.append(WireTensor(wire, shape, _numpy_to_wire(x, wire, name)))
            continue
        result.append(None)
        if is_torch(x):
            torch = sys.modules["torch"]
            want = _torch_wire_dtype(torch, wire)
            if x.dtype is want and x.is_cpu and not x.requires_grad and x.is_contiguous():
                # the fast path: its own memory as numpy
                data = x.view(torch.int16).numpy().view(np.uint16) if wire == dtypes.BF16 else x.numpy()
                result[i] = WireTensor(wire, shape, data)
                continue
            if not x.is_floating_point():
                raise InvalidArgument("%s: dtype %s is not a floating type" % (name, x.dtype))
            torch_items.append((i, x.detach().to(want).contiguous()))
        else:
            result[i] = WireTensor(wire, shape, _numpy_to_wire(np.asarray(x), wire, name))
    if torch_items:
        host = _torch_to_host([t for _, t in torch_items])
        for (i, _), data in zip(torch_items, host):
            result[i] = WireTensor(items[i][2], items[i][3], data)
    return result


def unpack_like(buffer: Any, offset: int, wire: int, shape: Tuple[int, ...], like: Any,
                owned: bool = False):
    """Wire elements of `buffer` at `offset` -> array/tensor of `like`'s kind, dtype, device.

    buffer: bytes-like holding prod(shape) elements of DType `wire` at `offset`.
    like: a numpy array or torch tensor (v of the call).
    owned: buffer is writable memory nobody else holds (a torch result may use it).
    """
    count = 1
    for d in shape:
        count *= d
    raw = np.frombuffer(buffer, dtype=dtypes.NUMPY_STORAGE[wire], count=count, offset=offset)
    raw = raw.reshape(shape)
    if type(like) is np.ndarray and like.dtype.num == _STORAGE_NUM[wire]:
        return raw  # the fast path: a read-only view of the response
    if is_torch(like):
        torch = sys.modules["torch"]
        host = raw if owned else raw.copy()
        if wire == dtypes.BF16:
            t = torch.from_numpy(host.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(host)
        if t.dtype is like.dtype and like.is_cpu:
            return t
        return t.to(device=like.device, dtype=like.dtype)
    want = np.asarray(like).dtype
    if wire == dtypes.BF16:
        if dtypes.is_bf16_numpy(want):
            return raw.view(want)
        return dtypes.bf16_bits_to_float32(raw).astype(want, copy=False)
    if raw.dtype == want:
        return raw
    return raw.astype(want)
