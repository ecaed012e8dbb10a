"""Same-host tensors through SYSTEM regions (POSIX shm) against the cpu
backend: references give o bit-equal to the inline path; errors are typed
and leave the session where it was. (CUDA regions: cuda_region_check.py,
run on the GPU machine by scripts/device/python_visit.sh.)"""

import asyncio

import numpy as np
import pytest

import gdn_serve
import gdn_serve.aio
from gdn_serve import dtypes
from gdn_serve.regions import ShmRegion
from gdn_serve.wire import RegionRef
from inputs import direct_inputs

NAMES = ("q", "k", "v", "g", "beta")


def wire_inputs(config, tokens, seed):
    """direct_inputs in the server's wire dtypes (q/k/v bf16 bits, fp16 or fp32; gates fp32)."""
    x = direct_inputs(np.random.default_rng(seed), tokens, config)
    act = config.activation_dtype
    for n in ("q", "k", "v"):
        x[n] = dtypes.float32_to_bf16_bits(x[n]) if act == dtypes.BF16 else \
            x[n].astype(dtypes.NUMPY_STORAGE[act])
    return x


def into_region(shm, x, names=NAMES):
    """Copies of x[n] for n in names as arrays in the region (the others as they are)."""
    out = dict(x)
    for n in names:
        out[n] = shm.empty(x[n].shape, x[n].dtype)
        out[n][...] = x[n]
    return out


def position_of(client, sid, layer=0):
    return {info.layer: info.position for info in client.describe_session(sid).layers}.get(layer, 0)


@pytest.fixture(autouse=True)
def close_new_sessions(server_bf16, server_fp32):
    """Closes the sessions a test made (the servers are shared by the whole run)."""
    clients = [gdn_serve.Client(s.address, timeout=60) for s in (server_bf16, server_fp32)]
    before = [set(c.list_sessions()) for c in clients]
    yield
    for c, old in zip(clients, before):
        for sid in set(c.list_sessions()) - old:
            c.close_session(sid)
        c.close()


@pytest.fixture(params=["bf16", "fp32"])
def region_client(request):
    server = request.getfixturevalue("server_" + request.param)
    with gdn_serve.Client(server.address, timeout=60) as c:
        yield c


def test_references_match_inline_bitwise(region_client):
    c = region_client
    x = wire_inputs(c.config, 7, 1)
    inline_sid, ref_sid, out_sid = (c.create_session() for _ in range(3))
    o_inline = c.forward(0, [(inline_sid, 0, 7)], *(x[n] for n in NAMES))
    with ShmRegion(c, 1 << 20) as shm:
        r = into_region(shm, x)
        o_ref = c.forward(0, [(ref_sid, 0, 7)], *(r[n] for n in NAMES))
        out = shm.empty(o_inline.shape, o_inline.dtype)
        o_out = c.forward(0, [(out_sid, 0, 7)], *(r[n] for n in NAMES), out=out)
        assert o_out is out
        np.testing.assert_array_equal(o_ref, o_inline)
        np.testing.assert_array_equal(out, o_inline)
        # a second call continues each session from its position
        y = wire_inputs(c.config, 3, 2)
        o2_inline = c.forward(0, [(inline_sid, 7, 3)], *(y[n] for n in NAMES))
        r2 = into_region(shm, y)
        out2 = shm.empty(o2_inline.shape, o2_inline.dtype)
        c.forward(0, [(out_sid, 7, 3)], *(r2[n] for n in NAMES), out=out2)
        np.testing.assert_array_equal(out2, o2_inline)


