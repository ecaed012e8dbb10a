"""What a CUDA region registration needs from torch: the IPC handle of a
storage's allocation, where the storage lies in it, and its local address.

torch's caching allocator hands out pieces of larger cudaMalloc blocks; a
CUDA IPC handle names a whole block. `storage._share_cuda_()` (the call
torch.multiprocessing uses to send CUDA tensors to another process) returns

    (device, handle, storage_size_bytes, storage_offset_bytes,
     ref_counter_handle, ref_counter_offset, event_handle, event_sync_required)

where `handle` is the block's cudaIpcMemHandle_t (64 bytes; torch >= 2.5
prefixes it with a version byte and a type byte: b"c" for a cudaMalloc
block, b"e" for an expandable segment, which is no cudaIpcMemHandle_t) and
storage_offset_bytes the storage's offset inside the block. The server opens
the handle and uses bytes [storage_offset_bytes, + storage_size_bytes) of it:
the storage, addressed here from storage.data_ptr().

torch counts the consumers of a shared block and keeps it out of its cache
until they are done; the server is no torch consumer, so a registered
storage's block stays reserved until this process ends: register long-lived
buffers (gdn_serve.staging keeps a few per device), not per-call tensors.
"""

from typing import Any, NamedTuple

from .errors import InvalidArgument

__all__ = ["CudaRegionSpec", "cuda_region_spec"]

CUDA_IPC_HANDLE_BYTES = 64  # sizeof(cudaIpcMemHandle_t)
_CUDA_MALLOC_BLOCK = ord("c")  # torch's type byte of a plain cudaMalloc block


def _raw_ipc_handle(handle) -> bytes:
    """The cudaIpcMemHandle_t inside torch's shareable handle, or None.

    torch < 2.5: the 64 bytes themselves; later: [version][type][64 bytes].
    """
    if not isinstance(handle, bytes):
        return None
    if len(handle) == CUDA_IPC_HANDLE_BYTES:
        return handle
    if len(handle) == CUDA_IPC_HANDLE_BYTES + 2 and handle[1] == _CUDA_MALLOC_BLOCK:
        return handle[2:]
    return None


class CudaRegionSpec(NamedTuple):
    device: int         # the CUDA device index (as this process numbers them)
    handle: bytes       # cudaIpcMemHandle_t of the allocation holding the storage
    offset: int         # the storage's byte offset in that allocation
    byte_size: int      # the storage's bytes
    base: int           # the storage's device address in this process
    storage: Any        # the torch UntypedStorage (kept alive while registered)


def cuda_region_spec(tensor_or_storage) -> CudaRegionSpec:
    """The spec of the storage behind a torch CUDA tensor (or of a storage).

    InvalidArgument, with what is missing, when torch or CUDA is not there,
    the tensor is not on a CUDA device, or torch's IPC handle is not a
    cudaIpcMemHandle_t (the allocator's expandable segments share handles of
    another kind: run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False).
    """
    try:
        import torch
    except ImportError:
        raise InvalidArgument("register_cuda_region needs torch (with CUDA); it is not "
                              "installed") from None
    if not torch.cuda.is_available():
        raise InvalidArgument("register_cuda_region needs CUDA: torch %s sees no CUDA device"
                              % torch.__version__)
    x = tensor_or_storage
    if isinstance(x, torch.Tensor):
        storage = x.untyped_storage()
    elif isinstance(x, torch.UntypedStorage):
        storage = x
    elif isinstance(x, torch.TypedStorage):
        storage = x.untyped()
    else:
        raise InvalidArgument("register_cuda_region: expected a torch CUDA tensor or storage, "
                              "got %s" % type(x).__name__)
    if storage.device.type != "cuda":
        raise InvalidArgument("register_cuda_region: the tensor is on %s, not on a CUDA device"
                              % storage.device)
    if storage.nbytes() == 0:
        raise InvalidArgument("register_cuda_region: the storage is empty")
    shared = storage._share_cuda_()
    device, handle, size_bytes, offset_bytes = shared[0], shared[1], shared[2], shared[3]
    raw = _raw_ipc_handle(handle)
    if raw is None:
        raise InvalidArgument(
            "register_cuda_region: torch gave an IPC handle of %s bytes that holds no "
            "cudaIpcMemHandle_t of a cudaMalloc block (expandable segments? set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False)"
            % (len(handle) if handle else 0))
    return CudaRegionSpec(int(device), raw, int(offset_bytes), int(size_bytes),
                          int(storage.data_ptr()), storage)
