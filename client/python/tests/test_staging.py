"""gdn_serve.staging without a GPU: the buffer layout, the capacity buckets and
their eviction (a stand-in client records registrations; the CUDA path itself
runs in cuda_region_check.py on the GPU machine), and same_host."""

import types

import pytest

from gdn_serve import dtypes
from gdn_serve.staging import CudaStaging, StagingUnavailable, same_host

torch = pytest.importorskip("torch")


class FakeClient:
    """register_cuda_region / unregister_region of a client, recorded."""

    def __init__(self, fail=False):
        self.config = types.SimpleNamespace(activation_dtype=dtypes.BF16, num_qk_heads=2,
                                            num_v_heads=4, head_dim_k=64, head_dim_v=32)
        self.registered, self.unregistered, self.fail = [], [], fail

    def register_cuda_region(self, memory, name=None):
        if self.fail:
            raise RuntimeError("no IPC here")
        region = types.SimpleNamespace(name="r%d" % len(self.registered), memory=memory,
                                       base=memory.data_ptr())
        self.registered.append(region)
        return region

    def unregister_region(self, name):
        self.unregistered.append(name)


def test_views_are_aligned_contiguous_rows_of_one_buffer():
    client = FakeClient()
    staging = CudaStaging(client, "cpu", max_buffers=2)
    views = staging.views(5)  # capacity 8
    assert [n for n in views] == ["q", "k", "v", "g", "beta", "o"]
    assert views["q"].shape == (5, 2, 64) and views["q"].dtype == torch.bfloat16
    assert views["v"].shape == (5, 4, 32) and views["o"].shape == (5, 4, 32)
    assert views["g"].dtype == torch.float32 and views["beta"].shape == (5, 4)
    memory = client.registered[0].memory
    base = memory.data_ptr()
    for t in views.values():
        assert t.is_contiguous() and (t.data_ptr() - base) % 256 == 0
        assert t.untyped_storage().data_ptr() == memory.untyped_storage().data_ptr()
    ends = sorted((t.data_ptr() - base, t.data_ptr() - base + 8 * t[0].numel() * t.element_size())
                  for t in views.values())
    assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))  # capacity 8 rows each, no overlap
    assert ends[-1][1] <= memory.numel()


def test_capacities_are_reused_and_evicted():
    client = FakeClient()
    staging = CudaStaging(client, "cpu", max_buffers=2)
    staging.views(1)
    staging.views(1)
    staging.views(3)   # capacity 4
    staging.views(4)   # capacity 4 again
    assert len(client.registered) == 2 and not client.unregistered
    staging.views(9)   # capacity 16: the least recently used (1) goes
    assert client.unregistered == ["r0"]
    staging.close()
    assert sorted(client.unregistered) == ["r0", "r1", "r2"]


def test_slots_are_shaped_views_with_their_references_made_once():
    client = FakeClient()
    staging = CudaStaging(client, "cpu")
    slot = staging.slot(2, 3)  # 6 rows: capacity 8
    assert staging.slot(2, 3) is slot  # cached per call shape
    assert list(slot.inputs) == ["q", "k", "v", "g", "beta"]
    assert slot.inputs["q"].shape == (2, 3, 2, 64) and slot.inputs["beta"].shape == (2, 3, 4)
    assert slot.o.shape == (2, 3, 4, 32) and slot.o.dtype == torch.bfloat16
    region = client.registered[0]
    views = staging.views(6)
    for name, ref in slot.refs.items():
        t = slot.inputs.get(name, slot.o)
        assert ref.region == region.name
        assert ref.offset == t.data_ptr() - region.base == views[name].data_ptr() - region.base
        assert ref.byte_size == t.numel() * t.element_size() == 6 * views[name][0].numel() * \
            views[name].element_size()
    other = staging.slot(6, 1)  # the same rows in another shape: same memory, its own slot
    assert other is not slot and other.refs == slot.refs and other.inputs["v"].shape == (6, 1, 4, 32)
    assert len(client.registered) == 1


def test_too_large_and_failed_registration():
    staging = CudaStaging(FakeClient(), "cpu", max_bytes=1 << 16)
    assert staging.views(1 << 12) is None  # sent inline instead
    assert staging.slot(1 << 6, 1 << 6) is None
    with pytest.raises(StagingUnavailable, match="no IPC"):
        CudaStaging(FakeClient(fail=True), "cpu").views(2)


