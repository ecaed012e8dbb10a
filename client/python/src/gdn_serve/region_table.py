"""The client's registered regions, and which tensors lie inside one.

A Forward argument inside a registered region goes as a RegionRef (region
name, byte offset in the region, byte size) instead of its bytes. What
counts as inside: the tensor is C-contiguous, already in its wire dtype
(q/k/v/o the server's activation dtype, the gates fp32), has the expected
shape, and its bytes [address, address + nbytes) lie within the region's
local address range:

    SYSTEM region  a numpy array (or CPU torch tensor) viewing this process's
                   mapping of the shm object (gdn_serve.regions.ShmRegion,
                   or register_shm_region(..., buffer=the mapping))
    CUDA region    a torch CUDA tensor on the region's device, inside the
                   registered storage

Anything else is sent inline (converted as usual). An explicit
gdn_serve.wire.RegionRef passed as a tensor is sent as it is (the server
checks its size and range).

Lookup is a scan of a short list; it only runs when the client has
registered regions (ClientCore._region_table is None otherwise).
"""

import sys
import threading
from typing import Dict, List, Optional, Tuple

import numpy as np

from . import dtypes
from .tensors import torch_wire_dtypes
from .wire import RegionRef

__all__ = ["RegionTable"]

_STORAGE_NUM = {w: d.num for w, d in dtypes.NUMPY_STORAGE.items()}


class RegionTable:
    """name -> gdn_serve.regions.Region of one client; thread-safe updates,
    lock-free lookups (lookups read an immutable snapshot)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._by_name: Dict[str, object] = {}
        # (base address, end address, region) for host and for CUDA regions (by device).
        self._host: List[Tuple[int, int, object]] = []
        self._cuda: Dict[int, List[Tuple[int, int, object]]] = {}

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str):
        return self._by_name.get(name)

    def add(self, region) -> None:
        with self._lock:
            by_name = dict(self._by_name)
            by_name[region.name] = region
            self._rebuild(by_name)

    def remove(self, name: str):
        with self._lock:
            by_name = dict(self._by_name)
            region = by_name.pop(name, None)
            self._rebuild(by_name)
        return region

    def _rebuild(self, by_name: Dict[str, object]) -> None:
        host, cuda = [], {}
        for r in by_name.values():
            if r.base is None:
                continue
            entry = (r.base, r.base + r.byte_size, r)
            if r.kind == "cuda":
                cuda.setdefault(r.device_id, []).append(entry)
            else:
                host.append(entry)
        self._by_name, self._host, self._cuda = by_name, host, cuda

    # --- lookups (the Forward path) -----------------------------------------
    def ref_of(self, x, wire_dtype: int, shape: Tuple[int, ...], nbytes: int) -> Optional[RegionRef]:
        """The RegionRef of x when it lies inside a registered region as the
        wire wants it (see the module docstring), else None."""
        if type(x) is RegionRef:
            return x
        if type(x) is np.ndarray:
            if (x.dtype.num != _STORAGE_NUM[wire_dtype] or x.shape != shape
                    or not x.flags.c_contiguous):
                return None
            return self._find(self._host, x.__array_interface__["data"][0], nbytes)
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(x, torch.Tensor):
            return None
        if (x.dtype is not torch_wire_dtypes(torch)[wire_dtype] or tuple(x.shape) != shape
                or not x.is_contiguous()):
            return None
        if x.is_cuda:
            entries = self._cuda.get(x.device.index)
            return self._find(entries, x.data_ptr(), nbytes) if entries else None
        if x.is_cpu:
            return self._find(self._host, x.data_ptr(), nbytes)
        return None

    @staticmethod
    def _find(entries, address: int, nbytes: int) -> Optional[RegionRef]:
        for base, end, region in entries:
            if base <= address and address + nbytes <= end:
                return RegionRef(region.name, address - base, nbytes)
        return None

    def cuda_device(self, ref: RegionRef) -> int:
        """The CUDA device of the region `ref` names; -1 for host memory or a
        name this client did not register (the server answers for those)."""
        region = self._by_name.get(ref.region)
        return region.device_id if region is not None and region.kind == "cuda" else -1

    @staticmethod
    def sync_cuda(devices) -> None:
        """Waits for the current torch stream of each device: the client's
        writes into its CUDA regions are complete before the server reads
        them (and its earlier reads of an o region before the server writes)."""
        torch = sys.modules["torch"]
        for device in devices:
            torch.cuda.current_stream(device).synchronize()
