"""use_remote_gdn: run the GatedDeltaNet cores of a transformers model on gdn-server.

    model = AutoModelForCausalLM.from_pretrained(...)      # Qwen3-Next / Qwen3.5
    handle = gdn_serve.transformers.use_remote_gdn(model, gdn_serve.Client("host:port"))
    out = model.generate(**inputs, max_new_tokens=32)      # prefill and decode on the server
    handle.close()                                         # sessions closed, model restored

What it patches follows the installed transformers (run against 4.57.6 and
5.24.0, the code of 5.0.0 and 5.10.4 read; another major version is refused
with a message):

  - 4.57 .. 5.1x: each GatedDeltaNet module calls its instance attributes
    `chunk_gated_delta_rule` / `recurrent_gated_delta_rule` (q/k already
    repeated to Hv heads): those attributes are replaced, per module.
  - later 5.x: the module calls the module-level `torch_chunk_gated_delta_rule`
    / `torch_recurrent_gated_delta_rule` (q/k with Hqk heads): those names are
    replaced by a dispatcher that runs on the server only inside a patched
    module's forward (a context variable says which), so other models of the
    same class in the process are untouched.

Per call (server layer = index of the GDN module among the model's GDN layers):
batch row b is session b (created lazily, one per row); q/k go with Hqk heads
(every G-th head when the model repeated them); positions are tracked per
(row, layer). `initial_state is None` starts a new prompt: the sessions of the
old one are closed and new ones created. The recurrent state returned to the
model is a placeholder, int64 [B, 1, 1, 1] on the CPU holding (prompt number,
row), that the model only stores in its cache and hands back: a placeholder of another
prompt or rows reordered (beam search) are refused, never silently wrong.
The server must run gating "direct" with the model's Hqk / Hv / K / V.

regions ("auto", "cuda" or "off"): with the model on CUDA and a server that
runs --backend=cuda on this host (a unix: target or a loopback address),
q/k/v/g/beta and o go through registered CUDA staging buffers
(gdn_serve.staging) and never through host memory. "auto" does so when it
can and falls back to sending tensors inline, with one warning, when a
registration fails; "cuda" requires it (errors raise); "off" never does.

channel ("auto", "on" or "off"): with a server on this host, the layer calls
go through a same-host Forward channel (Client.open_forward_channel: shared
memory, no socket round trip per call), opened here and closed by
handle.close(). "auto" does so when it can (falling back to the Forward RPC,
with one warning, when the server refuses); "on" requires it; "off" never.
A client that already has a channel keeps it.
"""

import contextvars
import functools
import inspect
import sys
import warnings
from typing import Dict, List, Optional

from .errors import InvalidArgument, NotFound
from .remote_core import run_core
from .routing import new_session_id
from .staging import CudaStaging, StagingUnavailable, same_host

__all__ = ["use_remote_gdn", "RemoteGdnHandle", "SUPPORTED", "check_transformers_version"]

SUPPORTED = "transformers 4.57 to 5.x (run: 4.57.6, 5.24.0; read: 5.0.0, 5.10.4)"
GDN_CLASSES = ("Qwen3NextGatedDeltaNet", "Qwen3_5GatedDeltaNet", "Qwen3_5MoeGatedDeltaNet")
_CORE_NAMES = {"chunk": "torch_chunk_gated_delta_rule", "recurrent": "torch_recurrent_gated_delta_rule"}
_ATTR_NAMES = {"chunk": "chunk_gated_delta_rule", "recurrent": "recurrent_gated_delta_rule"}

_ACTIVE = contextvars.ContextVar("gdn_serve_remote_gdn_layer", default=None)
_GLOBAL_PATCHES: Dict[tuple, list] = {}  # (module name, function name) -> [original, users]
_ROW_BITS = 20


