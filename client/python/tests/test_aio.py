"""gdn_serve.aio: the same calls over grpc.aio, pipelined (run with asyncio.run)."""

import asyncio

import numpy as np
import pytest

import gdn_serve
import gdn_serve.aio
from inputs import TOLERANCE, direct_inputs, rows
from reference import gdn_reference, relative_error, round_to
from gdn_serve import dtypes


def _args(x):
    return x["q"], x["k"], x["v"], x["g"], x["beta"]


def test_pipelined_calls_of_one_session(server_bf16):
    async def main():
        async with gdn_serve.aio.Client(server_bf16.address, timeout=60) as client:
            config = (await client.info()).config
            x = direct_inputs(np.random.default_rng(50), 12, config)
            s = await client.session()
            # Four calls of one (session, layer) in flight at once, in position order.
            outs = await asyncio.gather(*(s.forward(1, *_args(rows(x, b, b + 3)))
                                          for b in (0, 3, 6, 9)))
            assert s.positions[1] == 12
            assert (await client.describe_session(s.id)).layers[1].position == 12
            await s.close()
            return x, np.concatenate(outs)

    x, o = asyncio.run(main())
    r = {n: round_to(t, dtypes.BF16) if n in "qkv" else t for n, t in x.items()}
    ref, _ = gdn_reference(r["q"], r["k"], r["v"], r["g"], r["beta"])
    assert relative_error(o, ref) < TOLERANCE["bf16"]


def test_sessions_errors_export_import(server_bf16):
    async def main():
        async with gdn_serve.aio.Client(server_bf16.address, timeout=60) as client:
            config = (await client.info()).config
            x = direct_inputs(np.random.default_rng(51), 3, config)
            sid = await client.create_session()
            assert sid in await client.list_sessions()
            o1 = await client.forward(0, [(sid, 0, 2)], *_args(rows(x, 0, 2)))
            assert o1.shape == (2, 4, 64)
            with pytest.raises(gdn_serve.FailedPrecondition) as e:
                await client.forward(0, [(sid, 0, 2)], *_args(rows(x, 0, 2)))
            assert e.value.expected_position == 2
            with pytest.raises(gdn_serve.NotFound):
                await client.describe_session("nobody-here")
            data = await client.export_session(sid)
            copy = await client.import_session(data, "aio-copy-" + gdn_serve.new_session_id())
            child = await client.fork_session(copy)
            nxt = rows(x, 2, 3)
            a = await client.forward(0, [(sid, 2, 1)], *_args(nxt))
            b = await client.forward(0, [(child, 2, 1)], *_args(nxt))
            np.testing.assert_array_equal(a, b)
            for s in (sid, copy, child):
                await client.close_session(s)

    asyncio.run(main())
