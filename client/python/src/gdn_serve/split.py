"""Splitting a Forward that is larger than one gRPC message into parts sent in order.

The same rule as the C++ client (client/forward_split.cc): every tensor except
a_log / dt_bias is packed over tokens, [T, ...] row-major, so a range of rows
is a range of bytes. A part takes rows [begin, end) of the packed tokens; a
sequence cut by a part boundary appears in both parts, the second piece at
position + (tokens already sent). Sending the parts in order computes exactly
what the one big call would have.

A part's request and its response (o has the bytes of v) must each fit in
max_message_bytes, with SLACK_BYTES left for the fixed fields.
"""

from typing import List, NamedTuple, Optional, Sequence, Tuple

from .errors import InvalidArgument

__all__ = ["SLACK_BYTES", "Part", "plan_parts", "part_chains"]

# Bytes left for a message's fixed fields (ids, shapes, specs); as in C++.
SLACK_BYTES = 64 * 1024


class Part(NamedTuple):
    """Rows [begin, end) of the packed tokens and the sequence pieces they hold.

    pieces: [(index of the sequence in the original call, session_id, position, num_tokens)];
    None for the one part of a call that is not split (its pieces are the sequences).
    """

    begin: int
    end: int
    pieces: Optional[List[Tuple[int, str, int, int]]]


def plan_parts(sequences: Sequence[Tuple[str, int, int]], request_row_bytes: int,
               response_row_bytes: int, fixed_bytes: int, max_message_bytes: int,
               total: Optional[int] = None) -> List[Part]:
    """The parts of a Forward over `sequences` [(session_id, position, num_tokens)].

    request_row_bytes: bytes per token row of all token-packed request tensors.
    response_row_bytes: bytes per token row of o.
    fixed_bytes: everything else of the whole request (specs, headers, a_log, dt_bias).
    total: the sum of num_tokens when the caller checked them already.
    One part when the whole call fits. InvalidArgument when a num_tokens < 1
    or a single token does not fit.
    """
    if total is None:
        total = 0
        for spec in sequences:
            session_id, num_tokens = spec[0], spec[2]
            if num_tokens < 1:
                raise InvalidArgument("sequence '%s' has num_tokens %d" % (session_id, num_tokens))
            total += num_tokens
    request_bytes = fixed_bytes + total * request_row_bytes
    response_bytes = total * response_row_bytes + SLACK_BYTES
    if total == 0 or (request_bytes <= max_message_bytes and response_bytes <= max_message_bytes):
        return [Part(0, total, None)]
    row_bytes = max(request_row_bytes, response_row_bytes)
    budget = max_message_bytes - fixed_bytes - SLACK_BYTES
    rows_per_part = total if row_bytes == 0 else budget // row_bytes
    if rows_per_part < 1:
        raise InvalidArgument(
            "one token (%d bytes + %d bytes of other fields) does not fit in a message of %d bytes"
            % (row_bytes, fixed_bytes + SLACK_BYTES, max_message_bytes))
    parts: List[Part] = []
    seq = 0
    taken = 0  # tokens of sequence `seq` already in parts
    for begin in range(0, total, rows_per_part):
        end = min(total, begin + rows_per_part)
        pieces = []
        row = begin
        while row < end:
            session_id, position, num_tokens = sequences[seq][:3]
            take = min(num_tokens - taken, end - row)
            if take != num_tokens and any(sequences[seq][3:5]):  # draft / checkpoint_interval
                raise InvalidArgument("%s sequence '%s' would be split across messages"
                                      % ("draft" if sequences[seq][3] else "state-keeping",
                                         session_id))
            pieces.append((seq, session_id, position + taken, take))
            row += take
            taken += take
            if taken == num_tokens:
                seq += 1
                taken = 0
        parts.append(Part(begin, end, pieces))
    return parts


def part_chains(parts: Sequence[Part]) -> List[List[int]]:
    """The parts' indices grouped into chains that must go in order.

    A part whose first piece continues the previous part's last sequence (a
    sequence cut by the split) joins the previous part's chain; any other
    part starts a chain. Different chains hold different sequences, so they
    may go at once, over different connections (Client(connections=N)).
    """
    chains: List[List[int]] = []
    for index, part in enumerate(parts):
        previous = parts[index - 1].pieces if index > 0 else None
        if previous and part.pieces and part.pieces[0][0] == previous[-1][0]:
            chains[-1].append(index)
        else:
            chains.append([index])
    return chains
