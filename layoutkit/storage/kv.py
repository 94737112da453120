"""Where a Zarr writer puts its objects: a folder, a bucket prefix, or an Icechunk session.

The Zarr layouts write three kinds of thing: metadata documents (JSON, from the driver),
chunks they encode themselves (from any worker), and chunks zarr-python encodes (sharded
and string arrays, through a zarr ``Store``). A :class:`KeyValue` target serves all three
with ``put``/``get`` and :meth:`~KeyValue.zarr_store`, so the writers never learn where
their bytes go, and worker processes write straight to the destination (no shared file
system needed): a target is picklable, except an Icechunk session's, which threads share.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from layoutkit.storage.buckets import METADATA_NAMES, store_at, store_error
from layoutkit.storage.retry import aretrying, retrying
from layoutkit.timings import timed

# Objects up to this size go up in one PUT. obstore (and so zarr's ObjectStore) splits
# anything over 5 MiB into a multipart upload: create, a part per 5 MiB, complete, i.e.
# 15 requests for a 64 MiB shard where one does. S3 takes up to 5 GiB in one PUT; the
# writers hold each object in memory whole already, within the memory budget.
SINGLE_PUT_MAX = 5 * 1024**3
_IOV_MAX = 1024  # buffers one writev takes (Linux's IOV_MAX)
WRITE_MAX = 256 << 10
"""Bytes a file is written in at a time. Linux gives a larger write larger page-cache
folios (up to 2 MiB), and on a virtual machine that hands free memory back to its host
(free page reporting, as Firecracker's balloon does) such folios come from blocks the
host took back: every page of them is a fault in the host. Writing 1.9 GB here took
0.4 s of system time in writes of 256-512 KiB, 2.3 s in writes of 1 MiB and 3.7-4.8 s
in writes of 2-8 MiB (page cache emptied first, each size twice); h5repack writes chunk
by chunk and pays 0.2 s. On other machines the smaller writes cost a system call per
256 KiB, nothing measurable."""
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


class KeyValue(Protocol):
    """A Zarr store being written: keys are relative to its root (``a/b/zarr.json``)."""

    def create(self) -> None: ...
    def put(self, key: str, data: bytes | Sequence[bytes]) -> None:
        """Write the object ``key``: ``data``, or the parts it is made of, in order."""
    def get(self, key: str) -> bytes | None: ...
    def zarr_store(self) -> Any: ...


def parts_of(data: bytes | Sequence[bytes]) -> Sequence[bytes]:
    """The parts an object was given as (one buffer: itself; a bytearray or memoryview too)."""
    return [cast(bytes, data)] if isinstance(data, (bytes, bytearray, memoryview)) else data


def joined(data: bytes | Sequence[bytes]) -> bytes:
    """An object given as its parts, as one buffer (for stores that take one)."""
    parts = parts_of(data)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _write_all(fd: int, parts: Sequence[bytes]) -> None:
    """Write ``parts`` in order, at most :data:`WRITE_MAX` bytes a call (``writev`` may
    write fewer bytes than asked)."""
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    first = 0
    while first < len(views):
        batch: list[memoryview] = []
        room = WRITE_MAX
        for view in views[first : first + _IOV_MAX]:
            batch.append(view[:room])
            room -= len(batch[-1])
            if not room:
                break
        written = os.writev(fd, batch)
        while first < len(views) and written >= len(views[first]):
            written -= len(views[first])
            first += 1
        if written:
            views[first] = views[first][written:]


class FolderKV:
    """A store folder on a local or shared file system."""

    any_order = True
    """Takes an array's chunks before the document that declares the array (a file in a
    folder made on the way): the skeleton may be written while the chunks are."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"FolderKV({str(self.path)!r})"

    def create(self) -> None:
        self.path.mkdir()

    def put(self, key: str, data: bytes | Sequence[bytes]) -> None:
        """Write one object (given as its parts: written with ``writev``, never joined).
        ``os.open`` and ``os.write``, not ``open()``: a buffered file object adds three
        system calls to each file (``fstat``, ``ioctl``, ``lseek``), and a store of a shot
        archive is tens of thousands of small files."""
        target = os.path.join(self.path, key)
        with timed("write"):
            try:
                fd = os.open(target, _NEW_FILE, 0o666)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                fd = os.open(target, _NEW_FILE, 0o666)
            try:
                _write_all(fd, parts_of(data))
            finally:
                os.close(fd)

    def get(self, key: str) -> bytes | None:
        try:
            return (self.path / key).read_bytes()
        except OSError:
            return None

    def zarr_store(self) -> Any:
        import zarr.storage

        return zarr.storage.LocalStore(str(self.path))


def settle_writes(timeout: float = 30.0) -> None:
    """Wait until zarr's event loop has finished what it was doing (at most ``timeout``
    seconds). A signal interrupts the main thread while it waits for a write it handed to
    that loop (zarr's ``sync``), and the loop's thread writes on: a staged store removed
    before then gets folders back (``os.makedirs`` of the chunk keys). Nothing to wait for
    when zarr never started its loop."""
    import asyncio
    import sys
    from concurrent.futures import wait

    zarr_sync = sys.modules.get("zarr.core.sync")
    loop = getattr(zarr_sync, "loop", [None])[0]
    if loop is None or loop.is_closed() or not loop.is_running():
        return

    async def rest() -> None:
        others = asyncio.all_tasks() - {asyncio.current_task()}
        if others:
            await asyncio.wait(others, timeout=timeout)

    wait([asyncio.run_coroutine_threadsafe(rest(), loop)], timeout=timeout + 1)