def check_transformers_version() -> str:
    """The installed transformers version; RuntimeError when it is not one we follow."""
    import transformers
    version = transformers.__version__
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:
        raise RuntimeError("gdn_serve.transformers: cannot read transformers version %r" % version)
    if not ((major == 4 and minor >= 57) or major == 5):
        raise RuntimeError("gdn_serve.transformers supports %s; installed: transformers %s. Its "
                           "GatedDeltaNet code may call the core differently: check "
                           "gdn_serve/transformers.py against it." % (SUPPORTED, version))
    return version


def _mechanism(module) -> str:
    """"attribute" or "global" (see the module docstring); RuntimeError for neither."""
    if all(name in module.__dict__ for name in _ATTR_NAMES.values()):
        return "attribute"
    code = inspect.unwrap(type(module).forward).__code__
    home = sys.modules[type(module).__module__]
    if all(n in code.co_names and hasattr(home, n) for n in _CORE_NAMES.values()):
        return "global"
    raise RuntimeError("gdn_serve.transformers: %s of transformers %s calls its core neither "
                       "through instance attributes nor through module-level %s; supported: %s"
                       % (type(module).__name__, check_transformers_version(),
                          " / ".join(_CORE_NAMES.values()), SUPPORTED))


def _dispatcher(original, kind: str):
    @functools.wraps(original)
    def dispatch(*args, **kwargs):
        active = _ACTIVE.get()
        if active is None:
            return original(*args, **kwargs)
        handle, layer = active
        return handle._core(layer, kind, *args, **kwargs)
    dispatch._gdn_serve_original = original
    return dispatch


