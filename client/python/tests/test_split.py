"""gdn_serve.split: the C++ client's split rule (tests/client/forward_split_test.cc)."""

import pytest

from gdn_serve import InvalidArgument
from gdn_serve.split import SLACK_BYTES, Part, part_chains, plan_parts


def test_fits_in_one_part():
    parts = plan_parts([("a", 3, 2), ("b", 0, 1)], 100, 100, 500, 1 << 20)
    assert parts == [(0, 3, None)]  # not split: the pieces are the sequences


def test_sequences_cut_at_part_boundaries_continue_at_their_position():
    limit = SLACK_BYTES + 1000 + 4 * 20000  # 4 rows of 20000 bytes per part
    parts = plan_parts([("a", 10, 6), ("b", 0, 3)], 20000, 10000, 1000, limit)
    assert [(p.begin, p.end) for p in parts] == [(0, 4), (4, 8), (8, 9)]
    assert parts[0].pieces == [(0, "a", 10, 4)]
    assert parts[1].pieces == [(0, "a", 14, 2), (1, "b", 0, 2)]
    assert parts[2].pieces == [(1, "b", 2, 1)]


def test_response_size_counts_too():
    limit = SLACK_BYTES + 1000 + 4 * 20000
    parts = plan_parts([("a", 0, 8)], 10, 20000, 1000, limit)  # o rows are the larger
    assert [(p.begin, p.end) for p in parts] == [(0, 4), (4, 8)]


def test_refusals():
    with pytest.raises(InvalidArgument, match="num_tokens 0"):
        plan_parts([("a", 0, 0)], 10, 10, 10, 1 << 20)
    with pytest.raises(InvalidArgument, match="does not fit"):
        plan_parts([("a", 0, 2)], 10 ** 6, 10, 10, SLACK_BYTES + 1000)


def test_part_chains_keep_cut_sequences_together():
    limit = SLACK_BYTES + 1000 + 4 * 20000  # 4 rows per part
    # a: 6 rows (cut), b: 2 (cut from a's part), c: 4 (a part of its own), d: 9 (cut twice).
    parts = plan_parts([("a", 0, 6), ("b", 0, 2), ("c", 0, 4), ("d", 0, 9)], 20000, 100, 1000,
                       limit)
    assert [[piece[0] for piece in p.pieces] for p in parts] == [[0], [0, 1], [2], [3], [3], [3]]
    assert part_chains(parts) == [[0, 1], [2], [3, 4, 5]]
    assert part_chains([Part(0, 3, None)]) == [[0]]  # not split
    assert part_chains([]) == []
