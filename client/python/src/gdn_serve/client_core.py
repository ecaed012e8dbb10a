"""What the sync and the asyncio client share: options, metadata, the message
limit, and the requests and results of each method (no I/O here)."""

import threading
from typing import Iterable, List, Optional, Sequence

from . import snapshot as snap
from . import wire
from ._proto import gdn_pb2
from .channel import Metadata, call_metadata
from .cuda_regions import cuda_region_spec
from .errors import AlreadyExists, GdnError, Internal, InvalidArgument, NotFound
from .forward_call import ForwardLayout, PreparedForward, SequenceTokens
from .region_table import RegionTable
from .regions import Region, buffer_address, new_region_name
from .retry import RetryPolicy
from .split import SLACK_BYTES

__all__ = ["ClientCore", "DEFAULT_MAX_MESSAGE_BYTES", "IMPORT_CHUNK_BYTES", "MAX_CONNECTIONS"]

DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
# Forward requests and responses larger than this are split into parts sent
# in order (as for the message limit). Each part is a new bytes object on
# both ends (the request written here, gRPC's copy and read slices, the
# response), and at glibc's defaults large fresh allocations are
# page-faulted in anew on every call: on the 2-core VM a 34 MB prefill
# request took 50-60 ms to write in one piece, and its calls took 43-55 ms
# in all as parts of 16 MiB, 30-43 ms as parts of 8 MiB, 23-28 ms as parts of
# 4 MiB (with keep_freed_memory() the three were within noise, 31-43 ms).
# The sync client writes the next part while one is in flight, so what a
# split call adds is about the first part's request and the last part's o:
# smaller parts hide more, at one round trip each.
DEFAULT_MAX_PART_BYTES = 8 << 20
# Most connections a client opens for Forward (connections=).
MAX_CONNECTIONS = 64
# Bytes of state per ImportSession chunk (C++: GdnClientOptions::import_chunk_bytes).
IMPORT_CHUNK_BYTES = 1 << 20


class ClientCore:
    """Options and pure helpers; subclasses do the calls.

    target: "host:port". root_certificates: PEM bytes or a file path (TLS);
    None: plaintext. certificate_chain / private_key (Client, aio.Client):
    a client certificate for a server that asks for one (mutual TLS), PEM
    bytes or paths. token: sent as "authorization: Bearer <token>" on every
    call (a server with --tokens_file maps it to a tenant: README, Security). timeout: seconds per call (None: no deadline). max_message_bytes:
    the client's message limit (the server's, from GetServerInfo, applies too).
    max_part_bytes: Forward calls larger than this go as several parts (see
    DEFAULT_MAX_PART_BYTES). connections: > 1 opens that many connections
    for Forward and sends the chains of parts of a split call over them at
    once (split.part_chains: the pieces of one cut sequence still go one
    after another). For calls that must be split anyway (over max_part_bytes
    or the message limit): on the H200 host decode 256 x 1 in 4 parts took
    4.9-5.1 ms over 4 connections against 6.8-7.5 one part after another,
    but the same call whole took 4.8-5.0 (grpcio costs ~0.5 ms a part), so
    do not lower max_part_bytes to use it
    (bench/results/2026-12-04-connections/). When a part fails, parts of
    other sequences may have been applied (their positions tell).
    retry: the policy for UNAVAILABLE (gdn_serve.retry.NO_RETRY: none).
    """

    def __init__(self, target: str, *, root_certificates=None, token: Optional[str] = None,
                 timeout: Optional[float] = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 max_part_bytes: int = DEFAULT_MAX_PART_BYTES, connections: int = 1,
                 retry: RetryPolicy = RetryPolicy()):
        if not isinstance(connections, int) or not 1 <= connections <= MAX_CONNECTIONS:
            raise InvalidArgument("connections must be an int in [1, %d], got %r"
                                  % (MAX_CONNECTIONS, connections))
        self.target = target
        self.timeout = timeout
        self.max_message_bytes = int(max_message_bytes)
        self.max_part_bytes = int(max_part_bytes)
        self.connections = connections
        self.retry = retry
        self._metadata: Metadata = (("authorization", "Bearer " + token),) if token else ()
        self._info: Optional[gdn_pb2.ServerInfoResponse] = None
        self._layout: Optional[ForwardLayout] = None
        self._limit = self.max_message_bytes
        self._info_lock = threading.Lock()
        self._route_cache: dict = {}
        # Registered regions (region_table.RegionTable); _region_table is the same
        # table while it holds any, else None: Forward then never looks for references.
        self._regions: Optional[RegionTable] = None
        self._region_table: Optional[RegionTable] = None

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
                         request_id: int = 0, out=None) -> PreparedForward:
        """Needs the server info already cached (cached_info())."""
        return PreparedForward(self._layout, self._limit, layer, sequences, tensors, request_id,
                               self._region_table, out)

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

    # --- regions (same-host tensors) ---------------------------------------
    @staticmethod
    def _region_request(name: str, kind: str, *, key: str = "", cuda_ipc_handle: bytes = b"",
                        device_id: int = 0, offset: int = 0,
                        byte_size: int = 0) -> gdn_pb2.RegisterRegionRequest:
        kinds = {"system": gdn_pb2.REGION_SYSTEM, "cuda": gdn_pb2.REGION_CUDA}
        if kind not in kinds:
            raise InvalidArgument("kind: 'system' or 'cuda', got %r" % (kind,))
        return gdn_pb2.RegisterRegionRequest(name=name, kind=kinds[kind], key=key,
                                             cuda_ipc_handle=cuda_ipc_handle,
                                             device_id=device_id, offset=offset,
                                             byte_size=byte_size)

    @staticmethod
    def _shm_region(name: str, key: str, byte_size: int, offset: int, buffer) -> Region:
        """The Region of a SYSTEM registration; `buffer`: this process's mapping
        of the shm object from its byte 0 (then views into it go as references)."""
        base = None if buffer is None else buffer_address(buffer) + offset
        return Region(name, "system", byte_size, key=key, offset=offset, base=base, keep=buffer)

    @staticmethod
    def _cuda_region(tensor_or_storage, name: Optional[str]):
        """(Region, its RegisterRegionRequest) for the storage of a torch CUDA tensor."""
        spec = cuda_region_spec(tensor_or_storage)
        name = name or new_region_name("cuda")
        region = Region(name, "cuda", spec.byte_size, device_id=spec.device, offset=spec.offset,
                        base=spec.base, keep=spec.storage)
        return region, ClientCore._region_request(
            name, "cuda", cuda_ipc_handle=spec.handle, device_id=spec.device,
            offset=spec.offset, byte_size=spec.byte_size)

    def _remember_region(self, region: Region) -> Region:
        with self._info_lock:
            if self._regions is None:
                self._regions = RegionTable()
            self._regions.add(region)
            self._region_table = self._regions
        return region

    def _forget_region(self, name: str) -> None:
        with self._info_lock:
            if self._regions is not None:
                self._regions.remove(name)
                self._region_table = self._regions if len(self._regions) else None

    @staticmethod
    def _registered_anyway(error: GdnError, attempt: int) -> bool:
        return attempt > 1 and isinstance(error, AlreadyExists)

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
