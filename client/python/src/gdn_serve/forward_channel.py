"""The same-host Forward channel: Forward calls through shared memory, no socket.

A model runner on the server's host calls once per GDN layer; a gRPC round
trip costs more than the layer. Client.open_forward_channel() creates a
POSIX shared-memory object laid out as the server's proto/channel.h
describes, opens it on the server (OpenChannel) and from then on sends each
single-message Forward through one of its slots: the request bytes are
written into the slot, the server's thread (polling while calls keep
coming) picks them up, and the response comes back in the same slot. Same
bytes and semantics as the Forward RPC; with tensors in registered regions
(register_cuda_region, ShmRegion) a decode call moves a few hundred bytes.

Layout (little-endian): a 4096-byte header (magic "GDNCHAN1", version,
slot count, capacities, client pid, and the doorbell / server_waiting /
server_open words at 64-byte offsets), then per slot a 64-byte header
(state, client_waiting, request_bytes, response_bytes, status_code,
timeout_us) and its request and response areas. A slot goes FREE ->
REQUEST (here) -> TAKEN -> RESPONSE (server) -> FREE (here).

x86-64 only: the request bytes must be visible before the state word
that publishes them, which x86's store order guarantees for the plain
stores Python makes; elsewhere open_forward_channel raises.
"""

import ctypes
import mmap
import os
import platform
import queue
import secrets
import struct
import time
from typing import Optional

import grpc

from .errors import DeadlineExceeded, InvalidArgument, Unavailable, error_for_code
from .regions import create_shm_object, release_shm_object

__all__ = ["ForwardChannel", "channel_bytes"]

_MAGIC = b"GDNCHAN1"
_VERSION = 1
_HEADER_BYTES = 4096
_SLOT_HEADER_BYTES = 64
_DOORBELL, _SERVER_WAITING, _SERVER_OPEN = 64, 128, 192  # offsets in the header
_FREE, _REQUEST, _TAKEN, _RESPONSE = 0, 1, 2, 3
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_SYS_FUTEX = 202  # x86-64
_CODES = {c.value[0]: c for c in grpc.StatusCode}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _round64(n: int) -> int:
    return (n + 63) // 64 * 64


def channel_bytes(slots: int, request_capacity: int, response_capacity: int) -> int:
    """Size of the shm object for these sizes (capacities rounded up to 64)."""
    return _HEADER_BYTES + slots * (_SLOT_HEADER_BYTES + _round64(request_capacity)
                                    + _round64(response_capacity))


class _Word:
    """A 32-bit word of the mapping: aligned loads and stores, futex calls."""

    __slots__ = ("cell", "address")

    def __init__(self, mapping: mmap.mmap, offset: int):
        self.cell = ctypes.c_uint32.from_buffer(mapping, offset)
        self.address = ctypes.addressof(self.cell)

    def wait(self, expected: int, timeout: float) -> None:
        ts = _Timespec(int(timeout), int((timeout % 1) * 1e9))
        _libc.syscall(_SYS_FUTEX, ctypes.c_void_p(self.address), _FUTEX_WAIT, expected,
                      ctypes.byref(ts), None, 0)

    def wake(self) -> None:
        _libc.syscall(_SYS_FUTEX, ctypes.c_void_p(self.address), _FUTEX_WAKE, 0x7FFFFFFF,
                      None, None, 0)


class _Slot:
    __slots__ = ("index", "state", "client_waiting", "header", "request", "response")

    def __init__(self, mapping: mmap.mmap, index: int, base: int, request_capacity: int):
        self.index = index
        self.header = base
        self.state = _Word(mapping, base)
        self.client_waiting = _Word(mapping, base + 4)
        self.request = base + _SLOT_HEADER_BYTES
        self.response = self.request + request_capacity


