"""flash-linear-attention's gated delta rule signatures, backed by server sessions.

For runners that call FLA directly: replace

    from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
by
    from gdn_serve.fla import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
    gdn_serve.fla.set_default_client(gdn_serve.Client("host:port"))

Same arguments and results (q, k [B, T, H, K]; v [B, T, Hv, V]; g, beta
[B, T, Hv]; cu_seqlens with B = 1; o [B, T, Hv, V] like v), computed by the
server. Both functions are the same operator there (the server picks its
prefill or decode kernel). The state is the difference:

    initial_state   None: fresh zero states (new sessions); a RemoteState (the
                    final_state of an earlier call): continue those sessions;
                    a tensor [N, Hv, K, V]: imported into new sessions
    final_state     a RemoteState (N sessions at `layer`) when
                    output_final_state, else None (the sessions are closed);
                    RemoteState.tensor() exports it as [N, Hv, K, V] float32

A RemoteState given as initial_state is consumed: the call advances its
sessions and returns them as the new final_state. To continue from one state
twice (speculation, beams), fork it first (RemoteState.fork: copy-on-write).
Extra keyword arguments: client= (else the default client), layer= (the
server layer of a fresh state; default 0).
"""

import weakref
from typing import List, Optional

import numpy as np

from . import dtypes
from .errors import InvalidArgument
from .remote_core import run_core, sequence_lengths
from .routing import new_session_id
from .snapshot import LayerState, Snapshot
from .snapshot import decode_file
from .tensors import is_torch

__all__ = ["set_default_client", "RemoteState", "chunk_gated_delta_rule",
           "fused_recurrent_gated_delta_rule"]

_default_client = None


def set_default_client(client) -> None:
    """The gdn_serve.Client the functions use when no client= is given."""
    global _default_client
    _default_client = client


def _close_all(client, ids: List[str]) -> None:
    for sid in ids:
        try:
            client.close_session(sid, timeout=5)
        except Exception:  # best effort at garbage collection
            pass


class RemoteState:
    """N server sessions holding one layer's recurrent state each (FLA's [N, Hv, K, V])."""

    def __init__(self, client, layer: int, session_ids: List[str], positions: List[int]):
        self.client = client
        self.layer = layer
        self.session_ids = list(session_ids)
        self.positions = list(positions)
        self.consumed = False
        self._finalizer = weakref.finalize(self, _close_all, client, list(session_ids))
        self._finalizer.atexit = False

    @property
    def shape(self):
        c = self.client.config
        return (len(self.session_ids), c.num_v_heads, c.head_dim_k, c.head_dim_v)

    def _take(self):
        """(layer, session ids, positions), handing the sessions over to a call."""
        if self.consumed:
            raise InvalidArgument("this RemoteState was already continued by a call (its sessions "
                                  "moved on); fork() it to continue from it twice")
        self.consumed = True
        self._finalizer.detach()
        return self.layer, self.session_ids, self.positions

    def _give_back(self) -> None:
        """Undoes _take after a call that failed (the server applied nothing)."""
        self.consumed = False
        self._finalizer = weakref.finalize(self, _close_all, self.client, list(self.session_ids))
        self._finalizer.atexit = False

    def fork(self) -> "RemoteState":
        """An independent copy (copy-on-write on the server)."""
        group = self.session_ids[0].split("/", 1)[0] if "/" in self.session_ids[0] else ""
        ids = [self.client.fork_session(sid, new_session_id(group)) for sid in self.session_ids]
        return RemoteState(self.client, self.layer, ids, self.positions)

    def tensor(self, like=None):
        """The states as float32 [N, Hv, K, V]: numpy, or a torch tensor on like's device."""
        hv, kdim, vdim = self.shape[1:]
        out = np.zeros(self.shape, np.float32)
        for i, sid in enumerate(self.session_ids):
            snap = decode_file(self.client.export_session(sid))
            for layer in snap.layers:
                if layer.layer == self.layer and layer.data:
                    if snap.config.state_dtype == "bf16":
                        page = dtypes.bf16_bits_to_float32(np.frombuffer(layer.data, np.uint16))
                    else:
                        page = np.frombuffer(layer.data, np.float32)
                    out[i] = page[:hv * kdim * vdim].reshape(hv, kdim, vdim)
        if like is not None and is_torch(like):
            import torch
            return torch.from_numpy(out).to(like.device)
        return out

    def close(self) -> None:
        """Closes the sessions (also done when the object is garbage collected)."""
        self._finalizer()


