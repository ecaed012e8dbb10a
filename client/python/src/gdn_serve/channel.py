"""gRPC channels and the gdn.v1 method table shared by the sync and asyncio clients.

Forward is registered without (de)serializers: its request is the bytes
gdn_serve.wire writes and its response the raw bytes wire parses in place.
Every other method goes through the generated gdn_pb2 messages.
"""

from typing import Any, List, Optional, Sequence, Tuple, Union

import grpc

from ._proto import gdn_pb2
from .routing import ROUTE_HEADER, route_header_value, routing_key

__all__ = ["SERVICE", "METHODS", "channel_options", "connection_options", "make_channel",
           "make_aio_channel", "bind_methods", "open_channels", "Metadata", "call_metadata"]

SERVICE = "/gdn.v1.GdnService/"

# name -> (cardinality, request class or None for raw bytes, response class or None)
METHODS = {
    "Forward": ("unary_unary", None, None),
    "CreateSession": ("unary_unary", gdn_pb2.CreateSessionRequest, gdn_pb2.CreateSessionResponse),
    "CloseSession": ("unary_unary", gdn_pb2.CloseSessionRequest, gdn_pb2.CloseSessionResponse),
    "ForkSession": ("unary_unary", gdn_pb2.ForkSessionRequest, gdn_pb2.ForkSessionResponse),
    "DescribeSession": ("unary_unary", gdn_pb2.DescribeSessionRequest,
                        gdn_pb2.DescribeSessionResponse),
    "ListSessions": ("unary_unary", gdn_pb2.ListSessionsRequest, gdn_pb2.ListSessionsResponse),
    "CommitDraft": ("unary_unary", gdn_pb2.CommitDraftRequest, gdn_pb2.CommitDraftResponse),
    "ExportSession": ("unary_stream", gdn_pb2.ExportSessionRequest, gdn_pb2.SessionChunk),
    "ImportSession": ("stream_unary", gdn_pb2.SessionChunk, gdn_pb2.ImportSessionResponse),
    "GetServerInfo": ("unary_unary", gdn_pb2.ServerInfoRequest, gdn_pb2.ServerInfoResponse),
    "RegisterRegion": ("unary_unary", gdn_pb2.RegisterRegionRequest,
                       gdn_pb2.RegisterRegionResponse),
    "UnregisterRegion": ("unary_unary", gdn_pb2.UnregisterRegionRequest,
                         gdn_pb2.UnregisterRegionResponse),
    "ListRegions": ("unary_unary", gdn_pb2.ListRegionsRequest, gdn_pb2.ListRegionsResponse),
    "OpenChannel": ("unary_unary", gdn_pb2.OpenChannelRequest, gdn_pb2.OpenChannelResponse),
    "CloseChannel": ("unary_unary", gdn_pb2.CloseChannelRequest, gdn_pb2.CloseChannelResponse),
}

Metadata = Tuple[Tuple[str, str], ...]


# The HTTP/2 settings every end of gdn-serve uses for multi-MiB Forward
# messages (proto/grpc_transport.h): a stream window as large as the largest
# message, so a prefill is sent without waiting for window updates; large
# DATA frames; large socket reads.
TRANSPORT_OPTIONS = [("grpc.http2.lookahead_bytes", 64 << 20),
                     ("grpc.http2.max_frame_size", 1 << 20),
                     ("grpc.experimental.tcp_max_read_chunk_size", 4 << 20)]


def channel_options(max_message_bytes: int, extra: Sequence[Tuple[str, Any]] = ()) -> List[Tuple[str, Any]]:
    limit = min(int(max_message_bytes), 2 ** 31 - 1)
    return ([("grpc.max_send_message_length", limit),
             ("grpc.max_receive_message_length", limit)] + TRANSPORT_OPTIONS + list(extra))


def connection_options(index: int) -> List[Tuple[str, Any]]:
    """Arguments that give a channel a connection of its own: Forward connection
    `index` of a client (connections=N), never shared with its other channels
    (a local subchannel pool, and arguments unlike theirs)."""
    return [("grpc.use_local_subchannel_pool", 1), ("gdn.connection", int(index))]


def _pem(value: Optional[Union[bytes, str]]) -> Optional[bytes]:
    """PEM bytes, read from the file when given a path."""
    if isinstance(value, str):
        with open(value, "rb") as f:
            return f.read()
    return value


def _credentials(root_certificates: Optional[Union[bytes, str]], certificate_chain=None,
                 private_key=None):
    if (certificate_chain is None) != (private_key is None):
        raise ValueError("a client certificate needs its key, and a key its certificate")
    return grpc.ssl_channel_credentials(root_certificates=_pem(root_certificates),
                                        private_key=_pem(private_key),
                                        certificate_chain=_pem(certificate_chain))


def make_channel(target: str, *, root_certificates=None, max_message_bytes: int,
                 extra_options: Sequence[Tuple[str, Any]] = (),
                 certificate_chain=None, private_key=None) -> grpc.Channel:
    """A sync channel: TLS when root_certificates (PEM bytes or a file path) is given;
    certificate_chain and private_key (PEM bytes or paths) add a client certificate
    (mutual TLS)."""
    options = channel_options(max_message_bytes, extra_options)
    if root_certificates is None:
        return grpc.insecure_channel(target, options=options)
    return grpc.secure_channel(
        target, _credentials(root_certificates, certificate_chain, private_key), options=options)


def make_aio_channel(target: str, *, root_certificates=None, max_message_bytes: int,
                     extra_options: Sequence[Tuple[str, Any]] = (),
                     certificate_chain=None, private_key=None):
    """The grpc.aio form of make_channel (call from within an event loop)."""
    options = channel_options(max_message_bytes, extra_options)
    if root_certificates is None:
        return grpc.aio.insecure_channel(target, options=options)
    return grpc.aio.secure_channel(
        target, _credentials(root_certificates, certificate_chain, private_key), options=options)


def bind_methods(channel) -> dict:
    """name -> multicallable of `channel` (sync or aio) for every gdn.v1 method."""
    calls = {}
    for name, (kind, request_cls, response_cls) in METHODS.items():
        factory = getattr(channel, kind)
        calls[name] = factory(
            SERVICE + name,
            request_serializer=request_cls.SerializeToString if request_cls else None,
            response_deserializer=response_cls.FromString if response_cls else None)
    return calls


def open_channels(make, target: str, connections: int, *, extra_options=(), **channel_args):
    """A client's channels: (channel, forward_channels, calls, forward_calls).

    make: make_channel or make_aio_channel, given target, extra_options and
    channel_args. forward_channels: for connections > 1, Forward's other
    connections, a channel each (connection_options); forward_calls: Forward
    on the channel, then on each of those.
    """
    channel = make(target, extra_options=extra_options, **channel_args)
    calls = bind_methods(channel)
    forward_channels = [make(target, extra_options=list(extra_options) + connection_options(i),
                             **channel_args) for i in range(1, connections)]
    forward_calls = [calls["Forward"]] + [bind_methods(c)["Forward"] for c in forward_channels]
    return channel, forward_channels, calls, forward_calls


def call_metadata(base: Metadata, session_id: Optional[str] = None) -> Metadata:
    """base metadata plus, for a call naming a session, its x-gdn-route header."""
    if not session_id:
        return base
    return base + ((ROUTE_HEADER, route_header_value(routing_key(session_id))),)
