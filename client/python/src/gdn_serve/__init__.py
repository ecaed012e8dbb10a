"""gdn_serve: the Python client of gdn-server, the Gated DeltaNet state server.

    import gdn_serve
    client = gdn_serve.Client("127.0.0.1:50051")
    with client.session() as s:
        o = s.forward(layer, q, k, v, g, beta)   # q, k [T, Hqk, K]; v [T, Hv, V]; g, beta [T, Hv]

Modules: Client / Session (sync), aio (asyncio), errors (GdnError and its
subclasses), snapshot (.gdnsnap), regions (same-host tensors: ShmRegion, CUDA
regions), transformers (use_remote_gdn for Qwen3-Next / Qwen3.5), fla
(flash-linear-attention's signatures backed by server sessions).
Tensors are numpy arrays or torch tensors (CPU or CUDA); o comes back like v.
"""

from . import dtypes, errors, routing, snapshot
from .client import Client
from .errors import (AlreadyExists, DataLoss, DeadlineExceeded, FailedPrecondition, GdnError,
                     Internal, InvalidArgument, NotFound, ResourceExhausted, Unavailable)
from .memory import keep_freed_memory
from .retry import NO_RETRY, RetryPolicy
from .routing import new_session_id, routing_key
from .session import Session, forward_sessions
from .wire import RegionRef

__version__ = "0.1.0"

__all__ = [
    "Client", "Session", "forward_sessions", "RetryPolicy", "NO_RETRY", "new_session_id",
    "routing_key", "GdnError", "InvalidArgument", "FailedPrecondition", "NotFound",
    "AlreadyExists", "ResourceExhausted", "Unavailable", "DeadlineExceeded", "DataLoss",
    "Internal", "keep_freed_memory", "RegionRef", "__version__",
]
