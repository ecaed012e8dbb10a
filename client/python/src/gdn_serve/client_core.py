"""What the sync and the asyncio client share: options, metadata, the message
limit, and the requests and results of each method (no I/O here)."""

import threading
from typing import Iterable, List, Optional, Sequence

from . import snapshot as snap
from . import wire
from ._proto import gdn_pb2
from .channel import Metadata, call_metadata
from .errors import AlreadyExists, GdnError, Internal, InvalidArgument, NotFound
from .forward_call import ForwardLayout, PreparedForward, SequenceTokens
from .retry import RetryPolicy
from .split import SLACK_BYTES

__all__ = ["ClientCore", "DEFAULT_MAX_MESSAGE_BYTES", "IMPORT_CHUNK_BYTES"]

DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
# Forward requests and responses larger than this are split into parts sent
# in order (as for the message limit). Each request is one new Python bytes
# object, and an allocation above glibc's mmap threshold (which adapts up to
# 32 MiB) is page-faulted in anew on every call: a 34 MB prefill request took
# 50-60 ms to write here, a 16 MiB one 1 ms.
DEFAULT_MAX_PART_BYTES = 16 << 20
# Bytes of state per ImportSession chunk (C++: GdnClientOptions::import_chunk_bytes).
IMPORT_CHUNK_BYTES = 1 << 20


class ClientCore:
    """Options and pure helpers; subclasses do the calls.

    target: "host:port". root_certificates: PEM bytes or a file path (TLS);
    None: plaintext. token: sent as "authorization: Bearer <token>" on every
    call. timeout: seconds per call (None: no deadline). max_message_bytes:
    the client's message limit (the server's, from GetServerInfo, applies too).
    max_part_bytes: Forward calls larger than this go as several parts (see
    DEFAULT_MAX_PART_BYTES). retry: the policy for UNAVAILABLE
    (gdn_serve.retry.NO_RETRY: none).
    """

    def __init__(self, target: str, *, root_certificates=None, token: Optional[str] = None,
                 timeout: Optional[float] = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 max_part_bytes: int = DEFAULT_MAX_PART_BYTES,
                 retry: RetryPolicy = RetryPolicy()):
        self.target = target
        self.timeout = timeout
        self.max_message_bytes = int(max_message_bytes)
        self.max_part_bytes = int(max_part_bytes)
        self.retry = retry
        self._metadata: Metadata = (("authorization", "Bearer " + token),) if token else ()
        self._info: Optional[gdn_pb2.ServerInfoResponse] = None
        self._layout: Optional[ForwardLayout] = None
        self._limit = self.max_message_bytes
        self._info_lock = threading.Lock()
        self._route_cache: dict = {}

    # --- helpers ---------------------------------------------------------
    def _timeout(self, timeout: Optional[float]) -> Optional[float]:
        return self.timeout if timeout is None else timeout

    def _md(self, session_id: Optional[str] = None) -> Metadata:
        """The call's metadata (cached per session id: it is on every Forward)."""
        cached = self._route_cache.get(session_id)
        if cached is None:
            if len(self._route_cache) > 65536:
                self._route_cache.clear()
            cached = self._route_cache[session_id] = call_metadata(self._metadata, session_id)
        return cached

    def _remember_info(self, info: gdn_pb2.ServerInfoResponse) -> gdn_pb2.ServerInfoResponse:
        with self._info_lock:
            self._info = info
            self._layout = ForwardLayout(info.config)
            self._limit = min(self.message_limit(info), self.max_part_bytes)
        return info

    def message_limit(self, info: gdn_pb2.ServerInfoResponse) -> int:
        """The smaller of the client's and the server's message limit."""
        limit = self.max_message_bytes
        if info.limits.max_message_bytes > 0:
            limit = min(limit, info.limits.max_message_bytes)
        return limit

    def _prepare_forward(self, layer: int, sequences: Sequence[SequenceTokens], tensors: dict,
                         request_id: int = 0) -> PreparedForward:
        """Needs the server info already cached (cached_info())."""
        return PreparedForward(self._layout, self._limit, layer, sequences, tensors, request_id)

    @staticmethod
    def _split_error(error: GdnError, part: int, parts: int) -> GdnError:
        """The same error class, its message naming the part of a split Forward."""
        if parts == 1:
            return error
        return type(error)("part %d of %d of a split Forward: %s" % (part + 1, parts, error.message),
                           error.code)

    @staticmethod
    def _parse_forward(raw: bytes):
        return raw, wire.parse_forward_response(raw)

    # --- idempotent retries: an earlier try may have been applied ------------
    @staticmethod
    def _created_anyway(error: GdnError, attempt: int, wanted_id: str) -> bool:
        return attempt > 1 and bool(wanted_id) and isinstance(error, AlreadyExists)

    @staticmethod
    def _closed_anyway(error: GdnError, attempt: int) -> bool:
        return attempt > 1 and isinstance(error, NotFound)

    # --- export / import -------------------------------------------------
    @staticmethod
    def _export_bytes(chunks: Iterable[gdn_pb2.SessionChunk]) -> bytes:
        chunks = list(chunks)
        if not chunks:
            raise Internal("export sent no chunks")
        return snap.encode_file(snap.snapshot_from_chunks(chunks))

    def _import_chunks(self, info: gdn_pb2.ServerInfoResponse, data: bytes,
                       session_id: Optional[str]) -> List[gdn_pb2.SessionChunk]:
        if isinstance(data, snap.Snapshot):
            snapshot = data
        else:
            snapshot = snap.decode_file(data)
        chunk_bytes = max(1, min(IMPORT_CHUNK_BYTES, self.message_limit(info) - SLACK_BYTES))
        return snap.snapshot_to_chunks(snapshot, chunk_bytes, session_id or "")

    @staticmethod
    def _import_id(chunks: List[gdn_pb2.SessionChunk]) -> str:
        return chunks[0].session_id

    @staticmethod
    def _check_id(name: str, value: Optional[str]) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise InvalidArgument("%s: must be a str, got %r" % (name, type(value).__name__))
        return value
