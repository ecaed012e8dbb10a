"""Forward through the same-host channel (Client.open_forward_channel) against
the cpu backend: o equals the Forward RPC's bit for bit, inline and with
tensors and o in a shm region, from several threads at once; errors are
typed and change nothing; a closed channel raises Unavailable."""

import threading

import numpy as np
import pytest

import gdn_serve
from gdn_serve.regions import ShmRegion
from inputs import direct_inputs
from test_regions import NAMES, into_region, position_of, wire_inputs


@pytest.fixture(autouse=True)
def close_new_sessions(server_bf16):
    c = gdn_serve.Client(server_bf16.address, timeout=60)
    before = set(c.list_sessions())
    yield
    for sid in set(c.list_sessions()) - before:
        c.close_session(sid)
    c.close()


def test_channel_matches_the_rpc_bitwise(server_bf16):
    with gdn_serve.Client(server_bf16.address, timeout=60) as rpc, \
            gdn_serve.Client(server_bf16.address, timeout=60) as ch:
        ch.open_forward_channel(slots=2)
        a, b = rpc.create_session(), rpc.create_session()
        position = 0
        for step, tokens in enumerate((1, 7, 130, 1)):
            x = wire_inputs(rpc.config, tokens, 10 + step)
            want = rpc.forward(0, [(a, position, tokens)], *(x[n] for n in NAMES))
            got, positions = ch.forward_with_positions(0, [(b, position, tokens)],
                                                       *(x[n] for n in NAMES))
            np.testing.assert_array_equal(got, want)
            position += tokens
            assert positions == [position]
        with ShmRegion(ch, 1 << 20) as shm:
            x = wire_inputs(rpc.config, 3, 99)
            want = rpc.forward(0, [(a, position, 3)], *(x[n] for n in NAMES))
            r = into_region(shm, x)
            out = shm.empty(want.shape, want.dtype)
            assert ch.forward(0, [(b, position, 3)], *(r[n] for n in NAMES), out=out) is out
            np.testing.assert_array_equal(out, want)


def test_channel_serves_threads_at_once(server_bf16):
    with gdn_serve.Client(server_bf16.address, timeout=60) as c:
        c.open_forward_channel(slots=2)  # four threads share two slots
        errors = []

        def run(seed):
            try:
                s = c.session()
                for step in range(10):
                    x = wire_inputs(c.config, 1, seed * 100 + step)
                    s.forward(0, *(x[n] for n in NAMES))
                assert s.positions[0] == 10 and position_of(c, s.id) == 10
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors


def test_channel_errors_are_typed_and_change_nothing(server_bf16):
    with gdn_serve.Client(server_bf16.address, timeout=60) as c:
        c.open_forward_channel(slots=1, response_capacity=4096)
        s = c.create_session()
        x = wire_inputs(c.config, 1, 5)
        q = x["q"].copy()
        q.view(np.uint16)[0, 0, 0] = 0x7FC0  # a bf16 NaN
        with pytest.raises(gdn_serve.InvalidArgument, match="nan"):
            c.forward(0, [(s, 0, 1)], q, *(x[n] for n in NAMES[1:]))
        big = wire_inputs(c.config, 40, 6)  # o does not fit 4 KiB
        with pytest.raises(gdn_serve.InvalidArgument, match="o_region"):
            c.forward(0, [(s, 0, 40)], *(big[n] for n in NAMES))
        assert position_of(c, s) == 0
        c.forward(0, [(s, 0, 1)], *(x[n] for n in NAMES))
        with pytest.raises(gdn_serve.FailedPrecondition) as retry:
            c.forward(0, [(s, 0, 1)], *(x[n] for n in NAMES))
        assert retry.value.expected_position == 1
        # closed on the server: Unavailable, nothing applied
        c._close_channel(c._forward_channel.name)
        with pytest.raises(gdn_serve.Unavailable):
            c.forward(0, [(s, 1, 1)], *(x[n] for n in NAMES))
        assert position_of(c, s) == 1
