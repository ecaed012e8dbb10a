"""Speculative drafts from Python: Session.forward(draft=True), accept, commit
and Client.commit_draft, against the float64 reference on the fp32 server;
positions outside a draft are FailedPrecondition naming the allowed range."""

import numpy as np
import pytest

import gdn_serve
from inputs import direct_inputs, rows
from reference import gdn_reference, relative_error

TOLERANCE = 2e-4  # fp32 activations and state


def _args(x):
    return x["q"], x["k"], x["v"], x["g"], x["beta"]


def _concat(*parts):
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


@pytest.fixture
def fp32_client(server_fp32):
    with gdn_serve.Client(server_fp32.address, timeout=60) as c:
        yield c


@pytest.mark.parametrize("accepted", [1, 2, 4])
def test_draft_then_accept_matches_reference(fp32_client, accepted):
    client = fp32_client
    x = direct_inputs(np.random.default_rng(70 + accepted), 9, client.config)
    s = client.session()
    s.forward(0, *_args(rows(x, 0, 3)))
    o_draft = s.forward(0, *_args(rows(x, 3, 7)), draft=True)  # 4 draft tokens
    assert s.positions[0] == 7 and s.drafts[0] == 4
    assert client.describe_session(s.id).layers[0].draft_tokens == 4
    ref_draft, _ = gdn_reference(*_args(rows(x, 0, 7)))
    assert relative_error(o_draft, ref_draft[3:7]) < TOLERANCE

    s.accept(0, accepted)
    assert s.positions[0] == 3 + accepted
    o_next = s.forward(0, *_args(rows(x, 7, 9)))  # commits the draft on the server
    assert s.positions[0] == 5 + accepted
    kept = _concat(rows(x, 0, 3 + accepted), rows(x, 7, 9))
    ref_next, _ = gdn_reference(*_args(kept))
    assert relative_error(o_next, ref_next[-2:]) < TOLERANCE
    assert client.describe_session(s.id).layers[0].draft_tokens == 0
    s.close()


def test_positions_outside_a_draft_and_commit(fp32_client):
    client = fp32_client
    x = direct_inputs(np.random.default_rng(80), 8, client.config)
    s = client.session()
    s.forward(2, *_args(rows(x, 0, 3)), draft=True)
    for bad in (0, 4, 9):
        with pytest.raises(gdn_serve.FailedPrecondition) as e:
            client.forward(2, [(s.id, bad, 1)], *_args(rows(x, 3, 4)))
        assert "allowed positions [1, 3]" in str(e.value)
    with pytest.raises(gdn_serve.InvalidArgument):
        client.forward(2, [(s.id, 3, 1, True)], *_args(rows(x, 3, 4)))  # a 1-token draft

    s.commit(2)  # end of generation: keep 2 of 3
    assert s.positions[2] == 2 and s.drafts[2] == 0
    info = client.describe_session(s.id).layers[2]
    assert info.position == 2 and info.draft_tokens == 0
    response = client.commit_draft(s.id, 2, [2])  # a retry changes nothing
    assert list(response.layers) == []
    o = s.forward(2, *_args(rows(x, 3, 4)))
    ref, _ = gdn_reference(*_args(_concat(rows(x, 0, 2), rows(x, 3, 4))))
    assert relative_error(o, ref[-1:]) < TOLERANCE
    s.close()


def test_aio_draft_accept_and_commit(server_fp32):
    import asyncio

    import gdn_serve.aio

    async def main():
        async with gdn_serve.aio.Client(server_fp32.address, timeout=60) as client:
            x = direct_inputs(np.random.default_rng(90), 8, (await client.info()).config)
            s = await client.session()
            o_draft = await s.forward(1, *_args(rows(x, 0, 5)), draft=True)
            ref, _ = gdn_reference(*_args(rows(x, 0, 5)))
            assert relative_error(o_draft, ref) < TOLERANCE
            s.accept(1, 3)
            o = await s.forward(1, *_args(rows(x, 5, 7)), draft=True)  # accepts 3, drafts 2
            assert s.positions[1] == 5 and s.drafts[1] == 2
            ref, _ = gdn_reference(*_args(_concat(rows(x, 0, 3), rows(x, 5, 7))))
            assert relative_error(o, ref[-2:]) < TOLERANCE
            await s.commit(1)
            assert s.positions[1] == 4 and s.drafts[1] == 0
            assert (await client.describe_session(s.id)).layers[1].position == 4
            await s.close()

    asyncio.run(main())