def test_inline_and_references_mix(client):
    x = wire_inputs(client.config, 5, 3)
    a, b = client.create_session(), client.create_session()
    o_inline = client.forward(0, [(a, 0, 3), (b, 0, 2)], *(x[n] for n in NAMES))
    c, d = client.create_session(), client.create_session()
    with ShmRegion(client, 1 << 20) as shm:
        r = into_region(shm, x, ("k", "g", "beta"))  # q, v inline
        o, positions = client.forward_with_positions(0, [(c, 0, 3), (d, 0, 2)],
                                                     *(r[n] for n in NAMES))
        assert positions == [3, 2]
        np.testing.assert_array_equal(o, o_inline)
        # a view that is not C-contiguous goes inline (converted), never as a reference
        wide = shm.empty((5, 2 * x["q"].shape[1], x["q"].shape[2]), x["q"].dtype)
        wide[:, ::2] = x["q"]
        e = client.create_session()
        o_strided = client.forward(0, [(e, 0, 5)], wide[:, ::2], *(x[n] for n in NAMES[1:]))
        np.testing.assert_array_equal(o_strided[:3], o_inline[:3])


def test_out_region_of_a_split_call(server_bf16):
    """Parts of a split call name consecutive rows of the same regions."""
    small = gdn_serve.Client(server_bf16.address, timeout=60, max_part_bytes=80_000)
    x = wire_inputs(small.config, 100, 4)  # q, k, v: 1 KiB a token
    a, b = small.create_session(), small.create_session()
    o_inline = small.forward(0, [(a, 0, 100)], *(x[n] for n in NAMES))
    with ShmRegion(small, 1 << 20) as shm:
        r = into_region(shm, x, ("g", "beta"))  # q, k, v inline: the call splits
        out = shm.empty(o_inline.shape, o_inline.dtype)
        prepared = small._prepare_forward(0, [(b, 0, 100)], {n: r[n] for n in NAMES}, out=out)
        assert len(prepared.parts) > 1
        assert small.forward(0, [(b, 0, 100)], *(r[n] for n in NAMES), out=out) is out
        np.testing.assert_array_equal(out, o_inline)
    small.close()


def _refused(client, shm, make_bad, error, match):
    """A call with one bad input raises `error`; the session stays at 0 and then
    takes a good call at position 0."""
    x = wire_inputs(client.config, 4, 5)
    s = client.session()
    r = into_region(shm, x)
    bad = dict(r)
    make_bad(bad, r)
    with pytest.raises(error, match=match) as raised:
        s.forward(0, *(bad[n] for n in NAMES))
    assert raised.value.code == error.code
    assert s.positions[0] == 0 and position_of(client, s.id) == 0
    o = s.forward(0, *(r[n] for n in NAMES))
    assert s.positions[0] == 4 and o.shape[0] == 4
    s.close()


def test_unknown_region_is_not_found(client):
    with ShmRegion(client, 1 << 20) as shm:
        _refused(client, shm, lambda bad, r: bad.update(
            q=RegionRef("no-such-region", 0, r["q"].nbytes)), gdn_serve.NotFound, "no-such-region")


def test_offset_past_the_end_is_invalid(client):
    with ShmRegion(client, 1 << 20) as shm:
        _refused(client, shm, lambda bad, r: bad.update(
            k=RegionRef(shm.name, shm.byte_size - 64, r["k"].nbytes)), gdn_serve.InvalidArgument,
            "outside region")


def test_size_mismatch_is_invalid(client):
    with ShmRegion(client, 1 << 20) as shm:
        _refused(client, shm, lambda bad, r: bad.update(
            v=RegionRef(shm.name, 0, r["v"].nbytes - 2)), gdn_serve.InvalidArgument,
            "expected %d bytes" % (4 * client.config.num_v_heads * client.config.head_dim_v * 2))


def test_nan_in_a_region_is_invalid(client):
    with ShmRegion(client, 1 << 20) as shm:
        x = wire_inputs(client.config, 4, 5)
        s = client.session()
        r = into_region(shm, x)
        r["g"].flat[3] = np.nan
        with pytest.raises(gdn_serve.InvalidArgument, match="g") as raised:
            s.forward(0, *(r[n] for n in NAMES))
        assert raised.value.code.name == "INVALID_ARGUMENT"
        assert s.positions[0] == 0 and position_of(client, s.id) == 0
        r["g"][...] = x["g"]
        s.forward(0, *(r[n] for n in NAMES))
        assert s.positions[0] == 4
        s.close()


