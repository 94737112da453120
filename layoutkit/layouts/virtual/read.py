"""The reader of a virtual store: the shot-major hierarchy, read through Icechunk,
which follows each chunk's reference into its source file (the repository's virtual
chunk containers authorised when it is opened,
:func:`~layoutkit.storage.icechunk_repo.open_repository`). A chunk of a source that
changed since it was referenced is refused by name
(:class:`~layoutkit.errors.SourceChangedError`).

Icechunk fetches each referenced chunk with a GET of its own. Archival files have small
chunks, and a shot's chunks lie next to each other in its file, so this reader reads the
references itself (layoutkit's copy of them, :mod:`.refindex`, or the bucket of the
index of the snapshot's nodes that holds the shot, :mod:`layoutkit.storage.nodeindex`) and
fetches the chunks of one read that lie near each other in one file with one ranged GET
(:func:`~layoutkit.storage.buckets.coalesce`: gaps up to 1 MiB, GETs up to 16 MiB), the
GETs of different files and ranges concurrently. Each GET checks the file's version as
Icechunk would (its ETag, with ``If-Match``; a local file's size and modification time).
Chunks without a copied reference (written chunks, a repository written before the copy)
are read through Icechunk.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import os
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any

import numpy as np

from layoutkit.formats import PROVENANCE_ATTR
from layoutkit.layouts.virtual.refindex import FORMAT, RefIndex, names_in
from layoutkit.layouts.virtual.spec import LAYOUT_NAME
from layoutkit.readers.base import SCAN_BLOCK_BYTES, scan_grid, scan_selections
from layoutkit.readers.zarr_ import ZarrArchive, stored_objects, stored_origins
from layoutkit.readers.zarr_direct import DirectRead
from layoutkit.storage.beside import get as get_document
from layoutkit.storage.buckets import COALESCE_GAP, COALESCE_MAX, coalesce
from layoutkit.storage.icechunk_repo import VirtualSource, local_path, source_changed, virtual_source
from layoutkit.storage.nodeindex import NodeIndex, node_index_of

LISTED_ABOVE = 64  # a read of more chunks of one array than this lists the array's chunks first
MAX_COVER_BYTES = 256 * 1024**2
"""The most a read decodes here to give a part of it (the whole chunks a hyperslab
touches); a larger one is left to zarr, which keeps only the part of each chunk asked for."""
FEW_CHUNKS = 2
"""A read of at most this many chunks, before the references' copy is loaded, goes
through Icechunk (a GET a chunk) rather than loading it: merging saves at most one
request there, and the copy holds every reference of the repository (1.3 s to parse at
50,000 shots of 5 signals, in a 2 s read of one signal)."""


MANY_BUCKETS = 16
"""A reader that has needed more of the node index's buckets than this reads the one copy
of every reference instead (one GET, 1.3 s to parse at 50,000 shots) for the rest of its
reads: a signal of every shot through the buckets took 42 s at 50,000 shots, 26 s
through the copy."""


class VirtualArchive(ZarrArchive):
    """An Icechunk repository of references to the sources' chunks."""

    layout = LAYOUT_NAME

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._index: asyncio.Future[RefIndex | None] | None = None
        self._bucket_refs: dict[int, RefIndex] = {}  # the index's buckets' references, each indexed once
        self._buckets_needed: set[int] = set()
        self.merged_reads = True  # False: every chunk through Icechunk (what zarr-python alone does)
        self._stored_keys: dict[str, frozenset[str]] = {}  # array -> the keys of its chunks, listed once

    def get(self, path: str, selection: Any = ()) -> np.ndarray:
        """An array of a snapshot with an index (:mod:`layoutkit.storage.nodeindex`), or a
        hyperslab of one, read from its references: the whole chunks it touches, their
        bytes merged (a GET per span of the file), decoded here, not through Icechunk,
        whose first read loads the snapshot of every node. Other selections, or a
        repository without the index, as zarr reads them."""
        covered = self._covered(path, selection)
        if covered is not None:
            plan, inner = covered
            values = _decoded(plan, inner, self._fetch_stored(path, plan.keys))
            if values is not None:
                return values
        return super().get(path, selection)

    def _fetch_stored(self, path: str, keys: Iterable[str]) -> list[Any]:
        return self._fetch_stored_many([(path, k) for k in keys])

    def _fetch_stored_many(self, keys: list[tuple[str, str]]) -> list[Any]:
        """The objects of ``(array, chunk key)`` pairs; of an array asked for more than
        :data:`LISTED_ABOVE` chunks at once, only those its listing holds are fetched, the
        others being its fill value (an array declared with 2**40 elements and one chunk
        written: 2,047 of a scan unit's 2,048 chunks were a request each, for nothing)."""
        counts: dict[str, int] = {}
        for path, _ in keys:
            counts[path] = counts.get(path, 0) + 1
        listed = {path: self._stored(path) for path, n in counts.items() if n > LISTED_ABOVE}
        wanted = [f"{path.strip('/')}/{k}" for path, k in keys]
        present = [path not in listed or full in listed[path] for (path, _), full in zip(keys, wanted)]
        fetched = iter(self._fetch([full for full, here in zip(wanted, present) if here]))
        return [next(fetched) if here else None for here in present]

    def _stored(self, path: str) -> frozenset[str]:
        """The keys of the chunks an array has, Icechunk's listing of it (kept)."""
        found = self._stored_keys.get(path)
        if found is None:
            found = self._stored_keys[path] = frozenset(
                f"{path.strip('/')}/{key}" for key in stored_objects(self.zarr_array(path)))
        return found

    def _covered(self, path: str, selection: Any) -> tuple[DirectRead, tuple[Any, ...]] | None:
        """The plan of the whole chunks ``selection`` touches, and the selection within
        them; None where zarr reads it (no index, no plain codecs, too large)."""
        whole = self._direct(path, (), any_size=True) if node_index_of(self.store) is not None else None
        covered = whole.cover(selection) if whole is not None else None
        if covered is None or math.prod(covered[0].shape) * covered[0].dtype.itemsize > MAX_COVER_BYTES:
            return None
        return covered

    def read_blocks(self, units: Iterable[tuple[str, Any]]) -> Iterator[np.ndarray]:
        """Units of a scan read together, about :data:`~layoutkit.readers.base.SCAN_BLOCK_BYTES`
        at a time: their chunks' references merged across the arrays of one file (a shot
        archive's small signals, a chunk each: a GET per array, now per span of the file)."""
        batch: list[tuple[str, Any, Any]] = []
        size = 0

        def flush() -> Iterator[np.ndarray]:
            keys = [(p, k) for p, _, c in batch if c is not None for k in c[0].keys]
            fetched = iter(self._fetch_stored_many(keys)) if keys else iter(())
            for p, sel, c in batch:
                raw = [next(fetched) for _ in c[0].keys] if c is not None else None
                values = _decoded(c[0], c[1], raw) if c is not None and raw is not None else None
                yield values if values is not None else self.get(p, sel)

        for path, selection in units:
            covered = self._covered(path, selection)
            nbytes = math.prod(covered[0].shape) * covered[0].dtype.itemsize if covered is not None else 0
            if batch and size + nbytes > SCAN_BLOCK_BYTES:
                yield from flush()
                batch, size = [], 0
            batch.append((path, selection, covered))
            size += nbytes
        if batch:
            yield from flush()

    def blocks(self) -> list[tuple[str, Any]]:
        """A scan's units: runs of whole chunks of about
        :data:`~layoutkit.readers.base.SCAN_BLOCK_BYTES` (:func:`~layoutkit.readers.base.scan_grid`,
        as the HDF5 reader scans its source), each read as one merged read of the
        references, where a unit a chunk was a GET a chunk (a NeXus-like file of 14,000
        small chunks: 14,160 GETs, 15 s, against 0.26 s for its source)."""
        out: list[tuple[str, Any]] = []
        for p, (shape, dtype) in sorted(self.arrays().items()):
            a = self.zarr_array(p)
            grid = scan_grid(shape, dtype.itemsize, tuple(a.chunks))
            out.extend((p, sel) for sel in scan_selections(shape, grid, partial(stored_origins, a)))
        return out

    async def _fetch_async(self, keys: list[str]) -> list[np.ndarray | None]:
        loaded = self._index is not None and self._index.done()
        few = len(keys) <= FEW_CHUNKS and not loaded  # not worth reading every reference for
        side = node_index_of(self.store) if self.merged_reads and self._index is None else None
        if side is not None and self._few_buckets(side, keys):  # the shots' buckets, not every reference
            try:
                await side.load_buckets(keys)
                index: RefIndex | BucketRefs | None = BucketRefs(side, self._bucket_refs)
            except FileNotFoundError:
                index = await self._refs()
        else:
            index = await self._refs() if self.merged_reads and not few else None
        if not index:
            return await super()._fetch_async(keys)
        out: list[np.ndarray | None] = [None] * len(keys)
        by_file: dict[str, list[tuple[int, int, int]]] = {}
        rest = []
        for i, key in enumerate(keys):
            ref = index.get(key)
            if ref is None or not _readable(ref[0]):
                rest.append(i)
            else:
                by_file.setdefault(ref[0], []).append((ref[1], ref[2], i))

        async def through_icechunk() -> None:
            for i, got in zip(rest, await super(VirtualArchive, self)._fetch_async([keys[i] for i in rest])):
                out[i] = got

        async def one_file(url: str, items: list[tuple[int, int, int]]) -> None:
            source = _File(url, index.versions.get(url, {}), self._virtual)
            merged = coalesce([(offset, length) for offset, length, _ in items], COALESCE_GAP, COALESCE_MAX)
            bodies = await asyncio.gather(*(self.store.counted(partial(source.read, o, n)) for o, n in merged))
            starts = [o for o, _ in merged]
            for offset, length, i in items:
                k = bisect.bisect_right(starts, offset) - 1
                body = np.frombuffer(bodies[k], dtype=np.uint8)
                out[i] = body[offset - starts[k] : offset - starts[k] + length]

        await asyncio.gather(through_icechunk(), *(one_file(url, items) for url, items in by_file.items()))
        return out

    def _few_buckets(self, side: NodeIndex, keys: list[str]) -> bool:
        """Whether the references of ``keys`` are taken from the index's buckets: while
        this reader has needed at most :data:`MANY_BUCKETS` of them; past that (a scan, a
        signal of every shot) the one copy of every reference is read instead, once."""
        groups = [side.group_of(k) for k in keys]
        if any(g is None for g in groups):
            return False
        self._buckets_needed.update(side.bucket_number(g) for g in groups if g is not None)
        return len(self._buckets_needed) <= MANY_BUCKETS

    async def _refs(self) -> RefIndex | None:
        """The repository's copy of its references (read once, on the first read)."""
        loop = asyncio.get_running_loop()
        if self._index is None or (not self._index.done() and self._index.get_loop() is not loop):
            self._index = loop.create_task(self._load_refs())  # a forked worker's loop is not its parent's
        return await self._index if not self._index.done() else self._index.result()

    @property
    def _virtual(self) -> VirtualSource | None:
        return virtual_source(self.store)

    async def _load_refs(self) -> RefIndex | None:
        from layoutkit.storage.log import root_part

        source = self._virtual
        if source is None:
            return None
        try:
            provenance = json.loads(self.root.attrs.get(PROVENANCE_ATTR) or "{}")
        except (TypeError, ValueError):
            return None
        entries = int(root_part(provenance if isinstance(provenance, dict) else {}).get("entries", 0))
        names = await asyncio.to_thread(lambda: names_in(source.commits(), entries)) if entries else []

        def fetch(name: str) -> Any:
            return _body(get_document(source.location, source.storage_options, name))

        docs = await asyncio.gather(*(self.store.counted(partial(fetch, name)) for name in names))
        return RefIndex(d for d in docs if d)