class RemoteGdnHandle:
    """The patch of one model: its sessions, positions, and how to undo it."""

    def __init__(self, model, client, modules: List, regions: str = "auto", channel: str = "auto"):
        if regions not in ("auto", "cuda", "off"):
            raise InvalidArgument("regions: 'auto', 'cuda' or 'off', got %r" % (regions,))
        if channel not in ("auto", "on", "off"):
            raise InvalidArgument("channel: 'auto', 'on' or 'off', got %r" % (channel,))
        self.regions = regions
        self._staging = {}  # CUDA device -> CudaStaging, or None where it is not used
        self.client = client
        self.model = model
        self.modules = modules
        self.session_ids: Optional[List[str]] = None
        self.positions: List[List[int]] = []  # [row][server layer]
        self.prompt = 0
        self._placeholder_rows = None  # ((prompt, batch), the placeholder tensor)
        self._undo: List = []
        self.channel = None  # the ForwardChannel opened here, if any
        if channel != "off" and getattr(client, "_forward_channel", None) is None:
            self._open_channel(channel == "on")

    def _open_channel(self, required: bool) -> None:
        if not same_host(self.client.target):
            if required:
                raise InvalidArgument("channel='on' needs a server on this host, got %s"
                                      % self.client.target)
            return
        try:
            self.channel = self.client.open_forward_channel(slots=2)
        except Exception as e:  # an older server, another architecture, no /dev/shm
            if required:
                raise
            warnings.warn("gdn_serve: no same-host Forward channel (%s); layer calls use the "
                          "Forward RPC" % (e,))

    def __enter__(self) -> "RemoteGdnHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- sessions --------------------------------------------------------
    def reset(self) -> None:
        """Closes the current prompt's sessions (the next call starts a new prompt)."""
        for sid in self.session_ids or ():
            try:
                self.client.close_session(sid)
            except NotFound:  # expired on the server (idle timeout) or closed elsewhere
                pass
        self.session_ids = None
        self.positions = []

    def _new_prompt(self, batch: int) -> None:
        self.reset()
        self.prompt += 1
        group = new_session_id().replace("g-", "r-")
        self.session_ids = [self.client.create_session(new_session_id(group)) for _ in range(batch)]
        self.positions = [[0] * len(self.modules) for _ in range(batch)]

    def _placeholder(self, batch: int):
        """The placeholder of the current prompt's `batch` rows, on the CPU
        whatever the model's device: storing it (transformers copies it into
        its cache) and checking the one handed back never touch the GPU, so a
        layer call adds no copy or synchronisation of the model's stream."""
        import torch
        if self._placeholder_rows is None or self._placeholder_rows[0] != (self.prompt, batch):
            rows = torch.arange(batch, dtype=torch.int64) + (self.prompt << _ROW_BITS)
            self._placeholder_rows = ((self.prompt, batch), rows.reshape(batch, 1, 1, 1))
        return self._placeholder_rows[1]

    def _check_placeholder(self, state, batch: int) -> None:
        if self.session_ids is None or len(self.session_ids) != batch:
            raise InvalidArgument("a cached recurrent state for %d rows, but the current prompt "
                                  "has %s" % (batch, len(self.session_ids or ())))
        if tuple(state.shape) != (batch, 1, 1, 1):
            raise InvalidArgument("the cache holds a recurrent state of shape %s, not a gdn_serve "
                                  "placeholder: use_remote_gdn continues only states it made"
                                  % (list(state.shape),))
        want = [(self.prompt << _ROW_BITS) + b for b in range(batch)]
        got = state.reshape(-1).tolist()
        if got != want:
            if all(v >> _ROW_BITS == self.prompt for v in got):
                raise NotImplementedError("the cache rows were reordered (beam search?); "
                                          "use_remote_gdn supports greedy and sampled decoding")
            raise InvalidArgument("the cache belongs to an earlier prompt (its sessions are closed)")

    # --- the core --------------------------------------------------------
    def _core(self, layer: int, kind: str, query, key, value, g=None, beta=None, *args,
              initial_state=None, output_final_state=False, use_qk_l2norm_in_kernel=False,
              cu_seqlens=None, **unused):
        """Stands in for the model's chunk / recurrent core: (o like value, placeholder or None)."""
        if cu_seqlens is not None:
            raise NotImplementedError("use_remote_gdn: packed sequences (cu_seqlens) are not supported")
        batch = value.shape[0]
        if initial_state is None:
            if self.session_ids is None or len(self.session_ids) != batch or \
                    any(p[layer] for p in self.positions):
                self._new_prompt(batch)
        else:
            self._check_placeholder(initial_state, batch)
        sequences = [(sid, p[layer]) for sid, p in zip(self.session_ids, self.positions)]
        staging = self._staging_for(value.device) if value.is_cuda else None
        try:
            o, positions = run_core(self.client, layer, sequences, query, key, value, g, beta,
                                    use_qk_l2norm=use_qk_l2norm_in_kernel, staging=staging)
        except StagingUnavailable as e:  # raised before anything was sent
            if self.regions != "auto":
                raise
            self._staging_failed(value.device, e)
            o, positions = run_core(self.client, layer, sequences, query, key, value, g, beta,
                                    use_qk_l2norm=use_qk_l2norm_in_kernel)
        for row, position in zip(self.positions, positions):
            row[layer] = position
        return o, (self._placeholder(batch) if output_final_state else None)

    # --- CUDA staging (regions) ------------------------------------------------
    def _staging_for(self, device):
        """The CudaStaging of `device`, or None where tensors go inline."""
        if device in self._staging:
            return self._staging[device]
        staging = None
        if self.regions != "off":
            info = self.client.cached_info()
            why = None if info.backend == "cuda" else "the server runs --backend=%s" % info.backend
            if why is None and not same_host(self.client.target):
                why = "the server %s is not on this host" % self.client.target
            if why is None:
                staging = CudaStaging(self.client, device)
            elif self.regions == "cuda":
                raise InvalidArgument("use_remote_gdn(regions='cuda'): " + why)
        self._staging[device] = staging
        return staging

    def _staging_failed(self, device, error) -> None:
        """regions "auto" after a staging buffer failed (nothing was sent): warns
        once and sends this device's tensors inline from now on. (A failure of
        the call itself is raised, never retried inline: it may have applied.)"""
        warnings.warn("gdn_serve.transformers: CUDA regions unavailable (%s); sending tensors "
                      "inline" % error, RuntimeWarning, stacklevel=3)
        staging = self._staging.get(device)
        if staging is not None:
            staging.close()
        self._staging[device] = None

    # --- patching --------------------------------------------------------
    def _patch(self, module, layer: int) -> None:
        if "_gdn_serve_handle" in module.__dict__:
            raise InvalidArgument("%s is already patched by use_remote_gdn; close that handle first"
                                  % type(module).__name__)
        module._gdn_serve_handle = self
        self._undo.append(lambda: module.__dict__.pop("_gdn_serve_handle", None))
        if _mechanism(module) == "attribute":
            saved = {n: module.__dict__[n] for n in _ATTR_NAMES.values()}
            for kind, name in _ATTR_NAMES.items():
                setattr(module, name, functools.partial(self._core, layer, kind))
            self._undo.append(lambda: module.__dict__.update(saved))
            return
        home = sys.modules[type(module).__module__]
        for kind, name in _CORE_NAMES.items():
            entry = _GLOBAL_PATCHES.get((home.__name__, name))
            if entry is None:
                original = getattr(home, name)
                setattr(home, name, _dispatcher(original, kind))
                entry = _GLOBAL_PATCHES[(home.__name__, name)] = [original, 0]
            entry[1] += 1
            self._undo.append(functools.partial(_release_global, home, name))
        original_forward = module.forward

        @functools.wraps(original_forward)
        def forward(*args, **kwargs):
            token = _ACTIVE.set((self, layer))
            try:
                return original_forward(*args, **kwargs)
            finally:
                _ACTIVE.reset(token)

        module.forward = forward
        self._undo.append(lambda: module.__dict__.pop("forward", None))

    def close(self) -> None:
        """Closes the sessions, unregisters the staging buffers and restores the model."""
        try:
            self.reset()
            for staging in self._staging.values():
                if staging is not None:
                    staging.close()
            self._staging.clear()
            if self.channel is not None and self.client._forward_channel is self.channel:
                self.client.close_forward_channel()
            self.channel = None
        finally:
            while self._undo:
                self._undo.pop()()