class ForwardChannel:
    """The client's end of one channel; see the module docstring.

    Thread-safe: each call takes a free slot (a call waits for one when all
    `slots` are busy). Close with close() (CloseChannel, unmap, unlink).
    """

    def __init__(self, client, name: Optional[str] = None, *, slots: int = 4,
                 request_capacity: int = 1 << 20, response_capacity: int = 4 << 20,
                 spin: float = 0.002):
        if platform.machine() not in ("x86_64", "AMD64"):
            raise InvalidArgument("the Forward channel needs x86-64 (got %s); use the Forward RPC"
                                  % platform.machine())
        if not 1 <= slots <= 1024:
            raise InvalidArgument("slots must be in [1, 1024], got %d" % slots)
        self.client = client
        self.name = name or "ch-" + secrets.token_hex(4)
        self.spin = spin
        self.request_capacity = _round64(request_capacity)
        self.response_capacity = _round64(response_capacity)
        self.byte_size = channel_bytes(slots, request_capacity, response_capacity)
        self.shm_name, self.mapping = create_shm_object(self.byte_size)
        struct.pack_into("<8sIIQQi", self.mapping, 0, _MAGIC, _VERSION, slots,
                         self.request_capacity, self.response_capacity, os.getpid())
        self._doorbell = _Word(self.mapping, _DOORBELL)
        self._server_waiting = _Word(self.mapping, _SERVER_WAITING)
        self._server_open = _Word(self.mapping, _SERVER_OPEN)
        stride = _SLOT_HEADER_BYTES + self.request_capacity + self.response_capacity
        self._slots = [_Slot(self.mapping, i, _HEADER_BYTES + i * stride, self.request_capacity)
                       for i in range(slots)]
        self._free: "queue.SimpleQueue[_Slot]" = queue.SimpleQueue()
        for s in self._slots:
            self._free.put(s)
        self._opened = False
        try:
            client._open_channel(self.name, "/" + self.shm_name, self.byte_size)
            self._opened = True
        except BaseException:
            self._release()
            raise

    def call(self, payload, timeout: Optional[float]) -> bytes:
        """One Forward: `payload` is ForwardRequest bytes; returns the response
        bytes or raises the server's GdnError (DeadlineExceeded after
        `timeout`, Unavailable when no server serves the channel)."""
        size = len(payload)
        if size > self.request_capacity:
            raise InvalidArgument("the request of %d bytes exceeds the channel's slots of %d; "
                                  "name regions instead of inline tensors" %
                                  (size, self.request_capacity))
        until = None if timeout is None else time.monotonic() + timeout
        slot = self._free.get()
        try:
            return self._call(slot, payload, size, timeout, until)
        finally:
            self._free.put(slot)

    def _call(self, slot: _Slot, payload, size: int, timeout, until) -> bytes:
        m = self.mapping
        if slot.state.cell.value != _FREE:  # an earlier call timed out: drop its reply
            if not self._await(slot, until):
                raise DeadlineExceeded("the slot is still busy with an earlier call")
            slot.state.cell.value = _FREE
        if self._server_open.cell.value == 0:
            raise Unavailable("no server serves this channel (closed, or the server stopped)")
        m[slot.request:slot.request + size] = payload
        timeout_us = 0 if timeout is None or timeout >= 4000 else int(timeout * 1e6)
        struct.pack_into("<II", m, slot.header + 8, size, 0)
        struct.pack_into("<I", m, slot.header + 20, timeout_us)
        slot.state.cell.value = _REQUEST  # publishes the bytes above (x86 store order)
        self._doorbell.cell.value = (self._doorbell.cell.value + 1) & 0xFFFFFFFF
        if self._server_waiting.cell.value:
            self._doorbell.wake()
        if not self._await(slot, until):
            raise DeadlineExceeded("no reply through the channel within %ss" % timeout)
        response_bytes, code = struct.unpack_from("<Ii", m, slot.header + 12)
        response_bytes = min(response_bytes, self.response_capacity)
        data = m[slot.response:slot.response + response_bytes]
        slot.state.cell.value = _FREE
        if code != 0:
            raise error_for_code(_CODES.get(code, grpc.StatusCode.UNKNOWN),
                                 data.decode("utf-8", "replace"))
        return data

    def _await(self, slot: _Slot, until) -> bool:
        """Polls for `spin`, then sleeps on the slot's state; False at `until`."""
        state = slot.state
        spin_until = time.monotonic() + self.spin
        while True:
            if state.cell.value == _RESPONSE:
                return True
            now = time.monotonic()
            if until is not None and now >= until:
                return False
            if now < spin_until:
                continue
            slot.client_waiting.cell.value = 1
            seen = state.cell.value
            if seen != _RESPONSE:
                left = 0.1 if until is None else min(0.1, until - now)
                state.wait(seen, max(left, 0.0))
            slot.client_waiting.cell.value = 0

    def close(self) -> None:
        """CloseChannel on the server, then unmap and unlink (idempotent)."""
        if self._opened:
            self._opened = False
            try:
                self.client._close_channel(self.name)
            except Exception:  # the server may be gone; the object goes anyway
                pass
        self._release()

    def _release(self) -> None:
        if getattr(self, "_slots", None) is not None:
            self._slots = None  # drops the ctypes views before the mapping closes
            self._doorbell = self._server_waiting = self._server_open = None
            self._free = None
        release_shm_object(self.shm_name, getattr(self, "mapping", None))
        self.mapping = None

    def __enter__(self) -> "ForwardChannel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