async def _body(got: Any) -> bytes:
    return (await got) or b""


class BucketRefs:
    """The references of the index's loaded buckets, as :class:`RefIndex` gives them
    (``get``, ``versions``), each looked up in its own bucket's, indexed once (a read of
    every shot asks every bucket many times)."""

    def __init__(self, index: NodeIndex, indexed: dict[int, RefIndex]) -> None:
        self._index, self._indexed = index, indexed
        self.versions: dict[str, dict[str, Any]] = {}

    def __bool__(self) -> bool:
        return True

    def get(self, key: str) -> tuple[str, int, int] | None:
        group = self._index.group_of(key)
        if group is None:
            return None
        k = self._index.bucket_number(group)
        refs = self._indexed.get(k)
        if refs is None:
            b = self._index.loaded(group)
            refs = self._indexed[k] = RefIndex.from_documents(
                [{"format": FORMAT, "urls": b["urls"], "versions": b["versions"], "arrays": b["refs"]}])
        found = refs.get(key)
        if found is not None and found[0] not in self.versions:
            self.versions[found[0]] = refs.versions.get(found[0], {})
        return found


def _decoded(plan: DirectRead, inner: tuple[Any, ...], raw: list[Any]) -> np.ndarray | None:
    """A covering block's values, cut to the selection; None where zarr must read it."""
    if not plan.decodes(raw) or (values := plan.decode(raw)) is None:
        return None
    return values if all(s == slice(0, n) for s, n in zip(inner, plan.shape)) else values[inner].copy()