def _release_global(home, name: str) -> None:
    entry = _GLOBAL_PATCHES[(home.__name__, name)]
    entry[1] -= 1
    if entry[1] == 0:
        setattr(home, name, entry[0])
        del _GLOBAL_PATCHES[(home.__name__, name)]


def use_remote_gdn(model, client, regions: str = "auto", channel: str = "auto") -> RemoteGdnHandle:
    """Patches `model`'s GatedDeltaNet cores to run on `client`'s server; returns the handle.

    The server must have gating "direct", at least as many layers as the
    model has GDN layers, and the model's Hqk, Hv, K and V. regions, channel:
    see the module docstring ("auto": CUDA staging buffers when the model and
    a same-host cuda server allow it; a same-host Forward channel).
    """
    check_transformers_version()
    modules = sorted((m for m in model.modules() if type(m).__name__ in GDN_CLASSES),
                     key=lambda m: m.layer_idx)
    if not modules:
        raise InvalidArgument("no %s layers in %s" % (" / ".join(GDN_CLASSES), type(model).__name__))
    c = client.config
    m = modules[0]
    model_shape = (m.num_k_heads, m.num_v_heads, m.head_k_dim, m.head_v_dim)
    server_shape = (c.num_qk_heads, c.num_v_heads, c.head_dim_k, c.head_dim_v)
    if model_shape != server_shape:
        raise InvalidArgument("model GDN shape (Hqk, Hv, K, V) = %s, server %s"
                              % (model_shape, server_shape))
    if c.num_layers < len(modules):
        raise InvalidArgument("model has %d GDN layers, server %d" % (len(modules), c.num_layers))
    if c.gating_mode != "direct":
        raise InvalidArgument("server gating=%s; use_remote_gdn sends the model's g and beta and "
                              "needs --gating=direct" % c.gating_mode)
    handle = RemoteGdnHandle(model, client, modules, regions, channel)
    try:
        for layer, module in enumerate(modules):
            handle._patch(module, layer)
    except BaseException:
        handle.close()
        raise
    return handle
