"""HDF5 sources in a bucket: ranged GETs for the chunks, a block-cached file for h5py."""

from __future__ import annotations

import bisect
import contextlib
import glob
import io
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, overload

from layoutkit.errors import SourceNotFoundError
from layoutkit.storage.buckets import COALESCE_GAP, COALESCE_MAX, MAX_IN_FLIGHT, coalesce, is_url, object_store
from layoutkit.storage.retry import aretrying, retrying
from layoutkit.templates import natural_key

_LOOP: Any = None
_LOOP_LOCK = threading.Lock()


def _run(coro: Any) -> Any:
    """Run ``coro`` on this module's event loop thread (callers may be worker threads, or
    inside zarr's own loop), and wait for its result."""
    import asyncio

    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="layoutkit-ranges", daemon=True).start()
    return asyncio.run_coroutine_threadsafe(coro, _LOOP).result()


READ_BLOCK_BYTES = 4 * 1024**2  # what one metadata read fetches (h5py asks for a few bytes at a time)
READER_BLOCK_BYTES = 8 * 1024**2
"""The blocks of ``layoutkit.open``'s reader of an HDF5 file in a bucket: the block of
the readers users have (s3fs's ``blockcache`` as NSIDC recommends it) and the page of a
cloud-optimised file, so opening a paged file is one GET of its first page, not two."""
PAGED_READER_BLOCK_BYTES = 1024**2
"""The blocks of ``layoutkit.open``'s reader of a paged HDF5 file in a bucket read without
HDF5's page buffer (the default). A paged file's metadata sits in its first pages, but a
name looked up in a group of many members walks a B-tree whose nodes lie all over them:
one shot of a by-shot file at 1,000 / 8,000 / 50,000 shots (30 ms a GET, 100 MB/s) took
2 / 5 / 9 GETs of whole 8 MiB pages, 0.23 / 0.57 / 1.19 s, and takes 5 / 10 / 12 GETs of
1 MiB, 0.22 / 0.43 / 0.55 s; a signal of every shot at 8,000, 3.0 s then, 3.6 s now
(runs of blocks are fetched ahead, :data:`READER_READAHEAD`)."""
READER_CACHE_BLOCKS = 32
"""Blocks ``layoutkit.open``'s reader keeps (256 MiB of 8 MiB blocks: s3fs's ``blockcache``
keeps 32 too). An HDF5 source's metadata is spread over the whole file: one signal of
every shot of a 950 MB source touches 100 blocks, and with 16 kept it fetched 40% of
them twice (198 GETs against s3fs's 95)."""
READER_READAHEAD = 2
"""Blocks the reader fetches after a missed one, in the same GET, when h5py is reading on
(this miss just after the last): one signal of every shot of a 950 MB source that is not
paged, 108 GETs in 2.97 s without, 72 in 2.66 s with (h5py over s3fs: 95, 3.2 s); on the
paged files no slower, and a few GETs fewer."""
# 64 MiB at most per source object, however many files are open on it in this process
# (verify opens one per worker: 8 workers with a cache each held 0.5 GiB of blocks)
READ_CACHE_BLOCKS = 32
WALK_CACHE_BLOCKS = 64  # kept while the inventory walks the file (RangeFile.walking): 256 MiB at most


