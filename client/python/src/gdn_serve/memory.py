"""keep_freed_memory(): glibc keeps freed heap memory in the process.

The Python form of the C++ side's wire::KeepFreedMemoryForLargeMessages
(proto/grpc_transport.h), which gdn-server, gdn-bench and the echo servers
call at start. A multi-MiB Forward allocates fresh memory at every step (the
request bytes written here, gRPC's copy and read slices, the response bytes,
a split call's merged o), and at glibc's defaults each such block is mapped,
zero-filled by the kernel page by page and unmapped again on every call.
With no mmap for blocks under 32 MiB and no trimming of free memory under
1 GiB, the same memory is reused instead.

Process-wide and opt-in (a library should not change its host's allocator
on import): call it once at the start of a process that moves large
Forward calls. The cost is resident memory: up to 1 GiB of freed heap stays
with the process.
"""

import ctypes
import ctypes.util

__all__ = ["keep_freed_memory"]

# glibc <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Sets glibc's mmap threshold to 32 MiB (its largest) and the trim threshold
    to 1 GiB. True when applied; False where the C library has no mallopt
    (not glibc: nothing changes)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))
