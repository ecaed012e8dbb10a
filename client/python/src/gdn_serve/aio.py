"""gdn_serve.aio: the same client over grpc.aio, so a runner can pipeline.

Every method of gdn_serve.Client is a coroutine here, with the same arguments,
results and typed errors; sessions are gdn_serve.aio.Session. Create the
client inside the event loop that uses it:

    async with gdn_serve.aio.Client("127.0.0.1:50051") as client:
        s = await client.session()
        o0, o1 = await asyncio.gather(              # two micro-batches in flight
            client.forward(0, [(a, pa, 1)], ...), client.forward(0, [(b, pb, 1)], ...))

Pipelining one session: a call at a position ahead of the stored one waits on
the server until the earlier calls fill the gap, so consecutive calls of a
(session, layer) may be in flight together (Session.forward reserves the
positions in call order before awaiting).
"""

import asyncio
from typing import Any, List, Optional, Sequence, Tuple

import grpc

from ._proto import gdn_pb2
from .channel import make_aio_channel, open_channels
from .client_core import ClientCore
from .errors import FailedPrecondition, GdnError, InvalidArgument, from_rpc_error
from .forward_call import SequenceTokens
from .regions import Region
from .retry import call_with_retry_async
from .routing import new_session_id, routing_key
from .session import _tokens_of, commit_plan, positions_from_description
from .split import part_chains

__all__ = ["Client", "Session"]