def _import_states(client, layer: int, state, count: int) -> List[str]:
    """A real initial_state [N, Hv, K, V] -> ids of N new sessions holding it at `layer`."""
    config = client.config
    shape = (count, config.num_v_heads, config.head_dim_k, config.head_dim_v)
    if tuple(state.shape) != shape:
        raise InvalidArgument("initial_state: shape %s, expected %s" % (list(state.shape), list(shape)))
    host = state.detach().float().cpu().numpy() if is_torch(state) else np.asarray(state, np.float32)
    group = new_session_id().replace("g-", "r-")
    ids = []
    for i in range(count):
        page = host[i]
        data = dtypes.float32_to_bf16_bits(page) if config.state_dtype == "bf16" else \
            np.ascontiguousarray(page, np.float32)
        # Every layer is sent; the others hold a zero state (no bytes).
        layers = [LayerState(n, 0, data.tobytes() if n == layer else b"")
                  for n in range(config.num_layers)]
        snap = Snapshot(new_session_id(group), config, layers)
        ids.append(client.import_session(snap))
    return ids


def _gated_delta_rule(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                      use_qk_l2norm_in_kernel, client, layer, head_first):
    if head_first:
        raise InvalidArgument("head_first=True is not supported: pass [B, T, H, D] tensors")
    client = client or _default_client
    if client is None:
        raise InvalidArgument("no client: pass client= or call gdn_serve.fla.set_default_client")
    count = len(sequence_lengths(v.shape[0], v.shape[1], cu_seqlens))
    if isinstance(initial_state, RemoteState):
        if len(initial_state.session_ids) != count:
            raise InvalidArgument("initial_state holds %d states for %d sequences"
                                  % (len(initial_state.session_ids), count))
        layer, ids, positions = initial_state._take()
    else:
        layer = 0 if layer is None else layer
        positions = [0] * count
        if initial_state is None:
            group = new_session_id().replace("g-", "r-")
            ids = [client.create_session(new_session_id(group)) for _ in range(count)]
        else:
            ids = _import_states(client, layer, initial_state, count)
    try:
        o, positions = run_core(client, layer, list(zip(ids, positions)), q, k, v, g, beta,
                                use_qk_l2norm=use_qk_l2norm_in_kernel, scale=scale,
                                cu_seqlens=cu_seqlens)
    except BaseException:
        if isinstance(initial_state, RemoteState):
            initial_state._give_back()
        else:
            _close_all(client, ids)
        raise
    if not output_final_state:
        _close_all(client, ids)
        return o, None
    return o, RemoteState(client, layer, ids, positions)


def chunk_gated_delta_rule(q, k, v, g, beta, scale: Optional[float] = None, initial_state=None,
                           output_final_state: bool = False, cu_seqlens=None,
                           head_first: bool = False, use_qk_l2norm_in_kernel: bool = False, *,
                           client=None, layer: Optional[int] = None, **unused):
    """FLA's chunk_gated_delta_rule on the server: (o [B, T, Hv, V], final_state or None)."""
    return _gated_delta_rule(q, k, v, g, beta, scale, initial_state, output_final_state,
                             cu_seqlens, use_qk_l2norm_in_kernel, client, layer, head_first)


def fused_recurrent_gated_delta_rule(q, k, v, g=None, beta=None, scale: Optional[float] = None,
                                     initial_state=None, output_final_state: bool = False,
                                     cu_seqlens=None, use_qk_l2norm_in_kernel: bool = False, *,
                                     client=None, layer: Optional[int] = None, **unused):
    """FLA's fused_recurrent_gated_delta_rule on the server (g None: no decay; beta None: 1)."""
    return _gated_delta_rule(q, k, v, g, beta, scale, initial_state, output_final_state,
                             cu_seqlens, use_qk_l2norm_in_kernel, client, layer, False)
