"""Simulated object storage: count every read a reader makes, and optionally delay it.

One model for both formats, so HDF5 and Zarr variants are measured alike:

- :class:`CountingFile` is a file object h5py can open (``h5py.File(fileobj)``): every
  read HDF5 makes, metadata or data, with or without its page buffer, is one request.
- :class:`CountingStore` wraps a Zarr store: every ``get`` (whole object or byte range)
  and every range of a ``get_partial_values`` is one request.

Each request costs ``latency + bytes / bandwidth`` seconds when a :class:`LatencyModel`
is given, the way a ranged GET does on object storage; requests in flight together
overlap (:func:`overlapped`), as they do on S3. Requests and bytes are counted whether or
not there is a delay.
"""

from __future__ import annotations

import asyncio
import io
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from zarr.abc.store import Store, SuffixByteRequest
from zarr.storage import WrapperStore

from layoutkit.errors import InvalidOptionError, LayoutkitError, StoreReadError
from layoutkit.storage.buckets import MAX_IN_FLIGHT


@dataclass(frozen=True)
class LatencyModel:
    """Seconds one request costs: ``latency + nbytes / bandwidth`` (bandwidth in bytes/s,
    0 = unlimited)."""

    latency: float = 0.0
    bandwidth: float = 0.0

    def __post_init__(self) -> None:
        if self.latency < 0:
            raise InvalidOptionError(f"Expected a latency of 0 or more. Got {self.latency}.")
        if self.bandwidth < 0:
            raise InvalidOptionError(f"Expected a bandwidth of 0 (unlimited) or more. Got {self.bandwidth}.")

    def cost(self, nbytes: int) -> float:
        return self.latency + (nbytes / self.bandwidth if self.bandwidth else 0.0)

    def round_trip(self, sizes: Sequence[int], in_flight: int = MAX_IN_FLIGHT) -> float:
        """Seconds a round of requests sent together takes: they overlap, as on S3, at
        most ``in_flight`` at a time, each next one taking the first free slot."""
        return overlapped([self.cost(n) for n in sizes], in_flight)


def overlapped(costs: Sequence[float], in_flight: int = MAX_IN_FLIGHT) -> float:
    """The wall time of requests costing ``costs`` seconds, sent together, at most
    ``in_flight`` at a time, each taken up by the first slot free (in the order sent)."""
    if len(costs) <= in_flight:
        return max(costs, default=0.0)
    import heapq

    slots = [0.0] * in_flight
    for cost in costs:
        heapq.heappush(slots, heapq.heappop(slots) + cost)
    return max(slots)


@dataclass
class Counter:
    """Requests and bytes, safe to update from several threads."""

    requests: int = 0
    bytes: int = 0
    delayed: float = 0.0  # seconds of simulated transfer
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, nbytes: int, delay: float) -> None:
        with self._lock:
            self.requests += 1
            self.bytes += nbytes
            self.delayed += delay

    def reset(self) -> None:
        with self._lock:
            self.requests, self.bytes, self.delayed = 0, 0, 0.0