class Client(ClientCore):
    """The asyncio client; constructor as gdn_serve.Client."""

    def __init__(self, target: str, *, root_certificates=None, token: Optional[str] = None,
                 timeout: Optional[float] = None, channel_options: Sequence[Tuple[str, Any]] = (),
                 certificate_chain=None, private_key=None, **kwargs):
        super().__init__(target, root_certificates=root_certificates, token=token,
                         timeout=timeout, **kwargs)
        # connections > 1: Forward's other connections, a channel each.
        self._channel, self._forward_channels, self._calls, self._forward_calls = open_channels(
            make_aio_channel, target, self.connections, root_certificates=root_certificates,
            max_message_bytes=self.max_message_bytes, extra_options=channel_options,
            certificate_chain=certificate_chain, private_key=private_key)

    async def close(self) -> None:
        await self._channel.close()
        for channel in self._forward_channels:
            await channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _unary(self, method: str, request, session_id: Optional[str] = None,
                     timeout: Optional[float] = None, on_error=None):
        call = self._calls[method]
        metadata = self._md(session_id)
        deadline = self._timeout(timeout)

        async def attempt_once(attempt: int):
            try:
                return await call(request, timeout=deadline, metadata=metadata)
            except grpc.RpcError as e:
                if on_error is not None:
                    replacement = on_error(from_rpc_error(e), attempt)
                    if replacement is not None:
                        return replacement
                raise

        return await call_with_retry_async(self.retry, attempt_once)

    async def info(self, timeout: Optional[float] = None) -> gdn_pb2.ServerInfoResponse:
        return self._remember_info(await self._unary("GetServerInfo", gdn_pb2.ServerInfoRequest(),
                                                     timeout=timeout))

    async def cached_info(self) -> gdn_pb2.ServerInfoResponse:
        return self._info if self._info is not None else await self.info()

    async def create_session(self, session_id: Optional[str] = None,
                             timeout: Optional[float] = None) -> str:
        wanted = self._check_id("session_id", session_id)
        response = await self._unary(
            "CreateSession", gdn_pb2.CreateSessionRequest(session_id=wanted), wanted, timeout,
            lambda e, attempt: gdn_pb2.CreateSessionResponse(session_id=wanted)
            if self._created_anyway(e, attempt, wanted) else None)
        return response.session_id

    async def close_session(self, session_id: str, timeout: Optional[float] = None) -> None:
        await self._unary("CloseSession", gdn_pb2.CloseSessionRequest(session_id=session_id),
                          session_id, timeout,
                          lambda e, attempt: gdn_pb2.CloseSessionResponse()
                          if self._closed_anyway(e, attempt) else None)

    async def fork_session(self, parent: str, child: Optional[str] = None,
                           timeout: Optional[float] = None,
                           at_position: Optional[int] = None) -> str:
        wanted = self._check_id("child", child)
        request = gdn_pb2.ForkSessionRequest(parent_id=parent, child_id=wanted)
        if at_position is not None:
            request.at_position = at_position
        response = await self._unary(
            "ForkSession", request, parent,
            timeout, lambda e, attempt: gdn_pb2.ForkSessionResponse(session_id=wanted)
            if self._created_anyway(e, attempt, wanted) else None)
        return response.session_id

    async def describe_session(self, session_id: str, timeout: Optional[float] = None):
        return await self._unary("DescribeSession",
                                 gdn_pb2.DescribeSessionRequest(session_id=session_id),
                                 session_id, timeout)

    async def commit_draft(self, session_id: str, position: int, layers=(),
                           timeout: Optional[float] = None):
        """As Client.commit_draft."""
        return await self._unary("CommitDraft", gdn_pb2.CommitDraftRequest(
            session_id=session_id, position=position, layers=list(layers)), session_id, timeout)

    async def list_sessions(self, timeout: Optional[float] = None) -> List[str]:
        """As Client.list_sessions."""
        ids: List[str] = []
        token = ""
        while True:
            response = await self._unary("ListSessions",
                                         gdn_pb2.ListSessionsRequest(page_token=token),
                                         timeout=timeout)
            ids.extend(response.session_ids)
            token = response.next_page_token
            if not token:
                return ids

    async def export_session(self, session_id: str, timeout: Optional[float] = None) -> bytes:
        call = self._calls["ExportSession"]
        request = gdn_pb2.ExportSessionRequest(session_id=session_id)
        metadata = self._md(session_id)
        deadline = self._timeout(timeout)

        async def attempt_once(attempt: int):
            return [chunk async for chunk in call(request, timeout=deadline, metadata=metadata)]

        return self._export_bytes(await call_with_retry_async(self.retry, attempt_once))

    async def import_session(self, data, session_id: Optional[str] = None,
                             timeout: Optional[float] = None) -> str:
        chunks = self._import_chunks(await self.cached_info(), data, session_id)
        sid = self._import_id(chunks)
        call = self._calls["ImportSession"]
        metadata = self._md(sid)
        deadline = self._timeout(timeout)

        async def attempt_once(attempt: int):
            try:
                return (await call(iter(chunks), timeout=deadline, metadata=metadata)).session_id
            except grpc.RpcError as e:
                if self._created_anyway(from_rpc_error(e), attempt, sid):
                    return sid
                raise

        return await call_with_retry_async(self.retry, attempt_once)

    # --- regions: as gdn_serve.Client's ---------------------------------------
    async def register_region(self, name: str, kind: str, *, key: str = "",
                              cuda_ipc_handle: bytes = b"", device_id: int = 0, offset: int = 0,
                              byte_size: int = 0, timeout: Optional[float] = None) -> Region:
        request = self._region_request(name, kind, key=key, cuda_ipc_handle=cuda_ipc_handle,
                                       device_id=device_id, offset=offset, byte_size=byte_size)
        await self._register(request, timeout)
        return self._remember_region(Region(name, kind, byte_size, key=key, device_id=device_id,
                                            offset=offset))

    async def register_shm_region(self, name: str, key: str, byte_size: int, offset: int = 0, *,
                                  buffer=None, timeout: Optional[float] = None) -> Region:
        region = self._shm_region(name, key, byte_size, offset, buffer)
        await self._register(self._region_request(name, "system", key=key, offset=offset,
                                                  byte_size=byte_size), timeout)
        return self._remember_region(region)

    async def register_cuda_region(self, tensor_or_storage, name: Optional[str] = None,
                                   timeout: Optional[float] = None) -> Region:
        region, request = self._cuda_region(tensor_or_storage, name)
        await self._register(request, timeout)
        return self._remember_region(region)

    async def _register(self, request, timeout: Optional[float] = None) -> None:
        await self._unary("RegisterRegion", request, timeout=timeout,
                          on_error=lambda e, attempt: gdn_pb2.RegisterRegionResponse()
                          if self._registered_anyway(e, attempt) else None)

    async def unregister_region(self, name: str, timeout: Optional[float] = None) -> None:
        try:
            await self._unary("UnregisterRegion", gdn_pb2.UnregisterRegionRequest(name=name),
                              timeout=timeout,
                              on_error=lambda e, attempt: gdn_pb2.UnregisterRegionResponse()
                              if self._closed_anyway(e, attempt) else None)
        finally:
            self._forget_region(name)

    async def list_regions(self, timeout: Optional[float] = None) -> List[gdn_pb2.RegionInfo]:
        return list((await self._unary("ListRegions", gdn_pb2.ListRegionsRequest(),
                                       timeout=timeout)).regions)

    async def forward(self, layer: int, sequences: Sequence[SequenceTokens], q, k, v, g=None,
                      beta=None, *, a=None, b=None, a_log=None, dt_bias=None, out=None,
                      timeout: Optional[float] = None):
        """As gdn_serve.Client.forward: o [T, Hv, V] like v (or `out`)."""
        return (await self.forward_with_positions(layer, sequences, q, k, v, g, beta, a=a, b=b,
                                                  a_log=a_log, dt_bias=dt_bias, out=out,
                                                  timeout=timeout))[0]

    async def forward_with_positions(self, layer: int, sequences: Sequence[SequenceTokens], q, k,
                                     v, g=None, beta=None, *, a=None, b=None, a_log=None,
                                     dt_bias=None, out=None, timeout: Optional[float] = None):
        if self._layout is None:
            await self.cached_info()
        prepared = self._prepare_forward(
            layer, sequences,
            {"q": q, "k": k, "v": v, "g": g, "beta": beta, "a": a, "b": b, "a_log": a_log,
             "dt_bias": dt_bias}, out=out)
        if prepared.cuda_devices:  # the client's writes are complete before the call
            self._region_table.sync_cuda(prepared.cuda_devices)
        metadata = self._md(sequences[0][0])
        deadline = self.timeout if timeout is None else timeout
        count = len(prepared.parts)
        # The parts in chains (split.part_chains): one chain, the parts in
        # order; with connections > 1, chain c over connection c mod N, the
        # chains at once. A chain stops at its first failed part; the others
        # run to their end (their parts may be applied: positions tell); the
        # failure of the earliest part is raised.
        calls = self._forward_calls
        chains = part_chains(prepared.parts) if count > 1 and len(calls) > 1 else [
            list(range(count))]
        errors = {}  # part index -> GdnError

        async def run_chain(chain: int, indices: List[int]) -> None:
            call = calls[chain % len(calls)]
            for index in indices:
                payload = prepared.payload(prepared.parts[index])
                try:
                    try:
                        raw = await call(payload, timeout=deadline, metadata=metadata)
                    except grpc.RpcError as e:  # retried (UNAVAILABLE) or raised as its GdnError
                        raw = await call_with_retry_async(self.retry, lambda attempt: call(
                            payload, timeout=deadline, metadata=metadata), e)
                    if count == 1:
                        prepared.take_whole(raw)
                    else:
                        prepared.merge(index, raw, prepared.check(index, raw))
                except GdnError as e:
                    errors[index] = e
                    return

        if len(chains) == 1:
            await run_chain(0, chains[0])
        else:
            await asyncio.gather(*(run_chain(c, indices) for c, indices in enumerate(chains)))
        if errors:
            first = min(errors)
            raise self._split_error(errors[first], first, count) from None
        return prepared.result()

    async def session(self, session_id: Optional[str] = None, *, create: bool = True) -> "Session":
        """As gdn_serve.Client.session, returning a gdn_serve.aio.Session."""
        config = (await self.cached_info()).config
        if create:
            sid = await self.create_session(session_id or new_session_id())
            return Session(self, sid, [0] * config.num_layers)
        description = await self.describe_session(session_id)
        return Session(self, session_id, positions_from_description(description, config.num_layers))


