"""gdn_serve.Client: the synchronous client of gdn-server (gdn.v1.GdnService).

    client = gdn_serve.Client("127.0.0.1:50051", timeout=30)
    sid = client.create_session()
    o = client.forward(0, [(sid, 0, T)], q, k, v, g, beta)   # o like v: [T, Hv, V]

Every method raises a gdn_serve.GdnError subclass on failure. UNAVAILABLE
(a draining server, an unreachable one) is retried under `retry`; the server
answers it only for calls it did not apply. Safe to use from many threads.
"""

from typing import Any, List, Optional, Sequence, Tuple

import queue

import grpc
import numpy as np

from ._proto import gdn_pb2
from .channel import make_channel, open_channels
from .client_core import ClientCore
from .errors import GdnError, from_rpc_error
from .forward_call import PreparedForward, SequenceTokens
from .regions import Region
from .retry import call_with_retry
from .split import part_chains
from .routing import new_session_id
from .tensors import torch_view

__all__ = ["Client"]


def _tensors(q, k, v, g, beta, a, b, a_log, dt_bias) -> dict:
    """A Forward's tensors by field name (PreparedForward's argument)."""
    return {"q": q, "k": k, "v": v, "g": g, "beta": beta, "a": a, "b": b, "a_log": a_log,
            "dt_bias": dt_bias}


