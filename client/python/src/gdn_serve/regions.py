"""Same-host tensors: memory regions a client registers with gdn-server.

A region is memory both processes can address: POSIX shared memory (kind
"system": the server maps the shm object) or GPU memory of this process
(kind "cuda": the server opens its CUDA IPC handle; the server must run
--backend=cuda on the same GPU). Once registered, a Forward argument that
lies inside a region goes as a reference (region, offset, byte size) and no
tensor bytes travel; `out=` a view in a region makes the server write o
there (README: "Same-host tensors").

    with gdn_serve.regions.ShmRegion(client, 64 << 20) as shm:   # created, registered
        q = shm.empty((T, Hqk, K), np.uint16)                     # bf16 bits, in the region
        ...fill q, k, v, g, beta...
        o = shm.empty((T, Hv, V), np.uint16)
        client.forward(0, [(sid, 0, T)], q, k, v, g, beta, out=o)  # o written in place
    # unregistered, unmapped and unlinked

Region: what the client knows of a registered region (name, kind, key,
device_id, offset, byte_size) and its local address range (`base`, None
when this process has no mapping of it: then only explicit
gdn_serve.wire.RegionRef arguments name it).
"""

import mmap
import os
import secrets
from typing import Any, Optional, Tuple

import numpy as np

__all__ = ["Region", "ShmRegion", "new_region_name", "buffer_address"]


class Region:
    """A registered region. kind: "system" or "cuda". base: the address of the
    region's byte 0 in this process (host or device), or None. keep: what
    keeps that memory alive while registered (a mapping, a torch storage)."""

    def __init__(self, name: str, kind: str, byte_size: int, *, key: str = "", device_id: int = 0,
                 offset: int = 0, base: Optional[int] = None, keep: Any = None):
        self.name = name
        self.kind = kind
        self.byte_size = int(byte_size)
        self.key = key
        self.device_id = int(device_id)
        self.offset = int(offset)
        self.base = base
        self.keep = keep

    def __repr__(self) -> str:
        where = self.key if self.kind == "system" else "cuda:%d" % self.device_id
        return "Region(%r, %s, %s, offset=%d, byte_size=%d)" % (
            self.name, self.kind, where, self.offset, self.byte_size)


def new_region_name(prefix: str = "r") -> str:
    """A fresh name of the server's alphabet ([A-Za-z0-9._:/-], <= 128)."""
    return "%s-%s" % (prefix, secrets.token_hex(8))


def buffer_address(buffer) -> int:
    """The address of byte 0 of a C-contiguous buffer (mmap, memoryview, numpy array, ...)."""
    view = np.frombuffer(buffer, dtype=np.uint8) if not isinstance(buffer, np.ndarray) else buffer
    return view.__array_interface__["data"][0]


def create_shm_object(byte_size: int, mode: int = 0o600) -> Tuple[str, mmap.mmap]:
    """A new POSIX shm object /dev/shm/gdn-<hex> of byte_size bytes, mapped:
    (its name without the '/', the mapping)."""
    shm_name = "gdn-" + secrets.token_hex(8)
    path = os.path.join("/dev/shm", shm_name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.ftruncate(fd, byte_size)
        mapping = mmap.mmap(fd, byte_size)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)  # the mapping keeps the object
    return shm_name, mapping


def release_shm_object(shm_name: str, mapping: Optional[mmap.mmap]) -> None:
    """Unmaps (unless views still hold the mapping: it goes with the last of
    them) and unlinks an object of create_shm_object."""
    if mapping is not None:
        try:
            mapping.close()
        except BufferError:
            pass
    try:
        os.unlink(os.path.join("/dev/shm", shm_name))
    except FileNotFoundError:
        pass


class ShmRegion:
    """A POSIX shared memory object of `byte_size` bytes, mapped here and
    registered with `client` as a SYSTEM region (name `name` or a fresh one).

    Created under /dev/shm/<shm name> (mode 0600: the server runs as the
    same user) and unlinked on close; `empty` / `array` give numpy views.
    Works with gdn_serve.Client; with gdn_serve.aio.Client, `await
    ShmRegion.create_async(client, ...)` and `await region.aclose()`.
    """

    def __init__(self, client, byte_size: int, name: Optional[str] = None, *,
                 mode: int = 0o600, _register: bool = True):
        if byte_size <= 0:
            raise ValueError("byte_size must be > 0, got %d" % byte_size)
        self.client = client
        self.byte_size = int(byte_size)
        self.name = name or new_region_name("shm")
        self.shm_name, self.mapping = create_shm_object(self.byte_size, mode)
        self.key = "/" + self.shm_name
        self._used = 0
        self.region: Optional[Region] = None
        if _register:
            try:
                self.region = client.register_shm_region(self.name, self.key, self.byte_size,
                                                         buffer=self.mapping)
            except BaseException:
                self._release()
                raise

    @classmethod
    async def create_async(cls, client, byte_size: int, name: Optional[str] = None, *,
                           mode: int = 0o600) -> "ShmRegion":
        """The same with an asyncio client (registration awaited)."""
        shm = cls(client, byte_size, name, mode=mode, _register=False)
        try:
            shm.region = await client.register_shm_region(shm.name, shm.key, shm.byte_size,
                                                          buffer=shm.mapping)
        except BaseException:
            shm._release()
            raise
        return shm

    # --- views ---------------------------------------------------------------
    def array(self, shape: Tuple[int, ...], dtype, offset: int = 0) -> np.ndarray:
        """A numpy view of the region: `shape` of `dtype` from byte `offset`."""
        return np.ndarray(shape, dtype, buffer=self.mapping, offset=offset)

    def empty(self, shape: Tuple[int, ...], dtype, align: int = 64) -> np.ndarray:
        """The next unused `align`-aligned bytes of the region as a numpy array
        (a bump allocator: nothing is freed before the region is)."""
        dtype = np.dtype(dtype)
        start = -(-self._used // align) * align
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if start + nbytes > self.byte_size:
            raise MemoryError("region %s: %d bytes asked at %d, %d in all"
                              % (self.name, nbytes, start, self.byte_size))
        self._used = start + nbytes
        return self.array(shape, dtype, start)

    def reset(self) -> None:
        """Starts `empty` from byte 0 again (earlier arrays stay views of the same bytes)."""
        self._used = 0

    # --- lifetime --------------------------------------------------------------
    def close(self) -> None:
        """Unregisters the region, unmaps it (when no numpy view holds it) and unlinks it."""
        try:
            if self.region is not None:
                self.client.unregister_region(self.name)
        finally:
            self.region = None
            self._release()

    async def aclose(self) -> None:
        try:
            if self.region is not None:
                await self.client.unregister_region(self.name)
        finally:
            self.region = None
            self._release()

    def _release(self) -> None:
        release_shm_object(self.shm_name, self.mapping)

    def __enter__(self) -> "ShmRegion":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def __aenter__(self) -> "ShmRegion":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