def _readable(url: str) -> bool:
    return url.startswith(("file://", "s3://"))


class _File:
    """A source file a virtual store references, read by range, its version checked."""

    def __init__(self, url: str, version: dict[str, Any], virtual: VirtualSource | None) -> None:
        self.url = url
        self.version = version
        self.storage_options = virtual.storage_options if virtual is not None else {}
        self._checked = False

    async def read(self, offset: int, length: int) -> bytes:
        if self.url.startswith("file://"):
            return await asyncio.to_thread(self._read_local, offset, length)
        import obstore

        from layoutkit.storage.buckets import object_store
        from layoutkit.storage.retry import aretrying

        store, key = object_store(self.url, self.storage_options)
        span, etag = (offset, offset + length), self.version.get("etag")

        def get() -> Any:  # not changed since it was referenced: its ETag, when recorded
            if etag:
                return obstore.get_async(store, key, options={"range": span, "if_match": etag})
            return obstore.get_async(store, key, options={"range": span})

        try:
            result = await aretrying(get)
            return bytes(await result.bytes_async())
        except Exception as exc:
            if type(exc).__name__ in ("PreconditionError", "NotFoundError") or isinstance(exc, FileNotFoundError):
                raise source_changed(self.url) from None
            raise

    def _read_local(self, offset: int, length: int) -> bytes:
        path = local_path(self.url)
        try:
            with open(path, "rb") as f:
                if not self._checked:  # as Icechunk checks: not modified after it was referenced
                    stat = os.fstat(f.fileno())
                    mtime, size = self.version.get("mtime"), self.version.get("size")
                    if (mtime is not None and math.ceil(stat.st_mtime_ns / 1e9) > mtime) or (
                            size is not None and stat.st_size != size):
                        raise source_changed(self.url)
                    self._checked = True
                data = os.pread(f.fileno(), length, offset)
        except FileNotFoundError:
            raise source_changed(self.url) from None
        if len(data) != length:
            raise source_changed(self.url)
        return data


def open_archive(location: Any, *, template: str, model: Any = None, sleep: Any = None, page_buffer: int | None = None,
                 root: Any = None) -> VirtualArchive:
    """The reader of a store of this layout (:meth:`layoutkit.layout.Layout.open`)."""
    return VirtualArchive(location, template, model, sleep, root=root)


__all__ = ["VirtualArchive", "open_archive"]
