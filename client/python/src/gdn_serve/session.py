"""gdn_serve.Session: one server session and the position of each of its layers.

The server applies a Forward of (session, layer) only at the stored position,
so a Session fills the position in and advances it on success; the caller
never counts tokens:

    with client.session() as s:            # created; closed on exit
        o = s.forward(layer, q, k, v, g, beta)   # q [T, Hqk, K] ... o [T, Hv, V]

Retries after a timeout are safe: a position only advances when a call
succeeded, so a retried call goes with the same position, and if the earlier
try was applied after all the server refuses the retry (FailedPrecondition,
`expected_position` = position + T) instead of applying it twice; the session
then takes the server's position (the lost try's o cannot be recovered: the
caller re-runs from its own checkpoint or forks earlier).

A Session is owned by one thread at a time; the Client it uses is shared.
"""

from typing import List, Optional, Sequence

from .errors import FailedPrecondition, InvalidArgument
from .routing import new_session_id, routing_key

__all__ = ["Session", "forward_sessions", "positions_from_description"]


def positions_from_description(description, num_layers: int) -> List[int]:
    """Per-layer positions [num_layers] from a DescribeSessionResponse."""
    positions = [0] * num_layers
    for info in description.layers:
        if 0 <= info.layer < num_layers:
            positions[info.layer] = info.position
    return positions


def _tokens_of(*tensors) -> int:
    """T of a call: the first dim of the first of q, k, v that has a shape (an
    explicit wire.RegionRef has none)."""
    for name, t in zip("qkv", tensors):
        if hasattr(t, "shape"):
            if len(t.shape) != 3:
                raise InvalidArgument("%s: expected [T, H, D], got shape %s" % (name, list(t.shape)))
            return int(t.shape[0])
    raise InvalidArgument("q, k, v: at least one must be an array (region references carry no shape)")


def commit_plan(drafts: List[int], positions: List[int], accepted: int):
    """CommitDraft calls that keep the first `accepted` tokens of every open
    draft: [(position, layers)], one per draft start; InvalidArgument when a
    draft is shorter than `accepted`."""
    by_start = {}
    for layer, tokens in enumerate(drafts):
        if tokens:
            if not 1 <= accepted <= tokens:
                raise InvalidArgument("accepted %d of layer %d's draft of %d tokens"
                                      % (accepted, layer, tokens))
            by_start.setdefault(positions[layer] - tokens, []).append(layer)
    return [(start + accepted, layers) for start, layers in sorted(by_start.items())]