class Client(ClientCore):
    """Synchronous client. See ClientCore for the constructor's arguments;
    `channel_options` adds gRPC channel arguments."""

    def __init__(self, target: str, *, root_certificates=None, token: Optional[str] = None,
                 timeout: Optional[float] = None, channel_options: Sequence[Tuple[str, Any]] = (),
                 certificate_chain=None, private_key=None, **kwargs):
        super().__init__(target, root_certificates=root_certificates, token=token,
                         timeout=timeout, **kwargs)
        # connections > 1: Forward's other connections, a channel each.
        self._channel, self._forward_channels, self._calls, self._forward_calls = open_channels(
            make_channel, target, self.connections, root_certificates=root_certificates,
            max_message_bytes=self.max_message_bytes, extra_options=channel_options,
            certificate_chain=certificate_chain, private_key=private_key)

    def close(self) -> None:
        """Closes the channels (sessions on the server stay)."""
        self.close_forward_channel()
        self._channel.close()
        for channel in self._forward_channels:
            channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _unary(self, method: str, request, session_id: Optional[str] = None,
               timeout: Optional[float] = None, on_error=None):
        """One unary call under the retry policy. on_error(error, attempt) may
        return a response to use instead of raising (idempotent retries)."""
        call = self._calls[method]
        metadata = self._md(session_id)
        deadline = self._timeout(timeout)

        def attempt_once(attempt: int):
            try:
                return call(request, timeout=deadline, metadata=metadata)
            except grpc.RpcError as e:
                if on_error is not None:
                    replacement = on_error(from_rpc_error(e), attempt)
                    if replacement is not None:
                        return replacement
                raise

        return call_with_retry(self.retry, attempt_once)

    # --- server ----------------------------------------------------------
    def info(self, timeout: Optional[float] = None) -> gdn_pb2.ServerInfoResponse:
        """GetServerInfo: config (LayerConfig: shape, dtypes, gating), limits, backend, version."""
        return self._remember_info(self._unary("GetServerInfo", gdn_pb2.ServerInfoRequest(),
                                               timeout=timeout))

    def cached_info(self) -> gdn_pb2.ServerInfoResponse:
        """The first successful info() (a server's config never changes while it runs)."""
        return self._info if self._info is not None else self.info()

    @property
    def config(self) -> gdn_pb2.LayerConfig:
        """The server's LayerConfig (num_layers, num_qk_heads, num_v_heads, head_dim_k/v, ...)."""
        return self.cached_info().config

    # --- sessions --------------------------------------------------------
    def create_session(self, session_id: Optional[str] = None,
                       timeout: Optional[float] = None) -> str:
        """Creates a session; None lets the server pick the id. Returns the id."""
        wanted = self._check_id("session_id", session_id)
        response = self._unary(
            "CreateSession", gdn_pb2.CreateSessionRequest(session_id=wanted), wanted, timeout,
            lambda e, attempt: gdn_pb2.CreateSessionResponse(session_id=wanted)
            if self._created_anyway(e, attempt, wanted) else None)
        return response.session_id

    def close_session(self, session_id: str, timeout: Optional[float] = None) -> None:
        """Closes a session and frees its states."""
        self._unary("CloseSession", gdn_pb2.CloseSessionRequest(session_id=session_id),
                    session_id, timeout,
                    lambda e, attempt: gdn_pb2.CloseSessionResponse()
                    if self._closed_anyway(e, attempt) else None)

    def fork_session(self, parent: str, child: Optional[str] = None,
                     timeout: Optional[float] = None, at_position: Optional[int] = None) -> str:
        """A child sharing the parent's states copy-on-write (free until written). Returns its id.
        at_position: start from the parent's kept states there (forward(...,
        checkpoint_interval=N) keeps them)."""
        wanted = self._check_id("child", child)
        request = gdn_pb2.ForkSessionRequest(parent_id=parent, child_id=wanted)
        if at_position is not None:
            request.at_position = at_position
        response = self._unary(
            "ForkSession", request, parent,
            timeout, lambda e, attempt: gdn_pb2.ForkSessionResponse(session_id=wanted)
            if self._created_anyway(e, attempt, wanted) else None)
        return response.session_id

    def describe_session(self, session_id: str,
                         timeout: Optional[float] = None) -> gdn_pb2.DescribeSessionResponse:
        """Per layer: position, has_state, tier, shared_with; state_bytes, idle_seconds."""
        return self._unary("DescribeSession", gdn_pb2.DescribeSessionRequest(session_id=session_id),
                           session_id, timeout)

    def commit_draft(self, session_id: str, position: int, layers: Sequence[int] = (),
                     timeout: Optional[float] = None) -> gdn_pb2.CommitDraftResponse:
        """Accepts position - p tokens of the open speculative drafts of `layers`
        (empty: every layer with one) without a Forward call; p is where each
        draft was sent. Response: the layers committed and their accepted tokens."""
        return self._unary("CommitDraft", gdn_pb2.CommitDraftRequest(
            session_id=session_id, position=position, layers=list(layers)), session_id, timeout)

    def list_sessions(self, timeout: Optional[float] = None) -> List[str]:
        """The ids of the caller's sessions on this server (its tenant's when the
        server has tokens), in id order, following ListSessions' pages."""
        ids: List[str] = []
        token = ""
        while True:
            response = self._unary("ListSessions", gdn_pb2.ListSessionsRequest(page_token=token),
                                   timeout=timeout)
            ids.extend(response.session_ids)
            token = response.next_page_token
            if not token:
                return ids

    def export_session(self, session_id: str, timeout: Optional[float] = None) -> bytes:
        """The session's states as .gdnsnap bytes (the file gdn-cli export writes)."""
        call = self._calls["ExportSession"]
        request = gdn_pb2.ExportSessionRequest(session_id=session_id)
        metadata = self._md(session_id)
        deadline = self._timeout(timeout)
        chunks = call_with_retry(self.retry, lambda attempt: list(
            call(request, timeout=deadline, metadata=metadata)))
        return self._export_bytes(chunks)

    def import_session(self, data, session_id: Optional[str] = None,
                       timeout: Optional[float] = None) -> str:
        """Imports .gdnsnap bytes (or a gdn_serve.snapshot.Snapshot), under
        `session_id` when given, else the id it was exported from. Returns the id."""
        chunks = self._import_chunks(self.cached_info(), data, session_id)
        sid = self._import_id(chunks)
        call = self._calls["ImportSession"]
        metadata = self._md(sid)
        deadline = self._timeout(timeout)

        def attempt_once(attempt: int):
            try:
                return call(iter(chunks), timeout=deadline, metadata=metadata).session_id
            except grpc.RpcError as e:
                if self._created_anyway(from_rpc_error(e), attempt, sid):
                    return sid
                raise

        return call_with_retry(self.retry, attempt_once)

    # --- regions (same-host tensors; README "Same-host tensors") -----------
    def register_region(self, name: str, kind: str, *, key: str = "",
                        cuda_ipc_handle: bytes = b"", device_id: int = 0, offset: int = 0,
                        byte_size: int = 0, timeout: Optional[float] = None) -> Region:
        """RegisterRegion as the proto has it (kind "system" or "cuda"). The
        Region has no local address: only explicit wire.RegionRef arguments
        name it (register_shm_region / register_cuda_region find tensors)."""
        request = self._region_request(name, kind, key=key, cuda_ipc_handle=cuda_ipc_handle,
                                       device_id=device_id, offset=offset, byte_size=byte_size)
        self._register(request, timeout)
        return self._remember_region(Region(name, kind, byte_size, key=key, device_id=device_id,
                                            offset=offset))

    def register_shm_region(self, name: str, key: str, byte_size: int, offset: int = 0, *,
                            buffer=None, timeout: Optional[float] = None) -> Region:
        """Registers bytes [offset, offset + byte_size) of the POSIX shm object
        `key` ("/name") as region `name`. buffer: this process's mapping of the
        object (from its byte 0; an mmap, memoryview or numpy array): numpy
        views into it then go as references. gdn_serve.regions.ShmRegion
        creates, maps and registers one in a single step."""
        region = self._shm_region(name, key, byte_size, offset, buffer)
        self._register(self._region_request(name, "system", key=key, offset=offset,
                                            byte_size=byte_size), timeout)
        return self._remember_region(region)

    def register_cuda_region(self, tensor_or_storage, name: Optional[str] = None,
                             timeout: Optional[float] = None) -> Region:
        """Registers the CUDA storage behind a torch tensor (its whole storage)
        as a CUDA region (name: `name` or a fresh one); torch CUDA tensors inside
        it then go as references. The server must run --backend=cuda on the
        same GPU. The Region keeps the storage alive until unregistered."""
        region, request = self._cuda_region(tensor_or_storage, name)
        self._register(request, timeout)
        return self._remember_region(region)

    def _register(self, request, timeout: Optional[float] = None) -> None:
        self._unary("RegisterRegion", request, timeout=timeout,
                    on_error=lambda e, attempt: gdn_pb2.RegisterRegionResponse()
                    if self._registered_anyway(e, attempt) else None)

    def unregister_region(self, name: str, timeout: Optional[float] = None) -> None:
        """Unregisters a region (calls still using it fail, unapplied)."""
        try:
            self._unary("UnregisterRegion", gdn_pb2.UnregisterRegionRequest(name=name),
                        timeout=timeout, on_error=lambda e, attempt: gdn_pb2.UnregisterRegionResponse()
                        if self._closed_anyway(e, attempt) else None)
        finally:
            self._forget_region(name)

    def list_regions(self, timeout: Optional[float] = None) -> List[gdn_pb2.RegionInfo]:
        """This client's regions as the server has them (RegionInfo: name, kind,
        key, device_id, offset, byte_size, calls_in_flight)."""
        return list(self._unary("ListRegions", gdn_pb2.ListRegionsRequest(),
                                timeout=timeout).regions)

    # --- the same-host Forward channel (forward_channel.py) --------------
    def open_forward_channel(self, **kwargs):
        """Sends this client's single-message Forward calls through a same-host
        shared-memory channel from now on (no socket round trip per call);
        returns the ForwardChannel (keyword arguments: slots,
        request_capacity, response_capacity, spin). Split calls and other
        methods stay on gRPC. close_forward_channel() goes back."""
        from .forward_channel import ForwardChannel
        self.close_forward_channel()
        self._forward_channel = ForwardChannel(self, **kwargs)
        return self._forward_channel

    def close_forward_channel(self) -> None:
        channel = getattr(self, "_forward_channel", None)
        self._forward_channel = None
        if channel is not None:
            channel.close()

    def _open_channel(self, name: str, key: str, byte_size: int) -> None:
        self._unary("OpenChannel", gdn_pb2.OpenChannelRequest(name=name, shm_key=key,
                                                               byte_size=byte_size))

    def _close_channel(self, name: str) -> None:
        self._unary("CloseChannel", gdn_pb2.CloseChannelRequest(name=name), timeout=5)

    # --- forward ---------------------------------------------------------
    def forward(self, layer: int, sequences: Sequence[SequenceTokens], q, k, v, g=None, beta=None,
                *, a=None, b=None, a_log=None, dt_bias=None, out=None,
                timeout: Optional[float] = None):
        """One GDN layer over sessions: o [T, Hv, V] like v (numpy / torch, dtype, device).

        sequences: [(session_id, position, num_tokens)], T = sum of num_tokens;
        q, k [T, Hqk, K], v [T, Hv, V] (any float dtype; sent in the server's
        activation dtype); direct gating: g, beta [T, Hv]; fused gating: a, b
        [T, Hv], a_log, dt_bias [Hv]. Calls larger than a message are split.
        Tensors inside a registered region go as references (no bytes);
        out: a view in a registered region that receives o (and is returned).
        """
        return self.forward_with_positions(layer, sequences, q, k, v, g, beta, a=a, b=b,
                                           a_log=a_log, dt_bias=dt_bias, out=out,
                                           timeout=timeout)[0]

    def forward_with_positions(self, layer: int, sequences: Sequence[SequenceTokens], q, k, v,
                               g=None, beta=None, *, a=None, b=None, a_log=None, dt_bias=None,
                               out=None, timeout: Optional[float] = None):
        """forward, returning (o, new position of each sequence)."""
        layout = self._layout
        if layout is None:
            self.cached_info()
            layout = self._layout
        channel = getattr(self, "_forward_channel", None)
        limit = self._limit
        deadline = self.timeout if timeout is None else timeout
        if channel is None and self._region_table is None and out is None:
            inline = layout.inline_request(limit, layer, sequences, q, k, v, g, beta, a, b, a_log,
                                           dt_bias)
            if inline is not None:  # numpy / CPU torch tensors as they are, one message
                payload, plan, tail, positions, torch = inline
                raw = self._call_forward(payload, deadline, self._md(sequences[0][0]))
                offset = plan.canonical_o(raw, tail)
                if offset >= 0:
                    if torch is None:
                        return np.ndarray(plan.o_shape, layout.o_storage, raw, offset), positions
                    # v is a torch tensor: o as PreparedForward.result() gives
                    # it (a writable view of the answer, no copy).
                    return torch_view(torch, raw, offset, plan.o_shape,
                                      layout.activation), positions
                # Any other form of answer: parsed and checked as for every call.
                prepared = PreparedForward(layout, limit, layer, sequences,
                                           _tensors(q, k, v, g, beta, a, b, a_log, dt_bias))
                prepared.take_whole(raw)
                return prepared.result()
        elif channel is not None:  # a part may fill a slot: no message limit on the channel
            limit = max(limit, min(channel.request_capacity, channel.response_capacity) - 65536)
        prepared = PreparedForward(layout, limit, layer, sequences,
                                   _tensors(q, k, v, g, beta, a, b, a_log, dt_bias), 0,
                                   self._region_table, out)
        if prepared.cuda_devices:  # the client's writes are complete before the call
            self._region_table.sync_cuda(prepared.cuda_devices)
        metadata = self._md(sequences[0][0])
        parts = prepared.parts
        if len(parts) == 1:
            payload = prepared.payload(parts[0])
            if channel is not None and len(payload) <= channel.request_capacity:
                prepared.take_whole(channel.call(payload, deadline))
                return prepared.result()
            prepared.take_whole(self._call_forward(payload, deadline, metadata))
            return prepared.result()
        return self._forward_parts(prepared, self._calls["Forward"], deadline, metadata)

    def _call_forward(self, payload: bytes, deadline, metadata) -> bytes:
        """One whole Forward's response bytes; UNAVAILABLE retried, other
        errors raised as their GdnError."""
        call = self._calls["Forward"]
        try:
            return call(payload, timeout=deadline, metadata=metadata)
        except grpc.RpcError as e:
            failed = e
        return call_with_retry(self.retry, lambda attempt: call(
            payload, timeout=deadline, metadata=metadata), failed)

    def _forward_parts(self, prepared, call, deadline, metadata):
        """A split Forward. Over several connections (connections > 1) when its
        parts hold more than one chain (split.part_chains); else the parts go
        one after another (each is sent when the previous one's response
        arrived, so the server applies them in order); the next part's request
        is written, and the previous part's o merged, while a part is in
        flight."""
        parts = prepared.parts
        if len(self._forward_calls) > 1:
            chains = part_chains(parts)
            if len(chains) > 1:
                return self._forward_chains(prepared, chains, deadline, metadata)
        count = len(parts)
        payload = prepared.payload(parts[0])
        future = call.future(payload, timeout=deadline, metadata=metadata)
        for index in range(count):
            following = prepared.payload(parts[index + 1]) if index + 1 < count else None
            try:
                raw = future.result()
                failed = None
            except grpc.RpcError as e:
                failed = e
            if failed is not None:
                sent = payload
                try:
                    raw = call_with_retry(self.retry, lambda attempt: call(
                        sent, timeout=deadline, metadata=metadata), failed)
                except GdnError as e:
                    raise self._split_error(e, index, count) from None
            parsed = prepared.check(index, raw)
            if following is not None:
                payload = following
                future = call.future(payload, timeout=deadline, metadata=metadata)
            prepared.merge(index, raw, parsed)
        return prepared.result()

    def _forward_chains(self, prepared, chains, deadline, metadata):
        """A split Forward over the connections: chain c (its parts in order,
        each sent when the previous one's response arrived) on connection
        c mod N, the chains at once; responses are taken as they complete
        (gRPC's threads signal a queue). When a part fails, the parts in
        flight finish (they may be applied) and no further part starts; the
        failure of the earliest part is raised."""
        calls = self._forward_calls
        count = len(prepared.parts)
        completed = queue.SimpleQueue()
        in_flight = {}  # chain -> (part index, payload, call, future)
        step = [0] * len(chains)

        def start(chain: int) -> None:
            index = chains[chain][step[chain]]
            payload = prepared.payload(prepared.parts[index])
            call = calls[chain % len(calls)]
            future = call.future(payload, timeout=deadline, metadata=metadata)
            in_flight[chain] = (index, payload, call, future)
            future.add_done_callback(lambda _, chain=chain: completed.put(chain))

        for chain in range(len(chains)):
            start(chain)
        errors = {}  # part index -> GdnError
        while in_flight:
            chain = completed.get()
            index, payload, call, future = in_flight.pop(chain)
            try:
                try:
                    raw = future.result()
                except grpc.RpcError as e:  # retried (UNAVAILABLE) or raised as its GdnError
                    raw = call_with_retry(self.retry, lambda attempt: call(
                        payload, timeout=deadline, metadata=metadata), e)
                prepared.merge(index, raw, prepared.check(index, raw))
            except GdnError as e:
                errors[index] = e
                continue
            step[chain] += 1
            if step[chain] < len(chains[chain]) and not errors:
                start(chain)
        if errors:
            first = min(errors)
            raise self._split_error(errors[first], first, count) from None
        return prepared.result()

    # --- sessions as objects ---------------------------------------------
    def session(self, session_id: Optional[str] = None, *, create: bool = True):
        """A gdn_serve.Session tracking positions per layer. create=True makes a
        new session (id picked here when None, so a proxy can route it);
        create=False attaches to an existing one (positions from describe)."""
        from .session import Session
        if create:
            return Session(self, self.create_session(session_id or new_session_id()),
                           [0] * self.config.num_layers)
        return Session.attach(self, session_id)
