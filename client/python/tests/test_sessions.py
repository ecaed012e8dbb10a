"""Session methods: create / list / describe / close, fork (copy-on-write:
parent and child diverge), export / import round trips (.gdnsnap bytes)."""

import numpy as np
import pytest

import gdn_serve
from gdn_serve import snapshot
from inputs import TOLERANCE, direct_inputs, rows
from reference import gdn_reference, relative_error, round_to
from gdn_serve import dtypes


def _step(client, sid, layer, position, x):
    n = x["q"].shape[0]
    return client.forward(layer, [(sid, position, n)], x["q"], x["k"], x["v"], x["g"], x["beta"])


def test_create_list_describe_close(client):
    picked = client.create_session()
    assert picked
    mine = client.create_session("tenant7/chat-" + gdn_serve.new_session_id())
    assert mine.startswith("tenant7/chat-")
    assert {picked, mine} <= set(client.list_sessions())
    _step(client, mine, 1, 0, direct_inputs(np.random.default_rng(30), 4, client.config))
    d = client.describe_session(mine)
    assert d.session_id == mine
    by_layer = {layer.layer: layer for layer in d.layers}
    assert by_layer[1].position == 4 and by_layer[1].has_state
    assert by_layer.get(0) is None or by_layer[0].position == 0
    client.close_session(mine)
    assert mine not in client.list_sessions()
    with pytest.raises(gdn_serve.NotFound):
        client.close_session(mine)


def test_info_reports_config_and_limits(client):
    info = client.info()
    c = info.config
    assert (c.num_layers, c.num_qk_heads, c.num_v_heads, c.head_dim_k, c.head_dim_v) == (3, 2, 4, 64, 64)
    assert c.activation_dtype == dtypes.BF16 and c.gating_mode == "direct" and c.l2_norm_qk
    assert info.limits.max_message_bytes > 0 and info.backend == "cpu"


def test_fork_shares_then_diverges(client):
    config = client.config
    rng = np.random.default_rng(31)
    prefix = direct_inputs(rng, 6, config)
    a_next, b_next = direct_inputs(rng, 2, config), direct_inputs(rng, 2, config)
    parent = client.create_session()
    _step(client, parent, 0, 0, prefix)
    child = client.fork_session(parent)
    assert child != parent
    named = client.fork_session(parent, "fork-" + gdn_serve.new_session_id())
    assert named.startswith("fork-")
    o_child = _step(client, child, 0, 6, b_next)  # the child writes first: copy-on-write
    o_parent = _step(client, parent, 0, 6, a_next)
    o_named = _step(client, named, 0, 6, a_next)
    np.testing.assert_array_equal(o_parent, o_named)
    for tail, o in ((a_next, o_parent), (b_next, o_child)):
        full = {n: np.concatenate([prefix[n], tail[n]]) for n in prefix}
        r = {n: round_to(t, dtypes.BF16) if n in "qkv" else t for n, t in full.items()}
        ref, _ = gdn_reference(r["q"], r["k"], r["v"], r["g"], r["beta"])
        assert relative_error(o, ref[6:]) < TOLERANCE["bf16"]


def test_export_import_round_trip(client):
    config = client.config
    rng = np.random.default_rng(32)
    x = direct_inputs(rng, 7, config)
    nxt = direct_inputs(rng, 1, config)
    sid = client.create_session()
    _step(client, sid, 0, 0, rows(x, 0, 5))
    _step(client, sid, 2, 0, rows(x, 0, 7))
    data = client.export_session(sid)
    assert data.startswith(b"GDNSNAP2")
    snap = snapshot.decode_file(data)
    assert snap.session_id == sid and snap.config.num_layers == 3
    positions = {layer.layer: layer.position for layer in snap.layers}
    assert positions[0] == 5 and positions[2] == 7
    assert len([l for l in snap.layers if l.layer == 0][0].data) == 4 * 64 * 64 * 4  # fp32 page
    assert snapshot.encode_file(snap) == data  # gdn-cli's file layout, byte for byte

    copy = client.import_session(data, "imported-" + gdn_serve.new_session_id())
    assert client.describe_session(copy).layers[2].position == 7
    np.testing.assert_array_equal(_step(client, copy, 2, 7, nxt), _step(client, sid, 2, 7, nxt))
    client.close_session(sid)
    again = client.import_session(data)  # under its own id, now free again
    assert again == sid


def test_import_refuses_bad_files(client):
    with pytest.raises(gdn_serve.InvalidArgument, match="not a gdn session snapshot"):
        client.import_session(b"not a snapshot")
    sid = client.create_session()
    _step(client, sid, 0, 0, direct_inputs(np.random.default_rng(33), 2, client.config))
    data = client.export_session(sid)
    with pytest.raises(gdn_serve.DataLoss):
        client.import_session(data[:-100])


def test_session_objects_track_positions(client):
    config = client.config
    x = direct_inputs(np.random.default_rng(34), 10, config)
    with client.session() as s:
        assert s.positions == [0, 0, 0]
        s.forward(0, x["q"][:8], x["k"][:8], x["v"][:8], x["g"][:8], x["beta"][:8])
        s.forward(0, x["q"][8:9], x["k"][8:9], x["v"][8:9], x["g"][8:9], x["beta"][8:9])
        s.forward(2, x["q"][:3], x["k"][:3], x["v"][:3], x["g"][:3], x["beta"][:3])
        assert s.positions == [9, 0, 3]
        attached = client.session(s.id, create=False)
        assert attached.positions == [9, 0, 3]
        child = s.fork()
        assert child.positions == [9, 0, 3] and gdn_serve.routing_key(child.id) == gdn_serve.routing_key(s.id)
        o_child = child.forward(0, *(x[n][9:] for n in ("q", "k", "v", "g", "beta")))
        o_parent = s.forward(0, *(x[n][9:] for n in ("q", "k", "v", "g", "beta")))
        np.testing.assert_array_equal(o_child, o_parent)
        child.close()
        sid = s.id
    assert sid not in client.list_sessions()  # closed by the with block
