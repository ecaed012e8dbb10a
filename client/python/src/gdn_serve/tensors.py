"""numpy arrays and torch tensors to wire bytes, and wire bytes back.

Inputs: numpy arrays or torch tensors (CPU or CUDA) of any float dtype. A
tensor already contiguous in the wire dtype is taken as its own memory (the
fast path of forward_call: a numpy array as is, a CPU torch tensor as a
ctypes view of its data pointer; no copy, no numpy round trip). Others are
converted here, once, to a C-contiguous numpy array of the wire storage:

    wire bf16  torch bf16: its own bits, never through float32; numpy uint16
               (bits) or ml_dtypes.bfloat16: as is; float numpy / torch:
               rounded to nearest even once
    wire fp16  float16 as is, other floats rounded once
    wire fp32  float32 as is, other floats converted

CUDA tensors are converted on the device and copied to the host together
(one concatenated copy for all tensors of a call).

Outputs (`unpack_like`): o is viewed in place in the response bytes and
returned as the kind, dtype and device of a reference tensor (v): numpy
results of the wire dtype are read-only views of the response (copy() to
write); CPU torch results of the wire dtype view the response too
(torch.from_numpy; writable: the response bytes are referenced by nothing
else), others are converted (their own memory).
"""

import sys
import warnings
from typing import Any, List, Sequence, Tuple

import numpy as np

from . import dtypes
from .errors import InvalidArgument

__all__ = ["is_torch", "torch_wire_dtypes", "torch_view", "to_wire", "unpack_like", "shape_of"]

# numpy dtype numbers of each wire dtype's storage (fast checks on the hot path).
STORAGE_NUM = {w: d.num for w, d in dtypes.NUMPY_STORAGE.items()}


def is_torch(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def shape_of(x: Any) -> Tuple[int, ...]:
    return tuple(x.shape)


_TORCH_DTYPES: dict = {}


def torch_wire_dtypes(torch) -> dict:
    """wire DType -> torch dtype (torch.bfloat16, torch.float32, torch.float16)."""
    if not _TORCH_DTYPES:
        _TORCH_DTYPES.update({dtypes.BF16: torch.bfloat16, dtypes.FP32: torch.float32,
                              dtypes.FP16: torch.float16})
    return _TORCH_DTYPES


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
    """Contiguous torch tensors (already in their wire dtype) -> flat uint8 numpy
    arrays of host memory holding their bytes.

    CUDA tensors go down in one copy: their bytes are concatenated on the device.
    """
    torch = sys.modules["torch"]
    raw: List[Any] = [None] * len(tensors)
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
    for i, t in enumerate(tensors):
        if raw[i] is None:
            raw[i] = t.reshape(-1).view(torch.uint8).numpy()
    return raw


def to_wire(items: Sequence[Tuple[str, Any, int, Tuple[int, ...]]]) -> List[Any]:
    """[(name, array or tensor, wire DType, expected shape)] -> a C-contiguous
    buffer of each tensor's wire bytes (the slow path: anything the hot path
    of forward_call did not take as it is).

    InvalidArgument (nothing sent) when a shape differs from the expected one
    or a dtype is not a float type.
    """
    result: List[Any] = [None] * len(items)
    torch_items = []
    for i, (name, x, wire, shape) in enumerate(items):
        if not hasattr(x, "shape"):  # a list or another array-like
            x = np.asarray(x, dtype=np.float32)
        if tuple(x.shape) != shape:
            raise InvalidArgument("%s: shape %s, expected %s" % (name, list(x.shape), list(shape)))
        if is_torch(x):
            if not x.is_floating_point():
                raise InvalidArgument("%s: dtype %s is not a floating type" % (name, x.dtype))
            want = torch_wire_dtypes(sys.modules["torch"])[wire]
            torch_items.append((i, x.detach().to(want).contiguous()))
        else:
            result[i] = _numpy_to_wire(np.asarray(x), wire, name)
    if torch_items:
        host = _torch_to_host([t for _, t in torch_items])
        for (i, _), data in zip(torch_items, host):
            result[i] = data
    return result


# numpy storage dtype of each wire dtype as torch takes it (bf16 bits as int16, then viewed).
_TORCH_STORAGE = {dtypes.BF16: np.dtype("<i2"), dtypes.FP32: np.dtype("<f4"),
                  dtypes.FP16: np.dtype("<f2")}
_warned_readonly = False


def torch_view(torch, buffer: Any, offset: int, shape: Tuple[int, ...], wire: int):
    """The wire elements of buffer at offset as a torch tensor of `shape` (no copy).

    torch warns once per process that a read-only buffer (the response bytes)
    makes a writable tensor; that is intended here (nothing else holds those
    bytes), so the first call hides it."""
    global _warned_readonly
    array = np.ndarray(shape, _TORCH_STORAGE[wire], buffer, offset)
    if _warned_readonly or array.flags.writeable:
        t = torch.from_numpy(array)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = torch.from_numpy(array)
        _warned_readonly = True
    return t.view(torch.bfloat16) if wire == dtypes.BF16 else t


def unpack_like(buffer: Any, offset: int, wire: int, shape: Tuple[int, ...], like: Any):
    """Wire elements of `buffer` at `offset` -> array/tensor of `like`'s kind, dtype, device.

    buffer: bytes-like holding prod(shape) elements of DType `wire` at `offset`.
    like: a numpy array or torch tensor (v of the call).
    """
    if type(like) is np.ndarray and like.dtype.num == STORAGE_NUM[wire]:
        return np.ndarray(shape, dtypes.NUMPY_STORAGE[wire], buffer, offset)  # a view
    if is_torch(like):
        t = torch_view(sys.modules["torch"], buffer, offset, shape, wire)
        if t.dtype is like.dtype and like.is_cpu:
            return t
        return t.to(device=like.device, dtype=like.dtype)
    raw = np.ndarray(shape, dtypes.NUMPY_STORAGE[wire], buffer, offset)
    want = np.asarray(like).dtype
    if wire == dtypes.BF16:
        if dtypes.is_bf16_numpy(want):
            return raw.view(want)
        return dtypes.bf16_bits_to_float32(raw).astype(want, copy=False)
    if raw.dtype == want:
        return raw
    return raw.astype(want)
