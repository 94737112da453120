"""Requests to object stores: failures that pass retried with backoff, and counted.

A bucket fails some requests and answers the same one a moment later: S3 says ``503
SlowDown`` when a prefix is busy, ``500 InternalError`` now and then; connections are
reset, answers stall or end early. obstore (object_store) can retry these itself, but
says nothing of it when the retry succeeds, so layoutkit retries instead (obstore's own
retries are off, :func:`layoutkit.storage.buckets.store_at`): every request layoutkit or
zarr makes to a bucket goes through :func:`retrying` or :func:`aretrying`, which retry
what :func:`transient` recognises, up to :data:`MAX_RETRIES` times with exponential
backoff and full jitter (AWS's advice for SlowDown), and count each retry by its cause
in :data:`RETRIES`. The commands report the count when they finish
(``3 requests to the object store were retried: 503 SlowDown 2, connection reset 1``);
a request that fails every try is one sentence naming the store, the cause and the tries.

What is not transient is raised at once: a missing object, access denied, a failed
condition (``If-None-Match``), an answer that is an answer.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

MAX_RETRIES = 3
"""Retries of one request after its first try (4 tries in all)."""
BACKOFF_FIRST = 0.2
BACKOFF_MAX = 5.0
"""The wait before retry k is uniform in [0, min(BACKOFF_MAX, BACKOFF_FIRST * 2**k)] seconds."""


class RetryCounts:
    """Retries made in this process, by cause (thread-safe); worker processes' counts are
    added to the driver's at the end of a run (:func:`layoutkit.schedulers.run_distributed`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, cause: str, n: int = 1) -> None:
        with self._lock:
            self._counts[cause] += n

    def merge(self, counts: dict[str, int]) -> None:
        with self._lock:
            self._counts.update(counts)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def reset(self) -> dict[str, int]:
        """The counts so far, and start again from none."""
        with self._lock:
            counts, self._counts = dict(self._counts), Counter()
            return counts

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def summary(self) -> str:
        """``3 requests to the object store were retried: 503 SlowDown 2, connection reset 1``, or ''."""
        counts = self.snapshot()
        n = sum(counts.values())
        if not n:
            return ""
        causes = ", ".join(f"{cause} {k}" for cause, k in sorted(counts.items(), key=lambda kv: -kv[1]))
        return f"{n} request{'s' if n > 1 else ''} to the object store {'were' if n > 1 else 'was'} retried: {causes}"


RETRIES = RetryCounts()


def transient(exc: BaseException) -> str | None:
    """The cause of a failed request worth trying again (``503 SlowDown``, ``connection
    reset``, ``no answer in time``, ``answer cut short``...), or None."""
    if isinstance(exc, (FileNotFoundError, PermissionError, asyncio.CancelledError)) or not isinstance(exc, Exception):
        return None
    from layoutkit.errors import LayoutkitError

    if isinstance(exc, LayoutkitError) or type(exc).__name__ in ("AlreadyExistsError", "PreconditionError",
                                                                 "NotModifiedError", "PermissionDeniedError",
                                                                 "UnauthenticatedError", "NotFoundError"):
        return None
    text = str(exc)
    status = re.search(r"non-2xx status code: (5\d\d|429)", text)
    if status is not None:
        code = re.search(r"<Code>(\w+)</Code>", text)
        return f"{status.group(1)}{f' {code.group(1)}' if code else ''}"
    if "IncompleteBody" in text or "IncompleteMessage" in text or "body error" in text:
        return "answer cut short"
    if re.search(r"kind: Timeout|TimedOut|timed out", text):
        return "no answer in time"
    if re.search(r"reset by peer|Connection reset|ConnectionReset|connection closed|broken pipe", text, re.I):
        return "connection reset"
    if "kind: Request" in text or "error sending request" in text:
        return "request not sent"
    return None


class RetriesExhaustedError(Exception):
    """A request that failed every try: the last failure's text, and the tries."""

    def __init__(self, last: BaseException, retries: int, seconds: float) -> None:
        super().__init__(f"{last} (in {seconds:.1f}s, after {retries} retries)")
        self.last = last
        self.retries = retries


def _wait(attempt: int) -> float:
    return random.uniform(0, min(BACKOFF_MAX, BACKOFF_FIRST * 2**attempt))


def _again(exc: Exception, attempt: int, t0: float) -> float:
    """The wait before trying ``exc``'s request again (counting the retry by its cause);
    raises ``exc`` when it is not transient, and :class:`RetriesExhaustedError` after the
    last try."""
    cause = transient(exc)
    if cause is None:
        raise exc
    if attempt == MAX_RETRIES:
        raise RetriesExhaustedError(exc, attempt, time.monotonic() - t0) from exc
    RETRIES.add(cause)
    return _wait(attempt)


def retrying(fn: Callable[[], T]) -> T:
    """``fn()``, tried again while it fails transiently (module docstring)."""
    t0 = time.monotonic()
    for attempt in range(MAX_RETRIES + 1):
        try:
            return fn()
        except Exception as exc:
            time.sleep(_again(exc, attempt, t0))
    raise AssertionError("unreachable")


async def aretrying(make: Callable[[], Awaitable[T]]) -> T:
    """``await make()``, made and awaited again while it fails transiently."""
    t0 = time.monotonic()
    for attempt in range(MAX_RETRIES + 1):
        try:
            return await make()
        except Exception as exc:
            await asyncio.sleep(_again(exc, attempt, t0))
    raise AssertionError("unreachable")


def retry_counts() -> dict[str, int]:
    """This process's counts, handed over and cleared (a worker's, to the driver)."""
    return RETRIES.reset()


__all__ = ["MAX_RETRIES", "RETRIES", "RetriesExhaustedError", "RetryCounts", "aretrying", "retry_counts",
           "retrying", "transient"]
