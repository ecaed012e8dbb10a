"""The .gdnsnap format: chunks <-> snapshot <-> file bytes (no server)."""

import pytest

from gdn_serve import DataLoss, InvalidArgument
from gdn_serve._proto import gdn_pb2
from gdn_serve.snapshot import (LayerState, Snapshot, decode_file, encode_file,
                                snapshot_from_chunks, snapshot_to_chunks)


def _snapshot():
    config = gdn_pb2.LayerConfig(num_layers=3, num_qk_heads=2, num_v_heads=4, head_dim_k=64,
                                 head_dim_v=64, state_dtype="fp32", gating_mode="direct")
    return Snapshot("s1", config, [LayerState(0, 5, bytes(range(256)) * 40),
                                   LayerState(1, 0, b""), LayerState(2, 9, b"\x01" * 10)])


def test_chunks_round_trip():
    snap = _snapshot()
    chunks = snapshot_to_chunks(snap, 1000, as_id="s2")
    assert chunks[0].HasField("config") and not chunks[1].HasField("config")
    assert [c.offset for c in chunks if c.layer == 0] == list(range(0, 10240, 1000))
    back = snapshot_from_chunks(chunks)
    assert back.session_id == "s2" and back.layers == snap.layers and back.config == snap.config


def test_file_round_trip():
    data = encode_file(_snapshot())
    assert data[:8] == b"GDNSNAP2"
    assert decode_file(data) == _snapshot()


def test_damage_is_reported():
    data = encode_file(_snapshot())
    with pytest.raises(InvalidArgument):
        decode_file(b"GDNSNAP0" + data[8:])
    with pytest.raises(DataLoss):
        decode_file(data[:-3])
    chunks = snapshot_to_chunks(_snapshot(), 1000)
    del chunks[2]
    with pytest.raises(InvalidArgument, match="offset"):
        snapshot_from_chunks(chunks)


def test_flipped_bytes_fail_their_checksum_and_version_1_still_reads():
    from gdn_serve.wire import encode_varint
    data = bytearray(encode_file(_snapshot()))
    data[len(data) // 2] ^= 0x10  # inside a state payload
    with pytest.raises(DataLoss, match="CRC-32"):
        decode_file(bytes(data))
    # Version 1: the same records without checksums (files written before).
    parts = [b"GDNSNAP1"]
    for c in snapshot_to_chunks(_snapshot(), 1 << 20):
        body = c.SerializeToString()
        parts += [encode_varint(len(body)), body]
    assert decode_file(b"".join(parts)) == _snapshot()
