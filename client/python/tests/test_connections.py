"""Client(connections=N): a split Forward's chains of parts over N connections.

Against a server of its own (so the TCP connections it has accepted are this
client's only): the parts go over N distinct connections, o and positions are
those of the same call over one connection and of the float64 reference,
sequences cut by the split keep their order, the sync and asyncio clients
agree, a failing part raises naming the earliest failed part, and bad values
of `connections` are refused.
"""

import asyncio

import numpy as np
import pytest

import gdn_serve
import gdn_serve.aio
from gdn_serve import dtypes
from gdn_serve.forward_call import ForwardLayout, PreparedForward
from gdn_serve.split import part_chains
from conftest import _start
from inputs import TOLERANCE, direct_inputs
from reference import gdn_reference, relative_error, round_to

# A decode step of SESSIONS sessions (one token each) splits at the 80 KB
# limit into parts of ~13 whole sequences: each part a chain of its own. A
# prefill of CUT lengths cuts sequences at part boundaries: one chain.
SESSIONS = 40
CUT = [30, 5, 40, 5]
LIMIT = 80_000


@pytest.fixture(scope="module")
def server():
    s = _start({"activation_dtype": "bf16"})
    yield s
    s.stop()


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def _accepted_connections(port: int) -> int:
    """ESTABLISHED TCP sockets (IPv4 and IPv6) whose local port is `port`."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                        count += 1
        except FileNotFoundError:
            pass
    return count


def _config(server):
    with gdn_serve.Client(server.address) as c:
        return c.config


def _steps(server, count):
    """`count` decode steps' inputs, one token per session."""
    rng = np.random.default_rng(2)
    return [direct_inputs(rng, SESSIONS, _config(server)) for _ in range(count)]


def _decode(client, steps):
    """Fresh sessions, one Forward per step at positions 0, 1, ...: o of each."""
    ids = [client.create_session() for _ in range(SESSIONS)]
    return [client.forward(0, [(sid, t, 1) for sid in ids], x["q"], x["k"], x["v"], x["g"],
                           x["beta"]) for t, x in enumerate(steps)], ids


def _reference(steps, lengths_per_call):
    """o of every call, sessions from a zero state (float64)."""
    wire = dtypes.BF16
    rounded = [{n: (round_to(t, wire) if n in ("q", "k", "v") else t) for n, t in x.items()}
               for x in steps]
    outs = []
    for s in range(len(lengths_per_call[0])):
        # Session s's tokens over all calls, in order.
        rows = []
        for x, lengths in zip(rounded, lengths_per_call):
            at = sum(lengths[:s])
            rows.append({f: x[f][at:at + lengths[s]] for f in x})
        seq = {f: np.concatenate([r[f] for r in rows]) for f in rows[0]}
        o, _ = gdn_reference(*(seq[f] for f in ("q", "k", "v", "g", "beta")))
        outs.append(o)
    per_call = []
    for c, lengths in enumerate(lengths_per_call):
        done = sum(l[0] for l in lengths_per_call[:c])  # tokens before this call (equal lengths)
        per_call.append(np.concatenate([o[done:done + lengths[s]] for s, o in enumerate(outs)]))
    return per_call


def test_part_chains_of_these_calls(server):
    config = _config(server)
    layout = ForwardLayout(config)
    decode = PreparedForward(layout, LIMIT, 0, [("s%02d" % i, 0, 1) for i in range(SESSIONS)],
                             dict(direct_inputs(np.random.default_rng(1), SESSIONS, config)))
    assert len(decode.parts) >= 3
    assert part_chains(decode.parts) == [[i] for i in range(len(decode.parts))]
    cut = PreparedForward(layout, LIMIT, 0, [("s%d" % i, 0, n) for i, n in enumerate(CUT)],
                          dict(direct_inputs(np.random.default_rng(1), sum(CUT), config)))
    assert len(cut.parts) >= 6
    assert part_chains(cut.parts) == [list(range(len(cut.parts)))]