def is_root_document(key: str) -> bool:
    """A metadata document of the store's root: what makes a store visible to readers."""
    return "/" not in key and key in METADATA_NAMES


class BucketKV:
    """A store under a bucket prefix (``s3://bucket/out.zarr``), written in place.

    Object stores cannot rename, so a store is published by writing its root metadata
    last: ``put`` holds the root's documents back (in the process that created the
    store) and :meth:`release` writes them once every other object exists. Workers in
    other processes get a copy without the held documents; they only write chunks.
    """

    def __init__(self, url: str, options: tuple[tuple[str, str], ...] = ()) -> None:
        self.url = url.rstrip("/")
        self.options = tuple(options)
        self._held: dict[str, bytes] = {}
        self._store: Any = None

    any_order = True  # an object under any key (FolderKV.any_order)

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"BucketKV({self.url!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        BucketKV.__init__(self, state["url"], state["options"])

    @property
    def store(self) -> Any:
        """The obstore store rooted at the prefix."""
        if self._store is None:
            self._store = store_at(self.url, dict(self.options))
        return self._store

    def create(self) -> None:
        pass  # a prefix needs no creating

    def put(self, key: str, data: bytes | Sequence[bytes]) -> None:
        import obstore

        data = joined(data)
        if is_root_document(key):
            self._held[key] = bytes(data)
            return
        try:
            with timed("write"):
                retrying(lambda: obstore.put(self.store, key, data, use_multipart=len(data) > SINGLE_PUT_MAX))
        except Exception as exc:  # obstore's errors: one sentence naming the destination
            raise store_error(self.url, exc) from None

    def get(self, key: str) -> bytes | None:
        import obstore

        if key in self._held:
            return self._held[key]
        try:
            return retrying(lambda: bytes(obstore.get(self.store, key).bytes()))
        except FileNotFoundError:
            return None

    def zarr_store(self) -> Any:
        return single_put_store()(self.store)

    def release(self) -> None:
        """Write the held root documents: ``zarr.json`` (or ``.zgroup``) last, so the store
        appears to readers only now, whole."""
        import obstore

        order = sorted(self._held, key=lambda k: k in ("zarr.json", ".zgroup"))
        try:
            for key in order:
                retrying(lambda: obstore.put(self.store, key, self._held[key]))  # noqa: B023 - called at once
        except Exception as exc:
            raise store_error(self.url, exc) from None
        self._held = {}


@functools.cache
def single_put_store() -> type:
    """zarr's ``ObjectStore``, putting each object in one request (``SINGLE_PUT_MAX``),
    every request retried as :mod:`layoutkit.storage.retry` retries (and counts) them:
    the store layoutkit reads and writes buckets with."""
    import obstore
    import zarr.storage

    class SinglePutStore(zarr.storage.ObjectStore):
        async def set(self, key: str, value: Any) -> None:
            self._check_writable()
            buf = value.as_buffer_like()
            await aretrying(lambda: obstore.put_async(self.store, key, buf,
                                                      use_multipart=memoryview(buf).nbytes > SINGLE_PUT_MAX))

        async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
            return await aretrying(lambda: super(SinglePutStore, self).get(key, prototype, byte_range))

        async def get_partial_values(self, prototype: Any, key_ranges: Any) -> list[Any]:
            key_ranges = list(key_ranges)
            return await aretrying(lambda: super(SinglePutStore, self).get_partial_values(prototype, key_ranges))

        async def exists(self, key: str) -> bool:
            return await aretrying(lambda: super(SinglePutStore, self).exists(key))

        async def delete(self, key: str) -> None:
            await aretrying(lambda: super(SinglePutStore, self).delete(key))

        async def getsize(self, key: str) -> int:
            return await aretrying(lambda: super(SinglePutStore, self).getsize(key))

        async def list_dir(self, prefix: str) -> Any:  # listed whole, then given out (a retry starts over)
            for key in await aretrying(lambda: _listed(super(SinglePutStore, self).list_dir(prefix))):
                yield key

        async def list_prefix(self, prefix: str) -> Any:
            for key in await aretrying(lambda: _listed(super(SinglePutStore, self).list_prefix(prefix))):
                yield key

        def __reduce__(self) -> tuple[Any, ...]:  # the class is made here: pickle how to make it again
            return _remade_store, (self.store, self.read_only)

    return SinglePutStore


def bucket_zarr_store(store: Any, read_only: bool = False) -> Any:
    """A zarr store over an obstore store (a bucket prefix), its requests retried and
    counted (:func:`single_put_store`): what layoutkit reads and writes buckets with."""
    return single_put_store()(store, read_only=read_only)


async def _listed(keys: Any) -> list[str]:
    return [k async for k in keys]


def _remade_store(store: Any, read_only: bool) -> Any:
    return single_put_store()(store, read_only=read_only)


def as_kv(target: Any) -> Any:
    """A key-value target: a path becomes a :class:`FolderKV`; a target stays itself."""
    if isinstance(target, (str, os.PathLike)):
        return FolderKV(target)
    return target


def portable_target(target: Any) -> Any:
    """The target as a task ships it to a worker: an absolute path, or the target."""
    if isinstance(target, (str, os.PathLike)):
        return str(Path(target).resolve())
    return target


__all__ = ["BucketKV", "bucket_zarr_store", "FolderKV", "KeyValue", "as_kv", "is_root_document", "joined", "parts_of", "settle_writes",
           "portable_target", "single_put_store"]