class CountingFile(io.RawIOBase):
    """A read-only file that counts (and optionally delays) every read.

    Parameters
    ----------
    path
        The file to read.
    model
        Latency and bandwidth to simulate; None for no delay.
    sleep
        The function that waits (tests pass one that records instead of sleeping).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        model: LatencyModel | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._fh = open(path, "rb", buffering=0)  # noqa: SIM115 - closed in close()
        self.model = model
        self.counter = Counter()
        self._sleep = sleep

    @property
    def requests(self) -> int:
        return self.counter.requests

    @property
    def bytes(self) -> int:
        return self.counter.bytes

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._fh.seek(offset, whence)

    def tell(self) -> int:
        return self._fh.tell()

    def readinto(self, buffer: Any) -> int:
        n = self._fh.readinto(buffer) or 0
        delay = self.model.cost(n) if self.model else 0.0
        self.counter.add(n, delay)
        if delay:
            self._sleep(delay)
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()

    def reset(self) -> None:
        self.counter.reset()


T = TypeVar("T")


def layers(store: Any) -> list[Any]:
    """``store`` and the stores it wraps, outermost first (counting, guarding, indexing:
    zarr's ``WrapperStore`` keeps the wrapped store in ``_store``)."""
    out = [store]
    while hasattr(out[-1], "_store") and len(out) < 8:
        out.append(out[-1]._store)
    return out


def layer_attribute(store: Any, name: str, kind: type[T]) -> T | None:
    """The attribute ``name`` of ``store`` or of a store it wraps, the outermost of type
    ``kind`` (what a wrapper carries for the readers: a repository's version, its index)."""
    for layer in layers(store):
        found = getattr(layer, name, None)
        if isinstance(found, kind):
            return found
    return None


def is_icechunk_store(store: Any) -> bool:
    """Whether ``store``, or a store it wraps (counting, guarding), is an Icechunk session's."""
    return any(type(b).__module__.startswith("icechunk") for b in layers(store))


SHARD_INDEX_MAX = 1 << 20
"""The largest read of a shard's last bytes kept as its index (16 bytes and a checksum per
inner chunk: a shard of 65,536 chunks)."""
SHARD_INDEXES_KEPT = 4096
"""Shard indexes a read-only store keeps, the least recently used dropped first."""


class CountingStore(WrapperStore):
    """A Zarr store wrapper that counts (and optionally delays) every read.

    Parameters
    ----------
    store
        The store to wrap.
    model
        Latency and bandwidth to simulate; None for no delay.
    counter
        Where to count (shared by the copies zarr makes of a store, e.g. read-only ones).
    sleep
        An async function that waits (tests pass one that records instead of sleeping).
    name
        What the store is called in errors (its URL): a read the store fails after its
        retries raises :class:`~layoutkit.errors.StoreReadError` saying what it
        answered, in one sentence, not the object store client's own error.
    """

    def __init__(
        self,
        store: Any,
        model: LatencyModel | None = None,
        counter: Counter | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        name: str = "",
    ) -> None:
        super().__init__(store)
        self.model = model
        self.counter = counter or Counter()
        self._sleep = sleep
        self.name = name or str(store)
        self._limits: weakref.WeakKeyDictionary[Any, asyncio.Semaphore] = weakref.WeakKeyDictionary()
        self._indexes: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self.local_metadata = is_icechunk_store(store)
        """Whether the store holds its nodes' metadata in memory (an Icechunk session:
        its snapshot, fetched when it opened, lists every node and holds its document), so
        that reading a ``zarr.json`` or listing costs no request and is not counted."""

    def _with_store(self, store: Any) -> CountingStore:
        copy = type(self)(store, self.model, self.counter, self._sleep, self.name)
        copy._limits = self._limits  # one limit for the store and the copies zarr makes of it
        copy._indexes = self._indexes  # and one cache of shard indexes
        return copy

    def _failed(self, exc: Exception) -> Exception:
        """A failed read as one sentence (a missing object stays FileNotFoundError, zarr's "absent")."""
        if isinstance(exc, (FileNotFoundError, LayoutkitError)):
            return exc
        from layoutkit.storage.buckets import describe_store_error

        return StoreReadError(describe_store_error(self.name, exc))

    def _slots(self) -> asyncio.Semaphore:
        """At most :data:`~layoutkit.storage.buckets.MAX_IN_FLIGHT` requests in flight,
        whoever sends them (layoutkit's direct reads, zarr's chunk reads): one semaphore
        per event loop, as a semaphore belongs to the loop it waits in."""
        loop = asyncio.get_running_loop()
        slots = self._limits.get(loop)
        if slots is None:
            slots = self._limits[loop] = asyncio.Semaphore(MAX_IN_FLIGHT)
        return slots

    async def _account(self, nbytes: int) -> None:
        delay = self.model.cost(nbytes) if self.model else 0.0
        self.counter.add(nbytes, delay)
        if delay:
            await self._sleep(delay)

    async def counted(self, fetch: Callable[[], Awaitable[Any]]) -> Any:
        """``await fetch()``, a request made outside the store (a virtual store's merged
        read of a source file), counted and charged as the store's own are, within the
        same limit of requests in flight."""
        async with self._slots():
            body = await fetch()
            await self._account(len(body))
        return body

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        if self.local_metadata and key.rsplit("/", 1)[-1] == "zarr.json":  # from the session's snapshot
            try:
                return await self._store.get(key, prototype, byte_range)
            except Exception as exc:
                raise self._failed(exc) from None
        index = self._index_key(key, byte_range)
        if index is not None and index in self._indexes:
            self._indexes.move_to_end(index)
            return self._indexes[index]
        async with self._slots():
            try:
                buf = await self._store.get(key, prototype, byte_range)
            except Exception as exc:
                raise self._failed(exc) from None
            await self._account(len(buf) if buf is not None else 0)
        if index is not None and buf is not None:
            self._indexes[index] = buf
            while len(self._indexes) > SHARD_INDEXES_KEPT:
                self._indexes.popitem(last=False)
        return buf

    def _index_key(self, key: str, byte_range: Any) -> tuple[str, int] | None:
        """The cache key of a shard's index read (the last bytes of a shard, as zarr's
        sharding codec reads its index) from a store opened read-only; None for any other
        read. zarr reads a shard's index again for every read of the shard
        (zarr-python#1355): a program reading one signal of each shot from a
        signal-major store paid two requests a read."""
        if not isinstance(byte_range, SuffixByteRequest) or byte_range.suffix > SHARD_INDEX_MAX:
            return None
        if not getattr(self._store, "read_only", False):
            return None
        return key, byte_range.suffix

    async def getsize(self, key: str) -> int:
        """An object's size: one request (a HEAD), counted as a GET of nothing."""
        if not self.local_metadata:
            await self._account(0)
        try:
            return await self._store.getsize(key)
        except Exception as exc:
            raise self._failed(exc) from None

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """The keys under ``prefix``: one request (a bucket's LIST; its pages of 1,000
        keys are not told apart), counted and charged as a GET of nothing."""
        if not self.local_metadata:
            await self._account(0)
        async for key in self._store.list_prefix(prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """The members of ``prefix``: one request, as :meth:`list_prefix`."""
        if not self.local_metadata:
            await self._account(0)
        async for key in self._store.list_dir(prefix):
            yield key

    async def get_partial_values(self, prototype: Any, key_ranges: Iterable[tuple[str, Any]]) -> list[Any]:
        key_ranges = list(key_ranges)
        try:
            bufs = await self._store.get_partial_values(prototype, key_ranges)
        except Exception as exc:
            raise self._failed(exc) from None
        await asyncio.gather(*(self._account(len(b) if b is not None else 0) for b in bufs))
        return bufs

    async def get_ranges(
        self, key: str, byte_ranges: Sequence[Any], *, prototype: Any, **kwargs: Any
    ) -> AsyncIterator[Sequence[tuple[int, Any]]]:
        # zarr reads the inner chunks of a partial shard with get_ranges; WrapperStore
        # forwards it to the wrapped store, which would not be counted. Store's own
        # version coalesces the ranges and fetches each merged range with self.get:
        # one request per merged range, as on object storage.
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        async for group in Store.get_ranges(self, key, byte_ranges, prototype=prototype, **kwargs):
            yield group

    @property
    def _supports_sync_io(self) -> bool:
        return False  # zarr's synchronous fast path would read past get() uncounted
