"""Retry of calls the server did not apply: UNAVAILABLE only, bounded backoff.

The same policy as the C++ client (client/retry.h): a draining gdn-server (or
a proxy that reaches no server) answers UNAVAILABLE for every call it did not
apply, so such a call is safe to send again. Every other error is raised at
once: FAILED_PRECONDITION, NOT_FOUND, ... would only fail again.
"""

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Optional, TypeVar

import grpc

from .errors import GdnError, from_rpc_error

__all__ = ["RetryPolicy", "NO_RETRY", "call_with_retry", "call_with_retry_async"]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """max_attempts tries in all (1: never retry); waits initial_backoff,
    then multiplier times the previous wait, at most max_backoff, each jittered
    to 50..100%; no new try once max_total seconds passed since the first."""

    max_attempts: int = 12
    initial_backoff: float = 0.05
    max_backoff: float = 2.0
    multiplier: float = 2.0
    max_total: float = 10.0

    def backoff(self, attempt: int) -> float:
        """The wait after try `attempt` (1-based), before jitter."""
        return min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))


NO_RETRY = RetryPolicy(max_attempts=1)


def _should_retry(policy: RetryPolicy, error: GdnError, attempt: int, start: float,
                  wait: float) -> bool:
    return (error.code == grpc.StatusCode.UNAVAILABLE and attempt < policy.max_attempts
            and time.monotonic() + wait - start <= policy.max_total)


def call_with_retry(policy: RetryPolicy, call: Callable[[int], T],
                    first_error: Optional[grpc.RpcError] = None) -> T:
    """Runs call(attempt) (1-based) until it succeeds or raises a non-retryable error.

    grpc.RpcError is raised as its typed GdnError. first_error: the error of
    a first try made by the caller (the Forward hot path tries once without
    this wrapper); the retries then start at attempt 2.
    """
    start = time.monotonic()
    attempt = 1
    failed = first_error
    while True:
        if failed is None:
            try:
                return call(attempt)
            except grpc.RpcError as e:
                failed = e
        error = from_rpc_error(failed)
        failed = None
        wait = policy.backoff(attempt) * random.uniform(0.5, 1.0)
        if not _should_retry(policy, error, attempt, start, wait):
            raise error
        time.sleep(wait)
        attempt += 1


async def call_with_retry_async(policy: RetryPolicy, call: Callable[[int], Awaitable[T]],
                                first_error: Optional[grpc.RpcError] = None) -> T:
    """The asyncio form of call_with_retry."""
    start = time.monotonic()
    attempt = 1
    failed = first_error
    while True:
        if failed is None:
            try:
                return await call(attempt)
            except grpc.RpcError as e:
                failed = e
        error = from_rpc_error(failed)
        failed = None
        wait = policy.backoff(attempt) * random.uniform(0.5, 1.0)
        if not _should_retry(policy, error, attempt, start, wait):
            raise error
        await asyncio.sleep(wait)
        attempt += 1