@dataclass(frozen=True)
class ObjectSource:
    """An HDF5 file in a bucket (``s3://bucket/key.h5``): what the walk and the readers
    need of a source, over ranged GETs. Picklable (workers open it themselves).

    h5py reads the metadata through :meth:`open_file`, a file object with a read-ahead
    block cache; chunk bytes never go through h5py: the inventory knows each chunk's
    offset and size, and :meth:`read_range` fetches exactly those bytes.
    """

    url: str
    options: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.url

    @property
    def store_and_key(self) -> tuple[Any, str]:
        """The obstore store of the object's bucket, and its key there (set up once per process)."""
        cached = _STORES.get(self)
        if cached is None:
            cached = _STORES[self] = object_store(self.url, dict(self.options))
        return cached

    def size(self) -> int:
        import obstore

        store, key = self.store_and_key
        return int(retrying(lambda: obstore.head(store, key))["size"])

    def stat(self) -> Any:
        """The one ``os.stat_result`` field the commands use (``st_size``), as a Path has it."""
        from types import SimpleNamespace

        return SimpleNamespace(st_size=self.size())

    def resolve(self) -> ObjectSource:
        return self

    @property
    def name(self) -> str:
        """The object's name, the key's last part (as a Path's ``name``)."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    @property
    def stem(self) -> str:
        return self.name.rsplit(".", 1)[0] if "." in self.name.lstrip(".") else self.name

    def with_name(self, name: str) -> str:
        """The URL of an object beside this one (as a Path's ``with_name``)."""
        return self.url.rstrip("/").rsplit("/", 1)[0] + "/" + name

    def read_range(self, offset: int, size: int) -> bytes:
        import obstore

        store, key = self.store_and_key
        return bytes(retrying(lambda: obstore.get_range(store, key, start=offset, length=size))) if size else b""

    def first_block(self, length: int) -> tuple[bytes, int]:
        """The object's first ``length`` bytes (all of it when smaller) and its size, in
        one GET: the size comes with the body, so no HEAD goes first."""
        import obstore

        store, key = self.store_and_key
        def get() -> tuple[bytes, int]:
            result = obstore.get(store, key, options={"range": (0, length)})
            return bytes(result.bytes()), int(result.meta["size"])

        return retrying(get)

    def coalescing(self) -> tuple[int, int]:
        """The gap and size limits of merged GETs (``coalesce_gap``, ``coalesce_max``)."""
        from layoutkit.options import parse_size

        opts = dict(self.options)
        gap = parse_size(opts.get("coalesce_gap", COALESCE_GAP), what="--storage-option coalesce_gap")
        limit = parse_size(opts.get("coalesce_max", COALESCE_MAX), what="--storage-option coalesce_max")
        return gap, limit

    def read_ranges(self, ranges: list[tuple[int, int]], on_get: Any = None, window: int = 0) -> list[bytes]:
        """Several ``(offset, size)`` ranges at once: neighbours are merged into one GET
        (:func:`~layoutkit.storage.buckets.coalesce`, with :meth:`coalescing`'s limits and
        ``window``) and the GETs run concurrently (:meth:`_get_merged`); each range's
        bytes are cut out of its GET. ``on_get(*sizes)`` is told of the round of GETs made."""
        if not ranges:
            return []
        merged = coalesce(ranges, *self.coalescing(), window=window)
        bodies = self._get_merged(merged)
        if on_get is not None:  # one call for the round: its GETs were in flight together
            on_get(*(len(body) for body in bodies))
        starts = [o for o, _ in merged]
        out = []
        for offset, size in ranges:
            i = bisect.bisect_right(starts, offset) - 1
            view = memoryview(bodies[i])
            out.append(bytes(view[offset - starts[i] : offset - starts[i] + size]))
        return out

    def _get_merged(self, merged: list[tuple[int, int]]) -> list[Any]:
        """The bytes of each ``(offset, size)`` range, one concurrent GET each."""
        import asyncio

        import obstore

        store, key = self.store_and_key
        slots = asyncio.Semaphore(MAX_IN_FLIGHT)

        async def one(offset: int, size: int) -> Any:
            async with slots:
                return await aretrying(lambda: obstore.get_range_async(store, key, start=offset, length=size))

        async def fetch() -> list[Any]:
            return await asyncio.gather(*(one(o, n) for o, n in merged))

        return _run(fetch())

    def open_file(self, on_get: Any = None, block_bytes: int = 0, size: int | None = None,
                  keep: int = 0) -> RangeFile:
        """A file object over the source; ``on_get(*sizes)`` is told of every round of
        GETs (the sizes of those sent together, one for a GET alone);
        blocks of ``block_bytes`` (default :data:`READ_BLOCK_BYTES`); ``size``: the
        object's, when known (else a HEAD asks); ``keep``: blocks cached at least."""
        f = RangeFile(self, self.size() if size is None else size, on_get)
        if block_bytes:
            f._blocks.resize(block_bytes)
        if keep:
            f._blocks.keep(keep)
        return f


@dataclass(frozen=True)
class LocalObject(ObjectSource):
    """A local file read as an :class:`ObjectSource` is, in ranged reads of the same
    blocks and rounds: what verify's simulated object storage reads an HDF5 file
    through, so that it is charged the GETs the bucket reader would send, not one
    request per h5py read (4,856 for a scan of a 64 MB source, against 5 blocks of
    8 MiB)."""

    def size(self) -> int:
        return os.path.getsize(self.url)

    def stat(self) -> Any:
        return os.stat(self.url)

    def read_range(self, offset: int, size: int) -> bytes:
        if not size:
            return b""
        fd = os.open(self.url, os.O_RDONLY)
        try:
            return os.pread(fd, size, offset)
        finally:
            os.close(fd)

    def first_block(self, length: int) -> tuple[bytes, int]:
        return self.read_range(0, length), self.size()

    def _get_merged(self, merged: list[tuple[int, int]]) -> list[Any]:
        return [self.read_range(o, n) for o, n in merged]  # read one after another, charged as one round


_STORES: dict[ObjectSource, tuple[Any, str]] = {}


def forget_stores() -> None:
    """Drop the stores (and their connection pools) that sources made in this process:
    the next request opens new connections."""
    _STORES.clear()


class _SharedBlocks:
    """The blocks of one source object, shared by every :class:`RangeFile` open on it in
    this process, the most recently used :data:`READ_CACHE_BLOCKS` kept. It lives while a
    file is open on the source: a run that closes its files starts the next cold."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.blocks: OrderedDict[int, bytes] = OrderedDict()
        self.users = 0
        self.limit = READ_CACHE_BLOCKS
        self.block_bytes = READ_BLOCK_BYTES

    def follow_pages(self, page: int) -> None:
        """Blocks of whole pages of a paged file (the smallest multiple of ``page`` of at
        least :data:`READ_BLOCK_BYTES`, aligned with the pages, which start at byte 0),
        the cache holding as many bytes as before. h5py's page buffer reads a page at a
        time: an 8 MiB page over 4 MiB blocks was two GETs, one after the other."""
        if page <= 0 or (self.block_bytes % page == 0 and self.block_bytes >= READ_BLOCK_BYTES):
            return  # whole pages already (a reader's 8 MiB blocks hold two 4 MiB pages)
        self.resize(page * max(1, -(-READ_BLOCK_BYTES // page)))

    def resize(self, size: int) -> None:
        """Blocks of ``size`` bytes from now on, the cache holding as many bytes as before
        (the blocks read so far cut into the new size when it divides the old one, else
        let go)."""
        with self.lock:
            if size != self.block_bytes:
                old, self.blocks = (self.block_bytes, self.blocks), OrderedDict()
                if old[0] % size == 0:
                    parts = old[0] // size
                    for index, block in old[1].items():
                        for k in range(parts):
                            if piece := block[k * size:(k + 1) * size]:
                                self.blocks[index * parts + k] = piece
                self.limit = max(2, self.limit * self.block_bytes // size)
                self.block_bytes = size
                self._trim()

    def keep(self, blocks: int) -> None:
        """Keep at least ``blocks`` blocks from now on."""
        with self.lock:
            self.limit = max(self.limit, blocks)

    def get(self, index: int) -> bytes | None:
        with self.lock:
            block = self.blocks.get(index)
            if block is not None:
                self.blocks.move_to_end(index)
            return block

    def put(self, index: int, block: bytes) -> None:
        with self.lock:
            self.blocks[index] = block
            self.blocks.move_to_end(index)
            self._trim()

    def _trim(self) -> None:
        while len(self.blocks) > self.limit:
            self.blocks.popitem(last=False)

    @contextlib.contextmanager
    def widened(self, blocks: int) -> Iterator[None]:
        """Keep at least ``blocks`` blocks meanwhile, then trim back to what was kept before."""
        with self.lock:
            before, self.limit = self.limit, max(self.limit, blocks)
        try:
            yield
        finally:
            with self.lock:
                self.limit = before
                self._trim()


_SHARED: dict[ObjectSource, _SharedBlocks] = {}
_SHARED_LOCK = threading.Lock()


def _forget_shared() -> None:  # a forked child: its parent's lock may have been held mid-fork
    global _SHARED_LOCK
    _SHARED.clear()
    _SHARED_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_shared)


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over :meth:`ObjectSource.read_range`, fetching whole
    blocks of :data:`READ_BLOCK_BYTES` (h5py reads metadata a few bytes at a time) into a
    cache every file open on the same source in this process shares
    (:class:`_SharedBlocks`). ``requests`` counts the GETs this file made."""

    def __init__(self, source: ObjectSource, size: int, on_get: Any = None) -> None:
        self.source, self._size, self._pos, self._on_get = source, size, 0, on_get
        with _SHARED_LOCK:
            self._blocks = _SHARED.setdefault(source, _SharedBlocks())
            self._blocks.users += 1
        self.requests = 0
        self.readahead = 0  # blocks fetched after a missed one, in its GET, when reading on
        self._last_miss = -2
        self.blocks_fetched = 0  # one at a time, as h5py missed them (and their readahead)

    def close(self) -> None:
        if not self.closed:
            with _SHARED_LOCK:
                self._blocks.users -= 1
                if self._blocks.users <= 0 and _SHARED.get(self.source) is self._blocks:
                    del _SHARED[self.source]
            # let go of the blocks now: h5py's file objects sit in reference cycles, so this file may live
            # until the cyclic collector runs, and with it up to 128 MiB of blocks (measured: a verify sweep's
            # rows each started up to 1 GiB higher than the last on an HDF5 source in a bucket)
            self._blocks = _SharedBlocks()
        super().close()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def walking(self) -> contextlib.AbstractContextManager[None]:
        """While the inventory walks the file: a cache of :data:`WALK_CACHE_BLOCKS` blocks.

        The walk reads each dataset's header, attributes and chunk index, in link order,
        and it returns to blocks it left 60-80 MB earlier. On the 100-shot sample in a
        bucket (571 MB, 137 blocks of 4 MiB) it made 565 GETs with 32 blocks kept and
        took 16.9 s at 10 ms; with 64 kept, 352 GETs and 11.5 s."""
        return self._blocks.widened(WALK_CACHE_BLOCKS)

    def follow_pages(self, page: int) -> None:
        """Fetch whole pages of a paged file (:meth:`_SharedBlocks.follow_pages`)."""
        self._blocks.follow_pages(page)

    def use_blocks(self, size: int) -> None:
        """Fetch blocks of ``size`` bytes from now on (:meth:`_SharedBlocks.resize`)."""
        self._blocks.resize(size)

    def _block(self, index: int) -> bytes:
        block = self._blocks.get(index)
        if block is None:
            size = self._blocks.block_bytes
            start = index * size
            count = 1  # and the blocks after it not cached yet, up to readahead, in the same GET
            ahead = self.readahead if 0 < index - self._last_miss <= self.readahead + 1 else 0  # reading on
            while count <= ahead and start + count * size < self._size and self._blocks.get(index + count) is None:
                count += 1
            self._last_miss = index + count - 1
            body = self.source.read_range(start, min(count * size, self._size - start))
            self._got(len(body))
            self.blocks_fetched += count
            block = body[:size]
            if self._blocks.block_bytes == size:  # not if another file switched to pages meanwhile
                for i in range(count - 1, -1, -1):  # the block asked for last: the most recently used
                    self._blocks.put(index + i, body[i * size : (i + 1) * size])
        return block

    @property
    def size(self) -> int:
        return self._size

    def pread(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset`` through the block cache, leaving the position
        alone (h5py may be reading through this file on another thread)."""
        offset, end = max(0, offset), min(self._size, offset + size)
        index, inner = divmod(offset, self._blocks.block_bytes)
        if inner + end - offset <= self._blocks.block_bytes:  # within one block: one copy
            return self._block(index)[inner : inner + end - offset]
        out = bytearray()
        while offset < end:
            index, inner = divmod(offset, self._blocks.block_bytes)
            piece = self._block(index)[inner : inner + end - offset]
            out += piece
            offset += len(piece)
        return bytes(out)

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Several ranges at once: those inside a cached block from there, the others in
        one batch of concurrent GETs (:meth:`ObjectSource.read_ranges`)."""
        out: dict[int, bytes] = {}
        missing = []
        block_bytes = self._blocks.block_bytes
        for i, (offset, size) in enumerate(ranges):
            index, inner = divmod(offset, block_bytes)
            block = self._blocks.get(index) if inner + size <= block_bytes else None
            if block is not None and inner + size <= len(block):
                out[i] = block[inner : inner + size]
            else:
                missing.append(i)
        if missing:
            out.update(zip(missing, self.source.read_ranges([ranges[i] for i in missing], self._got)))
        return [out[i] for i in range(len(ranges))]

    def seed(self, block: bytes) -> None:
        """The file's first block, fetched (and counted here) by whoever opened it."""
        self._got(len(block))
        self._blocks.put(0, block)

    def blocks_of(self, ranges: Iterable[tuple[int, int]]) -> set[int]:
        """The indexes of the blocks that hold ``ranges``."""
        size = self._blocks.block_bytes
        return {i for offset, n in ranges if n > 0
                for i in range(offset // size, (min(offset + n, self._size) - 1) // size + 1)}

    @property
    def block_bytes(self) -> int:
        """The size of the blocks fetched now."""
        return self._blocks.block_bytes

    @property
    def blocks_kept(self) -> int:
        """How many blocks the cache keeps."""
        return self._blocks.limit

    def _got(self, *sizes: int) -> None:
        """GETs made together (one round, in flight at once), of these sizes."""
        self.requests += len(sizes)
        if self._on_get is not None and sizes:
            self._on_get(*sizes)

    @contextlib.contextmanager
    def prefetched(self, ranges: list[tuple[int, int]]) -> Iterator[None]:
        """Fetch the blocks that hold ``ranges`` (byte ranges h5py is about to read) and
        are not cached yet, in one batch of concurrent GETs, neighbouring blocks merged
        (:meth:`ObjectSource.read_ranges`), and keep them while the caller reads.

        h5py asks for one chunk at a time, and waits for each: one round trip per block
        it misses. Fetched here first, a read of many datasets costs the round trips of
        their metadata and one more for all their data. Blocks smaller than
        :data:`READER_BLOCK_BYTES` (a paged file's) are merged within each span of that
        size, so the GETs are never more than the block cache users have makes (the 1 MiB
        blocks of a paged file made 66 GETs for a shot of a by-signal file, where h5py
        over s3fs's 8 MiB blocks made 61)."""
        block_bytes = self._blocks.block_bytes
        wanted = sorted(self.blocks_of(ranges))
        with self._blocks.widened(self._blocks.limit + len(wanted)):
            missing = [i for i in wanted if self._blocks.get(i) is None]
            spans = [(i * block_bytes, min(block_bytes, self._size - i * block_bytes)) for i in missing]
            for i, block in zip(missing, self.source.read_ranges(spans, self._got, READER_BLOCK_BYTES)):
                if self._blocks.block_bytes == block_bytes:
                    self._blocks.put(i, block)
            yield

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        want = min(len(view), max(0, self._size - self._pos))
        done = 0
        while done < want:
            index, inner = divmod(self._pos + done, self._blocks.block_bytes)
            piece = self._block(index)[inner : inner + want - done]
            view[done : done + len(piece)] = piece
            done += len(piece)
        self._pos += done
        return done


@dataclass(frozen=True)
class SourceSet:
    """Several HDF5 sources written as one archive (``convert 'shots-*.h5' out.zarr``):
    the union of their shots under ``template`` (:mod:`layoutkit.hdf5.combined` walks
    them into one inventory, each dataset recording which member holds it). Picklable,
    as each member is."""

    members: tuple[Path | ObjectSource, ...]
    template: str
    concat_dim: str | None = None  # netCDF files without shots: the dimension they are joined along
    # files a run writes at a time (:mod:`layoutkit.appending.batches`): None until decided; as many as
    # the members, one run
    batch: int | None = None

    def __str__(self) -> str:
        first = self.members[0]
        return f"{first} and {len(self.members) - 1} more" if len(self.members) > 1 else str(first)

    @property
    def key(self) -> str:
        """A name unique to the set (its members, in order): what a process caches a reader under."""
        import hashlib

        text = "\n".join(map(str, self.members))
        return f"set:{hashlib.sha256(text.encode()).hexdigest()[:16]}:{len(self.members)}"

    def stat(self) -> Any:
        """The members' sizes, summed (``st_size``, as a Path's ``stat()`` has it)."""
        from types import SimpleNamespace

        return SimpleNamespace(st_size=sum(m.stat().st_size for m in self.members))

    @property
    def name(self) -> str:
        return Path(str(self.members[0])).name


SourceLike: TypeAlias = str | os.PathLike[str] | ObjectSource
"""One source as the readers take it: a local path (or its text), or an object in a bucket."""

Source: TypeAlias = Path | ObjectSource | SourceSet
"""What names the source(s) of a run once parsed (:func:`as_sources`): one local file, one
object in a bucket, or a set of them."""

AnySource: TypeAlias = SourceLike | SourceSet
"""A source as the HDF5 readers accept it: one, or a set."""


GLOB_CHARACTERS = frozenset("*?[")


def expand_sources(given: SourceLike | Sequence[SourceLike],
                   storage_options: dict[str, str] | None = None) -> list[str]:
    """The sources a set names: paths or URLs as given, shell-style globs expanded in
    natural order: local ones by the file system, ``s3://bucket/exports/shots-*.h5`` by
    one listing of the prefix before the first wildcard (``storage_options`` for the
    bucket). A glob that matches nothing is refused in one sentence."""
    items = [given] if isinstance(given, (str, os.PathLike, ObjectSource)) else list(given)
    out: list[str] = []
    for item in map(str, items):
        if not is_source_set(item):
            out.append(item)
            continue
        found = _listed(item, storage_options or {}) if "://" in item else sorted(glob.glob(item), key=natural_key)
        if not found:
            raise SourceNotFoundError(f"No file matches {item!r}.")
        out.extend(found)
    return list(dict.fromkeys(out))


def _listed(pattern: str, storage_options: dict[str, str]) -> list[str]:
    """The objects of a bucket whose URLs match ``pattern`` (``*`` and ``?`` stop at
    ``/``, as in a shell)."""
    import fnmatch

    import obstore

    
    first = min(pattern.index(c) for c in GLOB_CHARACTERS if c in pattern)
    base = pattern[: pattern.rfind("/", 0, first) + 1]  # the folder before the first wildcard
    store, prefix = object_store(base, storage_options)
    parts = pattern[len(base):].split("/")
    found = []
    listed = retrying(lambda: [m for batch in obstore.list(store, prefix=prefix + "/" if prefix else None)
                               for m in batch])
    for meta in listed:
        rest = meta["path"][len(prefix) + 1 if prefix else 0:]
        names = rest.split("/")
        if len(names) == len(parts) and all(map(fnmatch.fnmatchcase, names, parts)):
            found.append(base + rest)
    return sorted(found, key=natural_key)


def is_source_set(given: Any) -> bool:
    """Whether ``given`` names several sources: a list, or a glob, local or over a bucket
    prefix (a local path that exists is itself, whatever characters it has; an object in
    a bucket, :class:`ObjectSource`, is one)."""
    if isinstance(given, ObjectSource):
        return False
    if not isinstance(given, (str, os.PathLike)):
        return True
    text = str(given)
    return bool(GLOB_CHARACTERS & set(text)) and ("://" in text or not os.path.exists(text))


def as_sources(given: AnySource | Sequence[SourceLike], template: str,
               storage_options: dict[str, str] | None = None,
               concat_dim: str | None = None) -> Source:
    """Parse what names the source(s) of a run, at the edge: one path or URL is that
    source; several, a glob or a list of them a :class:`SourceSet` (its globs expanded,
    :func:`expand_sources`), unless they come to one source."""
    if isinstance(given, (ObjectSource, SourceSet)):
        return given
    items = [given] if isinstance(given, (str, os.PathLike)) else list(given)
    if len(items) == 1 and (isinstance(items[0], ObjectSource) or not is_source_set(items[0])):
        return as_source(items[0], storage_options)
    members = expand_sources(items, storage_options)
    return SourceSet(tuple(as_source(m, storage_options) for m in members), template, concat_dim)


def source_records(source: Source, read: bool = True) -> list[dict[str, Any]]:
    """Each source's name, size and content digest, as a store's provenance lists them."""
    members = source.members if isinstance(source, SourceSet) else (source,)
    return [source_record(m, read=read) for m in members]


class KnownFiles(dict[tuple[Any, Any, Any], str]):
    """The digests of recorded local files by (name, size, modification time): looked up
    once per file, not by a scan of every record (an append of 10,000 files to a store
    of 10,000 compared 10^8 pairs)."""

    def __init__(self, records: Iterable[dict[str, Any]] = ()) -> None:
        super().__init__(((r.get("name"), r.get("size"), r.get("mtime")), r["digest"])
                         for r in records if r.get("digest") and r.get("mtime") is not None)


DIGEST = "blake3"
"""The content digest a new store records of each local source: BLAKE3 (the ``blake3``
package), 2.6x less CPU than SHA-256 with the CPU's SHA extensions (1.9 GB: 0.3 s
against 1.1 s of a raw copy that runs in about 6 s on 2 cores), and as cryptographic. A
store keeps the algorithm it was begun with (:func:`digest_algorithm`): those written
before BLAKE3 went on recording SHA-256."""
_ALGORITHMS = ("blake3", "sha256")  # a record's prefix: the hash that computed it

_AHEAD: dict[tuple[str, int, int], Any] = {}  # (real path, size, mtime) -> Future of its DIGEST
_AHEAD_LOCK = threading.Lock()


class _Stopped(Exception):
    """A digest computed ahead was no longer wanted."""


def _identity(path: str | os.PathLike) -> tuple[str, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None  # the run says what is wrong with it
    return os.path.realpath(path), stat.st_size, stat.st_mtime_ns


def digest_algorithm(records: Iterable[dict[str, Any]]) -> str:
    """The algorithm of the content digests ``records`` (a store's sources) hold: the
    one the store goes on with; :data:`DIGEST` for a store that has none."""
    for record in records:
        prefix = str(record.get("digest", "")).partition(":")[0]
        if prefix in _ALGORITHMS:
            return prefix
    return DIGEST


def content_digest(path: str | os.PathLike, algorithm: str = DIGEST, stop: threading.Event | None = None) -> str:
    """``ALGORITHM:HEX`` of a local file's bytes (``blake3`` or ``sha256``), read in 1 MiB
    reads; ``stop``, once set, ends the reading (:class:`_Stopped`)."""
    if algorithm == "blake3":
        import blake3

        digest: Any = blake3.blake3()  # one thread: the copy has the other cores
    else:
        import hashlib

        digest = hashlib.new(algorithm)
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as fh:  # readinto and update both release the GIL
        while n := fh.readinto(buffer):
            if stop is not None and stop.is_set():
                raise _Stopped
            digest.update(view[:n])
    return f"{algorithm}:{digest.hexdigest()}"


@contextlib.contextmanager
def digests_ahead(source: Source, read: bool = True) -> Iterator[None]:
    """Compute the :data:`DIGEST` of each local file of ``source`` in a background thread
    while the caller walks, plans and copies it; :func:`source_record` takes a digest from
    here instead of reading the file in series once the walk is done (SHA-256 took
    1.4-1.8 s for a 1.9 GB source here, of a raw copy of about 9 s). Files whose digests
    are already being computed (an enclosing call) are left to it; on leaving, the digests not yet done
    are stopped, so a run that fails does not go on reading its source. ``read`` False
    (a layout that reads no data) computes nothing."""
    from concurrent.futures import ThreadPoolExecutor

    members = source.members if isinstance(source, SourceSet) else (source,)
    stop = threading.Event()
    mine = {}
    if read:
        pool = ThreadPoolExecutor(1, thread_name_prefix="layoutkit-digest")
        with _AHEAD_LOCK:
            for member in members:
                if isinstance(member, ObjectSource):
                    continue
                key = _identity(member)
                if key is not None and key not in _AHEAD:
                    mine[key] = _AHEAD[key] = pool.submit(content_digest, member, DIGEST, stop)
        pool.shutdown(wait=False)
    try:
        yield
    finally:
        stop.set()
        with _AHEAD_LOCK:
            for key, future in mine.items():
                if _AHEAD.get(key) is future:
                    del _AHEAD[key]


def _digest_ahead(path: str | os.PathLike, size: int, mtime_ns: int) -> str | None:
    """The digest :func:`digests_ahead` computed of ``path`` as it is now, or None."""
    with _AHEAD_LOCK:
        future = _AHEAD.get((os.path.realpath(path), size, mtime_ns))
    if future is None:
        return None
    try:
        return future.result()
    except (OSError, _Stopped):
        return None  # read it here, and fail here if it must


def source_record(source: Path | ObjectSource, known: KnownFiles | Iterable[dict[str, Any]] = (), read: bool = True,
                  algorithm: str = DIGEST) -> dict[str, Any]:
    """``{"name", "size", "digest"}`` (and ``"mtime"`` locally): the ``algorithm`` digest
    of a local file's bytes (:func:`content_digest`; an append computes the one its store
    holds, :func:`digest_algorithm`), the ETag of an object in a bucket (no read: an
    object's ETag changes with its content). A local file whose name, size and
    modification time are those of a record in ``known`` takes that record's digest without being read again
    (an append over a glob of 500 files re-reads none it has seen). Without ``read`` (a
    layout that references the files where they lie, and reads none of their data), a
    local file's digest is its version, ``version:SIZE:MTIME_NS``: the same file seen
    again is known, a copy of it elsewhere is another file."""
    if isinstance(source, ObjectSource):
        import obstore

        store, key = source.store_and_key
        head = retrying(lambda: obstore.head(store, key))
        return {"name": source.url, "size": int(head["size"]), "digest": f"etag:{head.get('e_tag') or ''}"}
    stat = os.stat(source)
    mine = {"name": os.path.basename(source), "size": stat.st_size, "mtime": stat.st_mtime_ns}
    seen = known if isinstance(known, KnownFiles) else KnownFiles(known)
    digest = seen.get((mine["name"], mine["size"], mine["mtime"]))
    if digest:
        return {**mine, "digest": digest}
    if not read:
        return {**mine, "digest": f"version:{stat.st_size}:{stat.st_mtime_ns}"}
    digest = _digest_ahead(source, stat.st_size, stat.st_mtime_ns) if algorithm == DIGEST else None
    return {**mine, "digest": digest or content_digest(source, algorithm)}


@overload
def as_source(text: SourceSet, storage_options: dict[str, str] | None = None) -> SourceSet: ...
@overload
def as_source(text: SourceLike, storage_options: dict[str, str] | None = None) -> Path | ObjectSource: ...
def as_source(text: AnySource, storage_options: dict[str, str] | None = None) -> Source:
    """Parse a source once, at the edge: a bucket URL or a local path (``file://`` too)."""
    if isinstance(text, (ObjectSource, Path, SourceSet)):
        return text
    if str(text).startswith("icechunk:"):
        from layoutkit.errors import NotHDF5Error

        raise NotHDF5Error(f"{text} is an Icechunk repository (Zarr); the source must be an HDF5 file.")
    if is_url(text):
        return ObjectSource(str(text), tuple(sorted((storage_options or {}).items())))
    return Path(str(text).removeprefix("file://"))


def portable(source: Source) -> str | ObjectSource | SourceSet:
    """The source as a task ships it to a worker: an absolute path, or the bucket source
    (a set: each of its members so)."""
    if isinstance(source, SourceSet):
        return SourceSet(tuple(m if isinstance(m, ObjectSource) else m.resolve() for m in source.members),
                         source.template, source.concat_dim)
    return source if isinstance(source, ObjectSource) else str(Path(source).resolve())


def read_head(source: str | os.PathLike | ObjectSource, size: int) -> bytes:
    """The first ``size`` bytes of a source (its user block)."""
    if isinstance(source, ObjectSource):
        return source.read_range(0, size)
    with open(source, "rb") as fh:
        return fh.read(size)


__all__ = ["DIGEST", "GLOB_CHARACTERS", "LocalObject", "content_digest", "digest_algorithm", "digests_ahead", "ObjectSource", "RangeFile", "SourceSet", "as_source", "as_sources", "expand_sources", "is_source_set", "KnownFiles", "source_record", "source_records", "portable", "read_head"]
