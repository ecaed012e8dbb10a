"""The session snapshot file (".gdnsnap"), as gdn-cli export / import and the
server's --snapshot_dir write it (proto/session_file.h, client/session_snapshot.h).

Format, version 2 (written): the 8-byte magic b"GDNSNAP2", then the session's
SessionChunk messages, each as a varint length, the message bytes and the
CRC-32 of those bytes (zlib's crc32, 4 bytes little-endian): exactly the
stream ImportSession takes, the first chunk carrying the LayerConfig. A
checksum that does not match is DataLoss. Version 1 (b"GDNSNAP1", read only):
the same without checksums.

A Snapshot is the assembled form: per layer its position and the bytes of one
state page ([Hv, K, V] of the state dtype; empty for a zero state).
"""

import zlib
from dataclasses import dataclass, field
from typing import Iterable, List

from ._proto import gdn_pb2
from .errors import DataLoss, InvalidArgument
from .wire import encode_varint

__all__ = ["MAGIC", "MAGIC_V1", "FILE_CHUNK_BYTES", "LayerState", "Snapshot", "snapshot_from_chunks",
           "snapshot_to_chunks", "encode_file", "decode_file"]

MAGIC = b"GDNSNAP2"
MAGIC_V1 = b"GDNSNAP1"  # read only: no checksums
# Bytes of state per chunk in a file (gdn-cli's WriteSnapshotFile).
FILE_CHUNK_BYTES = 1 << 20


@dataclass
class LayerState:
    layer: int
    position: int
    data: bytes  # one state page ([Hv, K, V] of state_dtype); b"" = zero state


@dataclass
class Snapshot:
    session_id: str
    config: gdn_pb2.LayerConfig
    layers: List[LayerState] = field(default_factory=list)  # in the order the server sent them


def snapshot_from_chunks(chunks: Iterable[gdn_pb2.SessionChunk]) -> Snapshot:
    """Assembles chunks in stream order. InvalidArgument when pieces of a layer
    are missing, overlap or disagree on layer_bytes / position."""
    chunks = list(chunks)
    if not chunks:
        raise InvalidArgument("snapshot has no chunks")
    first = chunks[0]
    config = gdn_pb2.LayerConfig()
    if first.HasField("config"):
        config.CopyFrom(first.config)
    by_layer = {}
    order: List[int] = []
    for c in chunks:
        entry = by_layer.get(c.layer)
        if entry is None:
            entry = by_layer[c.layer] = [c.position, c.layer_bytes, []]
            order.append(c.layer)
        position, layer_bytes, pieces = entry
        if c.position != position or c.layer_bytes != layer_bytes:
            raise InvalidArgument("chunks of layer %d disagree on position / layer_bytes" % c.layer)
        have = sum(len(p) for p in pieces)
        if c.offset != have:
            raise InvalidArgument("layer %d: chunk at offset %d, expected %d" % (c.layer, c.offset, have))
        if have + len(c.data) > layer_bytes:
            raise InvalidArgument("layer %d: more than layer_bytes %d" % (c.layer, layer_bytes))
        pieces.append(c.data)
    layers = []
    for layer in order:
        position, layer_bytes, pieces = by_layer[layer]
        data = b"".join(pieces)
        if len(data) != layer_bytes:
            raise InvalidArgument("layer %d: %d of %d bytes" % (layer, len(data), layer_bytes))
        layers.append(LayerState(layer, position, data))
    return Snapshot(first.session_id, config, layers)


def snapshot_to_chunks(snapshot: Snapshot, max_chunk_bytes: int,
                       as_id: str = "") -> List[gdn_pb2.SessionChunk]:
    """Chunks of at most max_chunk_bytes of state each; the first carries the
    config; a zero-state layer is one chunk with layer_bytes 0. A non-empty
    `as_id` replaces the session id."""
    session_id = as_id or snapshot.session_id
    step = max(1, int(max_chunk_bytes))
    chunks = []
    for layer in snapshot.layers:
        offset = 0
        while True:
            piece = layer.data[offset:offset + step]
            chunks.append(gdn_pb2.SessionChunk(
                session_id=session_id, layer=layer.layer, position=layer.position,
                layer_bytes=len(layer.data), offset=offset, data=piece))
            offset += len(piece)
            if offset >= len(layer.data):
                break
    if not chunks:  # a session without layers still names itself
        chunks.append(gdn_pb2.SessionChunk(session_id=session_id))
    chunks[0].config.CopyFrom(snapshot.config)
    return chunks


def encode_file(snapshot: Snapshot) -> bytes:
    """The .gdnsnap bytes of a snapshot (chunks of FILE_CHUNK_BYTES, as gdn-cli writes)."""
    parts = [MAGIC]
    for c in snapshot_to_chunks(snapshot, FILE_CHUNK_BYTES):
        body = c.SerializeToString()
        parts.append(encode_varint(len(body)))
        parts.append(body)
        parts.append(zlib.crc32(body).to_bytes(4, "little"))
    return b"".join(parts)


def decode_file(data: bytes, name: str = "snapshot") -> Snapshot:
    """A .gdnsnap file's bytes -> Snapshot. InvalidArgument without the magic,
    DataLoss when a chunk is truncated or corrupt."""
    data = bytes(data)
    if not (data.startswith(MAGIC) or data.startswith(MAGIC_V1)):
        raise InvalidArgument("%s is not a gdn session snapshot (no %s magic)" % (name, MAGIC.decode()))
    checksums = data.startswith(MAGIC)
    chunks = []
    pos = len(MAGIC)
    while pos < len(data):
        size = 0
        shift = 0
        while True:
            if pos >= len(data) or shift > 28:
                raise DataLoss("%s: truncated after chunk %d" % (name, len(chunks)))
            byte = data[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if pos + size > len(data):
            raise DataLoss("%s: chunk %d claims %d bytes, more than the file holds "
                           "(truncated or corrupt)" % (name, len(chunks), size))
        body = data[pos:pos + size]
        pos += size
        if checksums:
            if pos + 4 > len(data):
                raise DataLoss("%s: chunk %d has no checksum (truncated)" % (name, len(chunks)))
            if zlib.crc32(body) != int.from_bytes(data[pos:pos + 4], "little"):
                raise DataLoss("%s: chunk %d fails its CRC-32 (the file is damaged)"
                               % (name, len(chunks)))
            pos += 4
        chunk = gdn_pb2.SessionChunk()
        try:
            chunk.ParseFromString(body)
        except Exception:  # protobuf's DecodeError
            raise DataLoss("%s: chunk %d is truncated or corrupt" % (name, len(chunks)))
        chunks.append(chunk)
    return snapshot_from_chunks(chunks)