def test_same_host():
    for target in ("127.0.0.1:1", "localhost:1", "[::1]:1", "unix:/tmp/s", "dns:///localhost:1",
                   "ipv4:127.0.0.1:1"):
        assert same_host(target), target
    for target in ("10.0.0.2:1", "gpu-node:1", "dns:///example.com:443"):
        assert not same_host(target), target


class ShmStaging:
    """CudaStaging's interface over a registered shm region (CPU torch views):
    run_core's staged path against the cpu server. with_refs: slots carry
    their RegionRefs (as CudaStaging's do), else the client looks them up."""

    def __init__(self, shm, config, with_refs):
        self.shm, self.config, self.with_refs, self.calls = shm, config, with_refs, 0

    def slot(self, batch, tokens):
        import numpy as np
        from gdn_serve.staging import StagingSlot
        from gdn_serve.wire import RegionRef
        c = self.config
        self.shm.reset()
        self.calls += 1
        base = self.shm.region.base

        def view(dtype, *shape):
            array = self.shm.empty((batch, tokens) + shape, dtype)
            t = torch.from_numpy(array)
            return t.view(torch.bfloat16) if dtype == np.int16 else t
        views = {"q": view(np.int16, c.num_qk_heads, c.head_dim_k),
                 "k": view(np.int16, c.num_qk_heads, c.head_dim_k),
                 "v": view(np.int16, c.num_v_heads, c.head_dim_v),
                 "g": view(np.float32, c.num_v_heads), "beta": view(np.float32, c.num_v_heads),
                 "o": view(np.int16, c.num_v_heads, c.head_dim_v)}
        refs = {n: RegionRef(self.shm.name, t.data_ptr() - base, t.numel() * t.element_size())
                for n, t in views.items()}
        o = views.pop("o")
        return StagingSlot(views, o, refs if self.with_refs else None)


@pytest.mark.parametrize("with_refs", [False, True])
def test_run_core_through_staging_buffers_equals_inline(client, with_refs):
    """remote_core.run_core with staging: inputs copied into the buffers (converted
    there), references sent (the slot's own, or looked up), o read back from the
    buffer; bitwise the inline result."""
    from gdn_serve.regions import ShmRegion
    from gdn_serve.remote_core import run_core
    c = client.config
    gen = torch.Generator().manual_seed(3)
    b, t = 2, 5
    q = torch.randn(b, t, c.num_v_heads, c.head_dim_k, generator=gen)  # repeated to Hv heads
    k = torch.randn(b, t, c.num_v_heads, c.head_dim_k, generator=gen)
    v = torch.randn(b, t, c.num_v_heads, c.head_dim_v, generator=gen).to(torch.bfloat16)
    g = -torch.rand(b, t, c.num_v_heads, generator=gen) / 8
    beta = torch.rand(b, t, c.num_v_heads, generator=gen)
    inline_ids = [(client.create_session(), 0) for _ in range(b)]
    staged_ids = [(client.create_session(), 0) for _ in range(b)]
    o_inline, pos_inline = run_core(client, 0, inline_ids, q, k, v, g, beta, use_qk_l2norm=True)
    with ShmRegion(client, 1 << 20) as shm:
        staging = ShmStaging(shm, c, with_refs)
        table, refs = client._region_table, []
        find = table.ref_of
        table.ref_of = lambda *a: refs.append(find(*a)) or refs[-1]  # records each lookup
        o_staged, pos_staged = run_core(client, 0, staged_ids, q, k, v, g, beta,
                                        use_qk_l2norm=True, staging=staging)
        assert staging.calls == 1
        assert len(refs) == 6 and all(r is not None for r in refs)  # 5 inputs and o: references
        if with_refs:
            assert [r.offset for r in refs] == sorted(r.offset for r in refs)
        assert o_staged.dtype == v.dtype and o_staged.shape == v.shape
        assert torch.equal(o_staged, o_inline) and pos_staged == pos_inline == [t, t]
        shm.reset()
        o_staged.add_(1)  # its own memory, not the buffer's
    for sid, _ in inline_ids + staged_ids:
        client.close_session(sid)