def test_parts_go_over_distinct_connections_and_match_one_connection(server):
    port = _port(server.address)
    steps = _steps(server, 3)
    with gdn_serve.Client(server.address, timeout=60, max_message_bytes=LIMIT) as one:
        o_one, _ = _decode(one, steps)
    before = _accepted_connections(port)
    with gdn_serve.Client(server.address, timeout=60, max_message_bytes=LIMIT,
                          connections=3) as three:
        o_three, ids = _decode(three, steps)
        # Two connections of their own (the first channel may reuse a
        # connection gRPC keeps for channels like it).
        assert 2 <= _accepted_connections(port) - before <= 3
        assert [three.describe_session(sid).layers[0].position for sid in ids] == [3] * SESSIONS
    reference = _reference(steps, [[1] * SESSIONS] * 3)
    for got, want, ref in zip(o_three, o_one, reference):
        np.testing.assert_array_equal(got, want)
        assert relative_error(got, ref) < TOLERANCE["bf16"]


def test_a_cut_prefill_keeps_its_order(server):
    x = direct_inputs(np.random.default_rng(3), sum(CUT), _config(server))
    outs = []
    for connections in (1, 3):
        with gdn_serve.Client(server.address, timeout=60, max_message_bytes=LIMIT,
                              connections=connections) as client:
            ids = [client.create_session() for _ in CUT]
            o, positions = client.forward_with_positions(
                0, [(sid, 0, n) for sid, n in zip(ids, CUT)], x["q"], x["k"], x["v"], x["g"],
                x["beta"])
            assert positions == CUT
            outs.append(o)
    np.testing.assert_array_equal(outs[1], outs[0])
    assert relative_error(outs[1], _reference([x], [CUT])[0]) < TOLERANCE["bf16"]


def test_aio_client_spreads_the_same_parts(server):
    steps = _steps(server, 2)

    async def run(connections):
        async with gdn_serve.aio.Client(server.address, timeout=60, max_message_bytes=LIMIT,
                                        connections=connections) as client:
            ids = [await client.create_session() for _ in range(SESSIONS)]
            return [await client.forward(0, [(sid, t, 1) for sid in ids], x["q"], x["k"],
                                         x["v"], x["g"], x["beta"])
                    for t, x in enumerate(steps)]

    for got, want in zip(asyncio.run(run(4)), asyncio.run(run(1))):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("aio", [False, True])
def test_a_failing_part_raises_naming_the_earliest(server, aio):
    x = _steps(server, 1)[0]

    async def forward_aio(sequences):
        async with gdn_serve.aio.Client(server.address, timeout=60, max_message_bytes=LIMIT,
                                        connections=2) as client:
            await client.forward(0, sequences, x["q"], x["k"], x["v"], x["g"], x["beta"])

    with gdn_serve.Client(server.address, timeout=60, max_message_bytes=LIMIT,
                          connections=2) as client:
        ids = [client.create_session() for _ in range(SESSIONS)]
        # A session that does not exist, in the second part: that part fails
        # NOT_FOUND; other parts may or may not have been applied by then
        # (their positions say which).
        sequences = [(sid, 0, 1) for sid in ids]
        sequences[SESSIONS // 2] = ("nobody-here", 0, 1)
        with pytest.raises(gdn_serve.NotFound, match=r"part 2 of \d+ of a split Forward"):
            if aio:
                asyncio.run(forward_aio(sequences))
            else:
                client.forward(0, sequences, x["q"], x["k"], x["v"], x["g"], x["beta"])
        for sid in ids:
            assert client.describe_session(sid).layers[0].position in (0, 1)


def test_bad_connections_are_refused(server):
    for bad in (0, -1, 65, 2.0, "2"):
        with pytest.raises(gdn_serve.InvalidArgument, match="connections"):
            gdn_serve.Client(server.address, connections=bad)