class Session:
    """gdn_serve.Session over the asyncio client.

    forward reserves its position when called (before awaiting), so several
    calls of one layer may be in flight in order; a failed call leaves the
    positions to resync().
    """

    def __init__(self, client: Client, session_id: str, positions: List[int]):
        self.client = client
        self.id = session_id
        self.positions = list(positions)
        self.drafts = [0] * len(self.positions)  # open draft tokens per layer

    def __repr__(self) -> str:
        return "aio.Session(%r, positions=%r)" % (self.id, self.positions)

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def position(self, layer: int) -> int:
        return self.positions[layer]

    async def forward(self, layer: int, q, k, v, g=None, beta=None, *, a=None, b=None,
                      a_log=None, dt_bias=None, out=None, draft: bool = False,
                      timeout: Optional[float] = None):
        """As gdn_serve.Session.forward (draft=True: a speculative draft; then
        accept() or commit() before the layer's next call)."""
        n = _tokens_of(q, k, v)
        position = self.positions[layer]
        self.positions[layer] = position + n  # reserved: later calls queue behind this one
        spec = (self.id, position, n, True) if draft else (self.id, position, n)
        try:
            o = await self.client.forward(layer, [spec], q, k, v, g, beta,
                                          a=a, b=b, a_log=a_log, dt_bias=dt_bias, out=out,
                                          timeout=timeout)
            self.drafts[layer] = n if draft else 0
            return o
        except FailedPrecondition as e:
            if e.expected_position is not None:
                self.positions[layer] = e.expected_position
            raise
        except BaseException:
            if self.positions[layer] == position + n:  # nothing reserved after us
                self.positions[layer] = position
            raise

    def accept(self, layer: int, accepted: int) -> None:
        """As gdn_serve.Session.accept (local: the next forward commits)."""
        tokens = self.drafts[layer]
        if tokens == 0:
            raise FailedPrecondition("layer %d has no open draft" % layer)
        if not 1 <= accepted <= tokens:
            raise InvalidArgument("accepted %d of a draft of %d tokens" % (accepted, tokens))
        self.positions[layer] -= tokens - accepted
        self.drafts[layer] = 0

    async def commit(self, accepted: int, timeout: Optional[float] = None) -> None:
        """As gdn_serve.Session.commit: CommitDraft for every layer with a draft."""
        for position, layers in commit_plan(self.drafts, self.positions, accepted):
            await self.client.commit_draft(self.id, position, layers, timeout=timeout)
            for layer in layers:
                self.accept(layer, accepted)

    async def resync(self) -> None:
        description = await self.client.describe_session(self.id)
        self.positions = positions_from_description(description, len(self.positions))
        self.drafts = [0] * len(self.positions)
        for info in description.layers:
            if 0 <= info.layer < len(self.drafts):
                self.drafts[info.layer] = info.draft_tokens

    async def fork(self, child: Optional[str] = None) -> "Session":
        child_id = await self.client.fork_session(
            self.id, child or new_session_id(routing_key(self.id)))
        return Session(self.client, child_id, self.positions)

    async def export(self) -> bytes:
        return await self.client.export_session(self.id)

    async def close(self) -> None:
        await self.client.close_session(self.id)