class Session:
    """A session id and its positions [num_layers]; see the module docstring."""

    def __init__(self, client, session_id: str, positions: List[int]):
        self.client = client
        self.id = session_id
        self.positions = list(positions)
        # Per layer: tokens of the open speculative draft (0: none).
        self.drafts = [0] * len(self.positions)

    @classmethod
    def attach(cls, client, session_id: str) -> "Session":
        """An existing session, positions read from DescribeSession."""
        description = client.describe_session(session_id)
        session = cls(client, session_id,
                      positions_from_description(description, client.config.num_layers))
        for info in description.layers:  # open speculative drafts
            if 0 <= info.layer < len(session.drafts):
                session.drafts[info.layer] = info.draft_tokens
        return session

    def __repr__(self) -> str:
        return "Session(%r, positions=%r)" % (self.id, self.positions)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def position(self, layer: int) -> int:
        return self.positions[layer]

    def forward(self, layer: int, q, k, v, g=None, beta=None, *, a=None, b=None, a_log=None,
                dt_bias=None, out=None, draft: bool = False, checkpoint_interval: int = 0,
                timeout: Optional[float] = None):
        """This session's next T = q.shape[0] tokens at `layer`: o [T, Hv, V] like v
        (or `out`, a view in a registered region).

        draft=True (T in 2..8): a speculative draft; the server keeps the state
        after each token until accept(layer, k) and the layer's next forward
        (or commit(k)) keep the first k.

        checkpoint_interval=N (a multiple of 64; the layer's position a multiple
        of 64): the server keeps the state at every multiple of N inside this
        call, for fork(at_position=).

        On FailedPrecondition the layer's position becomes the server's
        (`expected_position`) before the error is raised.
        """
        n = _tokens_of(q, k, v)
        spec = (self.id, self.positions[layer], n, bool(draft), int(checkpoint_interval)) \
            if draft or checkpoint_interval else (self.id, self.positions[layer], n)
        try:
            o, positions = self.client.forward_with_positions(
                layer, [spec], q, k, v, g, beta, a=a, b=b,
                a_log=a_log, dt_bias=dt_bias, out=out, timeout=timeout)
        except FailedPrecondition as e:
            self._take_server_position(layer, e)
            raise
        self.positions[layer] = positions[0]
        self.drafts[layer] = n if draft else 0
        return o

    def accept(self, layer: int, accepted: int) -> None:
        """Keeps the first `accepted` (1..T) tokens of `layer`'s last draft: the
        layer's next forward goes at the draft's position + accepted, which
        commits it on the server."""
        tokens = self.drafts[layer]
        if tokens == 0:
            raise FailedPrecondition("layer %d has no open draft" % layer)
        if not 1 <= accepted <= tokens:
            raise InvalidArgument("accepted %d of a draft of %d tokens" % (accepted, tokens))
        self.positions[layer] -= tokens - accepted
        self.drafts[layer] = 0

    def commit(self, accepted: int, timeout: Optional[float] = None) -> None:
        """Commits now, without a forward (end of generation): every layer with an
        open draft keeps its first `accepted` tokens (CommitDraft)."""
        for position, layers in commit_plan(self.drafts, self.positions, accepted):
            self.client.commit_draft(self.id, position, layers, timeout=timeout)
            for layer in layers:
                self.accept(layer, accepted)

    def _take_server_position(self, layer: int, error: FailedPrecondition) -> None:
        if error.expected_position is not None:
            self.positions[layer] = error.expected_position
        else:
            self.resync()

    def resync(self) -> None:
        """Reads every layer's position from DescribeSession."""
        description = self.client.describe_session(self.id)
        self.positions = positions_from_description(description, len(self.positions))
        self.drafts = [0] * len(self.positions)
        for info in description.layers:
            if 0 <= info.layer < len(self.drafts):
                self.drafts[info.layer] = info.draft_tokens

    def fork(self, child: Optional[str] = None, at_position: Optional[int] = None) -> "Session":
        """A child sharing this session's states (copy-on-write) and positions.
        None: an id of this session's routing key (same server behind a proxy).
        at_position: the child starts from the kept states there (every layer
        at that position; forward(..., checkpoint_interval=N) keeps them)."""
        child_id = self.client.fork_session(self.id, child or new_session_id(routing_key(self.id)),
                                            at_position=at_position)
        if at_position is None:
            return Session(self.client, child_id, self.positions)
        return Session(self.client, child_id, [at_position] * len(self.positions))

    def export(self) -> bytes:
        """The session as .gdnsnap bytes."""
        return self.client.export_session(self.id)

    def close(self) -> None:
        self.client.close_session(self.id)


def forward_sessions(client, layer: int, sessions: Sequence[Session], num_tokens: Sequence[int],
                     q, k, v, g=None, beta=None, *, a=None, b=None, a_log=None, dt_bias=None,
                     out=None, timeout: Optional[float] = None):
    """One Forward at `layer` over several sessions (a model runner's batch).

    num_tokens[i] new tokens of sessions[i], inputs packed in that order
    (q [T, Hqk, K], T = sum(num_tokens)). Advances every session on success;
    on FailedPrecondition resyncs every session of the call, then raises.
    """
    if len(sessions) != len(num_tokens):
        raise InvalidArgument("%d sessions, %d token counts" % (len(sessions), len(num_tokens)))
    sequences = [(s.id, s.positions[layer], n) for s, n in zip(sessions, num_tokens)]
    try:
        o, positions = client.forward_with_positions(layer, sequences, q, k, v, g, beta, a=a, b=b,
                                                     a_log=a_log, dt_bias=dt_bias, out=out,
                                                     timeout=timeout)
    except FailedPrecondition:
        for s in sessions:
            s.resync()
        raise
    for s, position in zip(sessions, positions):
        s.positions[layer] = position
    return o