def test_register_twice_already_exists(client):
    with ShmRegion(client, 4096) as shm:
        with pytest.raises(gdn_serve.AlreadyExists):
            client.register_shm_region(shm.name, shm.key, 4096)
        names = [info.name for info in client.list_regions()]
        assert names.count(shm.name) == 1


def test_list_and_unregister(client):
    with ShmRegion(client, 8192) as shm:
        info = {i.name: i for i in client.list_regions()}[shm.name]
        assert (info.key, info.byte_size, info.offset, info.calls_in_flight) == \
            (shm.key, 8192, 0, 0)
    assert shm.name not in [i.name for i in client.list_regions()]
    with pytest.raises(gdn_serve.NotFound):
        client.unregister_region(shm.name)
    assert client._region_table is None  # Forward no longer looks for references


def test_missing_shm_object_and_bad_key(client):
    with pytest.raises(gdn_serve.NotFound):
        client.register_shm_region("missing", "/gdn-no-such-object", 4096)
    with pytest.raises(gdn_serve.InvalidArgument, match="key"):
        client.register_shm_region("badkey", "no-slash", 4096)


def test_cuda_kind_on_the_cpu_backend(client):
    with pytest.raises(gdn_serve.FailedPrecondition, match="cuda"):
        client.register_region("gpu", "cuda", cuda_ipc_handle=bytes(64), byte_size=4096)
    assert "gpu" not in [i.name for i in client.list_regions()]


def test_register_cuda_region_without_cuda_is_a_clear_error(client):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here (cuda_region_check.py covers it)")
    with pytest.raises(gdn_serve.InvalidArgument, match="CUDA"):
        client.register_cuda_region(torch.zeros(4))


def test_torch_cpu_views_of_a_region_go_as_references(client):
    torch = pytest.importorskip("torch")
    x = wire_inputs(client.config, 3, 6)
    a, b = client.create_session(), client.create_session()
    o_inline = client.forward(0, [(a, 0, 3)], *(x[n] for n in NAMES))
    with ShmRegion(client, 1 << 20) as shm:
        r = into_region(shm, x)
        t = {n: torch.from_numpy(r[n]) for n in ("g", "beta")}
        prepared = client._prepare_forward(0, [(b, 0, 3)], dict(r, **t))
        assert all(type(buf) is RegionRef for buf in prepared.buffers)
        o = client.forward(0, [(b, 0, 3)], r["q"], r["k"], r["v"], t["g"], t["beta"])
        np.testing.assert_array_equal(o, o_inline)


def test_aio_regions(server_bf16):
    async def run():
        async with gdn_serve.aio.Client(server_bf16.address, timeout=60) as c:
            config = (await c.cached_info()).config
            x = wire_inputs(config, 4, 7)
            a, b = await c.create_session(), await c.create_session()
            o_inline = await c.forward(0, [(a, 0, 4)], *(x[n] for n in NAMES))
            shm = await ShmRegion.create_async(c, 1 << 20)
            async with shm:
                r = into_region(shm, x)
                out = shm.empty(o_inline.shape, o_inline.dtype)
                assert await c.forward(0, [(b, 0, 4)], *(r[n] for n in NAMES), out=out) is out
                np.testing.assert_array_equal(out, o_inline)
                assert shm.name in [i.name for i in await c.list_regions()]
            assert shm.name not in [i.name for i in await c.list_regions()]
    asyncio.run(run())


def test_torch_ipc_handles_are_unwrapped_to_cuda_ipc_mem_handles():
    # torch >= 2.5 shares [version][type][cudaIpcMemHandle_t]; older torch the
    # 64 bytes alone; an expandable segment ("e") holds no such handle.
    from gdn_serve.cuda_regions import _raw_ipc_handle
    raw = bytes(range(64))
    assert _raw_ipc_handle(raw) == raw
    assert _raw_ipc_handle(b"\x02c" + raw) == raw
    assert _raw_ipc_handle(b"\x03c" + raw) == raw
    assert _raw_ipc_handle(b"\x02e" + raw) is None
    assert _raw_ipc_handle(raw[:10]) is None
    assert _raw_ipc_handle(None) is None
