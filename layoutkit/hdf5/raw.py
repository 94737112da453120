"""Read regions of HDF5 datasets fast: raw chunk bytes, decoded in parallel.

h5py serialises every call behind one global lock and HDF5 runs its filters on the
calling thread, so ``ds[region]`` from many threads is no faster than from one. For the
filter pipelines we can decode ourselves (gzip, shuffle, zstd, blosc, lz4) the reader
asks HDF5 only for the chunk index (once per dataset), then reads chunk bytes with
``os.pread`` on its own file descriptor and decodes them with zlib/numcodecs, which
release the GIL. Everything else falls back to h5py.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import struct
import threading
import warnings
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

import h5py
import numcodecs
import numpy as np

from layoutkit.errors import ChunkDecodeError, RawReadFallback
from layoutkit.hdf5.chunk_index import chunk_count as chunk_count_of
from layoutkit.hdf5.chunk_index import direct_chunk, entries_in_bucket, index_disagreement, index_problem
from layoutkit.hdf5.files import open_source
from layoutkit.hdf5.filters import RAW_DECODABLE, Filter, can_read_raw
from layoutkit.hdf5.inventory import ArrayInfo
from layoutkit.hdf5.library_read import read_block
from layoutkit.plan import Region
from layoutkit.storage import AnySource, ObjectSource, SourceSet
from layoutkit.timings import timed

ALL_FILTERS_SKIPPED = 0xFFFFFFFF  # a filter mask: the chunk's bytes are to be decoded by no filter
def _unlz4_hdf5(buf: bytes) -> bytes:
    # HDF5 LZ4 filter framing: u64 BE total size, u32 BE block size, then per block a
    # u32 BE compressed size and the block (stored raw when it did not shrink).
    total, block = struct.unpack(">QI", buf[:12])
    out = bytearray()
    pos = 12
    lz4 = numcodecs.LZ4()
    while len(out) < total:
        want = min(block, total - len(out))
        (csize,) = struct.unpack(">I", buf[pos : pos + 4])
        pos += 4
        piece = buf[pos : pos + csize]
        pos += csize
        out += piece if csize == want else lz4.decode(struct.pack("<I", want) + piece)
    return bytes(out)


def _unbitshuffle_hdf5(buf: bytes, options: tuple[int, ...], itemsize: int, chunk_bytes: int) -> bytes:
    # bitshuffle's HDF5 filter (bshuf_h5filter.c): with LZ4 (options[4] == 2) a 12-byte
    # header (u64 BE total bytes, u32 BE block bytes), then per block a u32 BE compressed
    # size and an LZ4 block of bit-shuffled data; the elements past the last multiple of
    # 8 are stored as they are. Without compression the whole chunk is bit-shuffled.
    import imagecodecs

    elem = options[2] if len(options) > 2 and options[2] else itemsize
    if len(options) <= 4 or options[4] == 0:
        block = options[3] if len(options) > 3 else 0
        return bytes(imagecodecs.bitshuffle_decode(buf, itemsize=elem, blocksize=block))
    total, block_bytes = struct.unpack(">QI", buf[:12])
    block_elems = block_bytes // elem
    nelem = total // elem
    out = bytearray()
    pos = 12
    done = 0
    while nelem - done >= 8:
        n = min(block_elems, nelem - done)
        n -= n % 8
        (csize,) = struct.unpack(">I", buf[pos : pos + 4])
        pos += 4
        shuffled = imagecodecs.lz4_decode(buf[pos : pos + csize], header=False, out=n * elem)
        pos += csize
        out += imagecodecs.bitshuffle_decode(shuffled, itemsize=elem, blocksize=n)
        done += n
    out += buf[pos : pos + (nelem - done) * elem]  # the leftover elements, unshuffled
    return bytes(out)


def _inflater(chunk_bytes: int) -> Callable[[bytes], bytes]:
    """Deflate decoding by libdeflate into a buffer of the chunk's size: 2-2.5x zlib's
    speed (measured on the sample's chunks). A stream that does not fit (a pipeline
    where deflate's output is not the chunk) goes to zlib, which also words the error
    of a corrupt one."""
    import imagecodecs

    if not chunk_bytes:
        return zlib.decompress

    def inflate(buf: bytes) -> bytes:
        try:
            # out= a size: a new bytes object (the stub says any buffer)
            return cast(bytes, imagecodecs.deflate_decode(buf, out=chunk_bytes))
        except RuntimeError:
            return zlib.decompress(buf)

    return inflate


def _decoder(fid: int, options: tuple[int, ...], itemsize: int, chunk_bytes: int = 0) -> Callable[[bytes], bytes]:
    if fid == Filter.GZIP:
        return _inflater(chunk_bytes)
    if fid == Filter.SHUFFLE:
        elementsize = options[0] if options else itemsize
        shuffle = numcodecs.Shuffle(elementsize=elementsize)
        return lambda b: bytes(shuffle.decode(b))
    if fid == Filter.ZSTD:
        zstd = numcodecs.Zstd()
        return lambda b: bytes(zstd.decode(b))
    if fid == Filter.BLOSC:
        blosc = numcodecs.Blosc()
        return lambda b: bytes(blosc.decode(b))
    if fid == Filter.LZ4:
        return _unlz4_hdf5
    if fid == Filter.FLETCHER32:  # checks and strips the 4-byte checksum HDF5 appends
        fletcher = numcodecs.Fletcher32()
        return lambda b: bytes(fletcher.decode(b))
    if fid == Filter.LZF:
        import imagecodecs

        # h5py's LZF filter stores raw LZF; the output size is the (shuffled) chunk's
        return lambda b: bytes(imagecodecs.lzf_decode(b, header=False, out=chunk_bytes))
    if fid == Filter.BITSHUFFLE:
        return lambda b: _unbitshuffle_hdf5(b, options, itemsize, chunk_bytes)
    raise AssertionError(f"no raw decoder for filter {fid}")


class _ChunkIndex:
    """Byte offset, size and filter mask of every allocated chunk of one dataset, by the
    chunk's origin."""

    def __init__(self, entries: dict[tuple[int, ...], tuple[int, int, int]], recorded_from_walk: bool = False) -> None:
        self.entries = entries
        self.recorded_from_walk = recorded_from_walk  # the walk's own: its verdict (``index_checked``) is on it

    @classmethod
    def recorded(cls, info: ArrayInfo) -> _ChunkIndex:
        """The index the inventory's walk kept (no call into h5py)."""
        assert info.chunk_entries is not None
        return cls({origin: (offset, size, mask) for origin, offset, size, mask in info.chunk_entries}, True)

    @classmethod
    def read(cls, ds: h5py.Dataset, fileobj: Any = None) -> _ChunkIndex:
        """The index read from the file now; in a bucket (``fileobj``), a many-chunk index
        is read level by level in concurrent GETs."""
        found = entries_in_bucket(ds, fileobj) if fileobj is not None else None
        if found is not None:
            return cls(found)
        entries = {}

        def add(info: Any) -> None:
            entries[tuple(info.chunk_offset)] = (info.byte_offset, info.size, info.filter_mask)

        try:
            ds.id.chunk_iter(add)
        except AttributeError:  # HDF5 older than 1.14
            for i in range(ds.id.get_num_chunks()):
                add(ds.id.get_chunk_info(i))
        return cls(entries)


def chunk_entries(ds: h5py.Dataset, fileobj: Any = None) -> dict[tuple[int, ...], tuple[int, int, int]]:
    """Where each allocated chunk of a chunked dataset is: origin -> (byte offset, stored
    size, filter mask); in a bucket (``fileobj``) a many-chunk index is read level by level."""
    return _ChunkIndex.read(ds, fileobj).entries


def raw_decoders(ds: h5py.Dataset) -> list[tuple[int, Callable[[bytes], bytes]]] | None:
    """The decoders of a chunked dataset's filter pipeline, by position, when layoutkit
    decodes its chunks itself (numbers or booleans, every filter in
    :data:`~layoutkit.hdf5.filters.RAW_DECODABLE`): None when h5py should read it."""
    dtype = ds.dtype
    if ds.chunks is None or dtype.kind not in "iufb" or dtype.fields or dtype.subdtype or not ds.shape:
        return None
    dcpl = ds.id.get_create_plist()
    filters = [dcpl.get_filter(i) for i in range(dcpl.get_nfilters())]
    for fid, _, options, _ in filters:
        if fid not in RAW_DECODABLE or (fid == Filter.BITSHUFFLE and len(options) > 4 and options[4] not in (0, 2)):
            return None
    chunk_bytes = int(np.prod(ds.chunks, dtype=np.int64)) * dtype.itemsize
    return [(i, _decoder(fid, tuple(options), dtype.itemsize, chunk_bytes)) for i, (fid, _, options, _) in enumerate(filters)]


def decode_chunked(ds: h5py.Dataset, entries: dict[tuple[int, ...], tuple[int, int, int]],
                   decoders: list[tuple[int, Callable[[bytes], bytes]]], read: Callable[[int, int], bytes],
                   pool: Any = None) -> np.ndarray:
    """A chunked dataset's values from its chunks' stored bytes (``read(offset, size)``),
    decoded here, on the threads of ``pool`` (none: on this one; deflate by libdeflate,
    which lets go of the GIL: h5py decodes on one thread, under its lock); unallocated chunks hold the fill
    value. Raises :class:`~layoutkit.errors.ChunkDecodeError` naming the chunk."""
    shape, chunks, dtype = tuple(ds.shape), tuple(ds.chunks), ds.dtype
    out = np.empty(shape, dtype)
    if len(entries) < chunk_count_of(shape, chunks):
        out.fill(ds.fillvalue)

    def place(origin: tuple[int, ...]) -> None:
        offset, size, mask = entries[origin]
        raw = read(offset, size)
        try:
            for position, decode in reversed(decoders):
                if not mask & (1 << position):
                    raw = decode(raw)
            chunk = np.frombuffer(raw, dtype=dtype).reshape((*chunks, *dtype.shape))  # (array types: a last axis)
        except (zlib.error, ValueError, RuntimeError, struct.error) as exc:
            raise ChunkDecodeError(ds.name, origin, _short(exc)) from None
        within = tuple(slice(0, min(c, n - o)) for o, c, n in zip(origin, chunks, shape))
        out[tuple(slice(o, o + w.stop) for o, w in zip(origin, within))] = chunk[within]

    for _ in (pool.map if pool is not None else map)(place, list(entries)):
        pass
    return out


def stored_ranges(ds: h5py.Dataset, fileobj: Any = None) -> list[tuple[int, int]]:
    """The ``(offset, size)`` byte ranges that hold a dataset's data in its file: its
    extent when contiguous, its allocated chunks when chunked (in a bucket, ``fileobj``,
    a many-chunk index read level by level); none when compact (the data is in the
    object header), unallocated, external or virtual."""
    dsid = ds.id
    layout = dsid.get_create_plist().get_layout()
    if layout == h5py.h5d.CONTIGUOUS:
        offset = dsid.get_offset()
        size = dsid.get_storage_size() if offset is not None else 0
        return [(offset, size)] if size else []
    if layout == h5py.h5d.CHUNKED:
        return [(offset, size) for offset, size, _ in chunk_entries(ds, fileobj).values() if size]
    return []


class RawReader:
    """Reads regions of one HDF5 source; safe to share between threads.

    Parameters
    ----------
    path
        The HDF5 file.
    arrays
        The inventory entries of the datasets that will be read.
    """

    def __init__(self, path: str | os.PathLike | ObjectSource, arrays: dict[str, ArrayInfo]) -> None:
        self.path = str(path)
        self.arrays = arrays
        self._file = open_source(path)
        # chunk bytes: pread on a local file, a ranged GET in a bucket; never through h5py
        self._remote = path if isinstance(path, ObjectSource) else None
        self._fd = -1 if self._remote is not None else os.open(self.path, os.O_RDONLY)
        self._lock = threading.Lock()
        self._indexes: dict[str, _ChunkIndex] = {}
        self._index_locks: dict[str, threading.Lock] = {}
        self._pipelines: dict[str, list[tuple[int, Callable[[bytes], bytes]]]] = {}
        # datasets whose chunk index failed the self-check (:meth:`_check`), and why:
        # read by HDF5, their stored chunks found by HDF5's own lookup
        self.untrusted: dict[str, str] = {}
        # filter pipeline and type -> why decoding them here is not HDF5's, or None
        self._decoding_checked: dict[tuple[Any, ...], str | None] = {}
        self._kinds_checked: set[tuple[Any, ...]] = set()  # in a bucket (:meth:`_first_of_its_kind`)
        self._ahead = threading.local()  # per thread: (offset, size) -> bytes fetched by prefetch()
        # per thread: (offset, size) -> bytes of the chunks the last self-check read, which
        # the copy that set it off reads next (a dataset of one or two chunks: all of it).
        # Not kept in _ahead: a check replaces what the last check held (a chunk another
        # thread's task copies is never taken here), where a prefetch's bytes stay until
        # the next prefetch, and the check runs between a prefetch and its reads
        self._checked = threading.local()
        self.bytes_read = 0

    def _pread(self, size: int, offset: int) -> bytes:
        checked = getattr(self._checked, "data", None)
        if checked and (offset, size) in checked:
            return checked.pop((offset, size))
        if self._remote is not None:
            ahead = getattr(self._ahead, "data", None)
            if ahead and (offset, size) in ahead:
                return ahead.pop((offset, size))
            with timed("read"):
                return self._remote.read_range(offset, size)
        with timed("read"):
            return os.pread(self._fd, size, offset)

    def prefetch(self, reads: list[tuple[str, Region]]) -> None:
        """Fetch the stored bytes of several upcoming ``read(path, region)`` calls of this
        thread at once. In a bucket this turns one round trip per dataset into one batch
        of concurrent, coalesced GETs for a whole task; locally it does nothing (preads
        are cheap). What the reads do not consume is dropped at the next prefetch."""
        if self._remote is None:
            return
        ranges: list[tuple[int, int]] = []
        for path, region in reads:
            info = self.arrays.get(path)
            if info is None or not info.shape or not region or not can_read_raw(info):
                continue
            if info.layout == "contiguous":
                if info.offset is None or not all(a == 0 and b == s for (a, b), s in zip(region[1:], info.shape[1:])):
                    continue
                row = int(np.prod(info.shape[1:], dtype=np.int64)) * info.dtype.itemsize
                (start, stop) = region[0]
                ranges.append((info.offset + start * row, (stop - start) * row))
                continue
            assert info.chunks is not None
            entries = self._index(info).entries
            spans = [range(a // c * c, b, c) for (a, b), c in zip(region, info.chunks)]
            ranges += [(e[0], e[1]) for o in itertools.product(*spans) if (e := entries.get(o)) is not None]
        ranges = list(dict.fromkeys(r for r in ranges if r[1] > 0))
        with timed("read"):
            self._ahead.data = dict(zip(ranges, self._remote.read_ranges(ranges))) if ranges else {}

    def _fetch(self, entries: list[tuple[int, int, int]]) -> dict[int, bytes]:
        """The stored bytes of several chunks, by offset: preads locally; in a bucket one
        request for them all, which obstore splits and coalesces (one round trip, not one
        per chunk)."""
        ahead = getattr(self._ahead, "data", None)
        if self._remote is not None and ahead:
            found = {o: ahead.pop((o, n)) for o, n, _ in entries if (o, n) in ahead}
            entries = [e for e in entries if e[0] not in found]
            return {**found, **self._fetch(entries)} if entries else found
        if self._remote is not None and len(entries) > 1:
            with timed("read"):
                return dict(zip((o for o, _, _ in entries), self._remote.read_ranges([(o, n) for o, n, _ in entries])))
        return {offset: self._pread(size, offset) for offset, size, _ in entries}

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._file.close()

    def __enter__(self) -> RawReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public -------------------------------------------------------------------

    def read(self, path: str, region: Region) -> np.ndarray:
        """Return the values of ``path`` in ``region`` as a numpy array.

        Raises
        ------
        ChunkDecodeError
            When a chunk's bytes cannot be read or decoded.
        """
        info = self.arrays[path]
        if len(region) > len(info.shape):  # an HDF5 array type's elements, as trailing axes (zarr_plan)
            outer = len(info.shape)
            values = self.read(path, region[:outer])
            inner: tuple[Any, ...] = (..., *(slice(a, b) for a, b in region[outer:]))
            return values[inner]
        if not info.shape:
            return np.asarray(self._read_h5py(info, region))
        if can_read_raw(info) and not self._distrusted(info):
            if info.layout == "contiguous":
                return self._read_contiguous(info, region)
            return self._read_chunked(info, region)
        return self._read_h5py(info, region)

    def allocated(self, path: str, region: Region) -> bool:
        """False when no byte of ``region`` was ever written in the source (it reads as
        the fill value), so a copy can skip it. Cheap: looks at the chunk index only."""
        info = self.arrays[path]
        if not region or not can_read_raw(info) or self._distrusted(info):
            return True
        if info.layout == "contiguous":
            return info.offset is not None
        assert info.chunks is not None
        index = self._index(info).entries
        ranges = [range(a // c * c, b, c) for (a, b), c in zip(region, info.chunks)]
        return any(origin in index for origin in itertools.product(*ranges))

    def stored_chunks(self, path: str, region: Region) -> dict[tuple[int, ...], tuple[bytes | None, int]]:
        """Every chunk of ``path`` that ``region`` touches: its stored (still encoded) bytes,
        or None when it was never written, and its filter mask."""
        info = self.arrays[path]
        assert info.chunks is not None
        origins = list(itertools.product(*(range(a // c * c, b, c) for (a, b), c in zip(region, info.chunks))))
        if self._distrusted(info):
            # every filter marked skipped: each allocated chunk is encoded again from
            # HDF5's read of it, whatever made the self-check fail
            return {origin: (data, ALL_FILTERS_SKIPPED if data is not None else 0)
                    for origin, (data, _) in ((o, self._direct_chunk(path, o)) for o in origins)}
        entries = self._index(info).entries
        fetched = self._fetch([entries[o] for o in origins if o in entries])
        out: dict[tuple[int, ...], tuple[bytes | None, int]] = {}
        for origin in origins:
            entry = entries.get(origin)
            data = fetched[entry[0]] if entry is not None else None
            self.bytes_read += len(data or b"")
            out[origin] = (data, entry[2] if entry is not None else 0)
        return out

    def chunk_locations(self, path: str, region: Region | None = None) -> Mapping[tuple[int, ...], tuple[int, int, int]] | None:
        """Where the allocated chunks of ``path`` that ``region`` touches (all, when None)
        lie in the file: origin -> (byte offset, stored size, filter mask); a contiguous
        dataset is one chunk at the origin. Reads the chunk index only. None when the raw path is not trusted
        with ``path`` (its index failed the self-check, or it is read through HDF5): a
        reference to its bytes could point at the wrong ones."""
        info = self.arrays[path]
        if not info.shape or not can_read_raw(info) or self._distrusted(info):
            return None
        if info.layout == "contiguous":
            if info.offset is None:
                return {}
            return {(0,) * len(info.shape): (info.offset, info.nbytes, 0)}
        assert info.chunks is not None
        entries = self._index(info).entries
        if region is None:  # the index itself, read-only (a copy per task of a large array's would add up)
            return MappingProxyType(entries)
        origins = itertools.product(*(range(a // c * c, b, c) for (a, b), c in zip(region, info.chunks)))
        return {o: entries[o] for o in origins if o in entries}

    def source_of(self, path: str) -> str | os.PathLike | ObjectSource:
        """The file that holds ``path``."""
        return self._remote if self._remote is not None else Path(self.path)

    def read_raw_chunk(self, path: str, origin: tuple[int, ...]) -> tuple[bytes, int]:
        """The stored (still encoded) bytes of the chunk at ``origin`` and its filter mask."""
        info = self.arrays[path]
        if self._distrusted(info):
            data, mask = self._direct_chunk(path, origin)
            if data is None:
                raise ChunkDecodeError(path, origin, "the chunk is not allocated")
            return data, mask
        entry = self._index(info).entries.get(origin)
        if entry is None:
            raise ChunkDecodeError(path, origin, "the chunk is not allocated")
        offset, size, mask = entry
        return self._pread(size, offset), mask

    # -- the self-check -------------------------------------------------------------

    def _distrusted(self, info: ArrayInfo) -> bool:
        """Whether ``info``'s chunk index failed the self-check (run on first use)."""
        if info.layout != "chunked" or info.raw_fallback:
            return bool(info.raw_fallback)
        if info.path not in self._indexes:
            self._index(info)
        return info.path in self.untrusted

    def _check(self, info: ArrayInfo, index: _ChunkIndex) -> str | None:
        """Why ``index`` must not place ``info``'s chunks, or None: the fast path checked
        against the reference, in three parts.

        The index must be possible (:func:`~layoutkit.hdf5.chunk_index.index_problem`);
        its first and last chunks must be the bytes HDF5's own lookup finds at their
        origins (``H5Dread_chunk``, with their filter masks), and a chunk it says was
        never written must be unwritten for HDF5 too: a wrong index is caught without
        decoding anything (:func:`~layoutkit.hdf5.chunk_index.index_disagreement`; for
        an index the walker processes recorded, they did it as they read it:
        ``index_checked``). The decoding is checked once per filter pipeline and type
        (the first dataset of each: a chunk decoded here against HDF5's read of it),
        since it depends on those alone: a check per dataset decoded every small
        dataset twice, and convert took 24% longer."""
        assert info.chunks is not None
        if (problem := index_problem(info.shape, info.chunks, index.entries)) is not None:
            return problem
        origins = list(index.entries)
        if info.index_checked is not None and index.recorded_from_walk:
            # the walker that recorded this index held it against HDF5's reads already
            problem, read = info.index_checked or None, dict[tuple[int, int], bytes]()
        else:
            ds = self._dataset(info.path)  # opened once for the reads of the check
            problem, read = index_disagreement(info.shape, info.chunks, index.entries,
                                               lambda origin: self._direct_chunk(info.path, origin, ds), self._pread)
        if problem is not None:
            return problem
        if not origins:
            return None
        key = (info.dtype.str, info.dtype.descr.__repr__(), tuple((f.id, f.options) for f in info.filters))
        if key not in self._decoding_checked:
            self._decoding_checked[key] = self._check_decoding(info, index, origins[-1])
        self._checked.data = read  # the last check's only: at most two chunks held
        return self._decoding_checked[key]

    def _check_decoding(self, info: ArrayInfo, index: _ChunkIndex, origin: tuple[int, ...]) -> str | None:
        """One chunk decoded here against HDF5's own read of its region."""
        assert info.chunks is not None
        region = tuple((o, min(o + c, n)) for o, c, n in zip(origin, info.chunks, info.shape))
        try:
            mine = self._read_chunked(info, region, index)
            with timed("h5py"):
                theirs = self._dataset(info.path)[tuple(slice(a, b) for a, b in region)]
        except (OSError, RuntimeError, ChunkDecodeError):
            return f"the chunk at {origin} cannot be read both ways"
        if not _same_values(mine, np.asarray(theirs)):
            return f"the chunk at {origin} decodes to other values than HDF5's own read"
        return None

    def _direct_chunk(self, path: str, origin: tuple[int, ...], ds: h5py.Dataset | None = None) -> tuple[bytes | None, int]:
        """A chunk's stored bytes and filter mask as HDF5 finds them
        (:func:`~layoutkit.hdf5.chunk_index.direct_chunk`). ``ds``: the dataset, when the
        caller opened it (an open by path is 120 us here, more than the read of a chunk)."""
        ds = ds if ds is not None else self._dataset(path)
        with timed("h5py"):
            data, mask = direct_chunk(ds, origin)
        self.bytes_read += len(data or b"")
        return data, mask

    # -- paths --------------------------------------------------------------------

    def _dataset(self, path: str) -> h5py.Dataset:
        info = self.arrays.get(path)
        return self._file[info.in_source if info is not None else path]

    def _read_h5py(self, info: ArrayInfo, region: Region) -> np.ndarray:
        # HDF5's own read, as the proof reads it (strings as text, references as paths)
        with timed("h5py"):
            return read_block(lambda _: self._file, info, region)

    def _read_contiguous(self, info: ArrayInfo, region: Region) -> np.ndarray:
        out_shape = tuple(b - a for a, b in region)
        full_trailing = all(a == 0 and b == s for (a, b), s in zip(region[1:], info.shape[1:]))
        offset = info.offset
        if offset is None:  # never written: all fill value
            return np.full(out_shape, info.fill_value, dtype=info.dtype)
        if not full_trailing:
            return self._read_h5py(info, region)
        row = int(np.prod(info.shape[1:], dtype=np.int64)) * info.dtype.itemsize
        start, stop = region[0]
        data = self._pread((stop - start) * row, offset + start * row)
        self.bytes_read += len(data)
        # an array type (float32 x 3) reads as h5py reads it: its elements as a last axis
        return np.frombuffer(data, dtype=info.dtype).reshape((*out_shape, *info.dtype.shape))

    def _index(self, info: ArrayInfo) -> _ChunkIndex:
        index = self._indexes.get(info.path)
        if index is None and info.chunk_entries is not None:  # recorded by the inventory's walk
            with self._lock:
                lock = self._index_locks.setdefault(info.path, threading.Lock())
            with lock:
                index = self._indexes.get(info.path)
                if index is None:
                    index = _ChunkIndex.recorded(info)
                    self._trust(info, index)
                    self._indexes[info.path] = index
        if index is None:
            with self._lock:  # one lock per dataset: indexes of others are read meanwhile
                lock = self._index_locks.setdefault(info.path, threading.Lock())
            with lock:
                index = self._indexes.get(info.path)
                if index is None:
                    with timed("index"):
                        index = _ChunkIndex.read(self._dataset(info.path), getattr(self._file, "_fileobj", None))
                    self._trust(info, index)
                    self._indexes[info.path] = index
        return index

    def _trust(self, info: ArrayInfo, index: _ChunkIndex) -> None:
        """Run the self-check on a dataset's index; when it fails, say so and read the
        dataset through HDF5 from now on (:attr:`untrusted`)."""
        if info.layout != "chunked" or not can_read_raw(info):
            return
        with timed("check"):
            # in a bucket HDF5's read of a chunk is a request of its own, in series: there
            # every index is checked for being possible, and the bytes of the first dataset
            # of each kind of index (its maximum shape's pattern) and pipeline as locally
            if self._remote is None or self._first_of_its_kind(info):
                problem = self._check(info, index)
            else:
                problem = index_problem(info.shape, info.chunks or (), index.entries)
        if problem is not None:
            self.untrusted[info.path] = problem
            warnings.warn(RawReadFallback(
                f"{info.path} is read through HDF5's own read, not as raw chunks: its chunk index failed "
                f"the self-check ({problem})"), stacklevel=2)

    def _first_of_its_kind(self, info: ArrayInfo) -> bool:
        """Whether ``info`` is the first dataset read here of its kind of chunk index
        (which axes are unlimited, bounded past the extent or fixed: what decides the
        index HDF5 gave it, and where its chunk queries have erred), filter pipeline and
        type: what a check of one chunk's bytes vouches for."""
        maxshape = info.maxshape or info.shape
        axes = tuple("unlimited" if m is None else "fixed" if m == n else "bounded" for m, n in zip(maxshape, info.shape))
        kind = (axes, tuple((f.id, f.options) for f in info.filters), info.dtype.str)
        with self._lock:
            if kind in self._kinds_checked:
                return False
            self._kinds_checked.add(kind)
            return True

    def _pipeline(self, info: ArrayInfo) -> list[tuple[int, Callable[[bytes], bytes]]]:
        pipe = self._pipelines.get(info.path)
        if pipe is None:
            itemsize = info.dtype.itemsize
            chunk_bytes = int(np.prod(info.chunks or (), dtype=np.int64)) * itemsize
            pipe = [(i, _decoder(f.id, f.options, itemsize, chunk_bytes)) for i, f in enumerate(info.filters)]
            self._pipelines[info.path] = pipe
        return pipe

    def _read_chunked(self, info: ArrayInfo, region: Region, index: _ChunkIndex | None = None) -> np.ndarray:
        assert info.chunks is not None
        chunks = info.chunks
        index = index or self._index(info)
        pipeline = self._pipeline(info)
        out = np.empty(tuple(b - a for a, b in region), dtype=info.dtype)
        first = [a // c * c for (a, _), c in zip(region, chunks)]
        ranges = [range(f, b, c) for f, (_, b), c in zip(first, region, chunks)]
        origins = list(itertools.product(*ranges))
        fetched = self._fetch([index.entries[o] for o in origins if o in index.entries])
        for origin in origins:
            entry = index.entries.get(origin)
            # the part of this chunk inside the region, in chunk and in output coordinates
            src = tuple(slice(max(a, o) - o, min(b, o + c) - o) for (a, b), o, c in zip(region, origin, chunks))
            dst = tuple(slice(max(a, o) - a, min(b, o + c) - a) for (a, b), o, c in zip(region, origin, chunks))
            if entry is None:
                out[dst] = info.fill_value if info.fill_value is not None else 0
                continue
            offset, size, mask = entry
            raw = fetched[offset]
            self.bytes_read += len(raw)
            try:
                with timed("decode"):
                    for position, decode in reversed(pipeline):
                        if not mask & (1 << position):
                            raw = decode(raw)
                chunk = np.frombuffer(raw, dtype=info.dtype).reshape((*chunks, *info.dtype.shape))  # (array types)
            except (zlib.error, ValueError, RuntimeError, struct.error) as exc:
                raise ChunkDecodeError(info.path, origin, _short(exc)) from None
            out[dst] = chunk[src]
        return out


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit, field by field (a compound's padding bytes are no value)."""
    if a.shape != b.shape:
        return False
    if a.dtype.names and b.dtype.names:
        return all(_same_values(a[n], b[n]) for n in a.dtype.names)
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype.itemsize == b.dtype.itemsize and a.tobytes() == b.tobytes()


MAX_OPEN_MEMBERS = 64
"""Files of a set a :class:`SetReader` holds open at once (an archive may be thousands
of files, a process's file descriptors ~1,000); the least recently used idle one closes."""


class SetReader:
    """Reads regions of the datasets of a :class:`~layoutkit.storage.SourceSet`, each from
    the member that holds it (:attr:`ArrayInfo.member`): a :class:`RawReader` per
    member, opened when first read, at most :data:`MAX_OPEN_MEMBERS` open at once (one in
    use is never closed). Safe to share between threads, as a :class:`RawReader` is."""

    def __init__(self, sources: SourceSet, arrays: dict[str, ArrayInfo]) -> None:
        self.path = str(sources)
        self.sources = sources
        self.arrays = arrays
        self._by_member: dict[int, dict[str, ArrayInfo]] = {}
        for path, info in arrays.items():
            for part in info.segments or (info,):
                self._by_member.setdefault(part.member, {})[path] = part
        self._readers: collections.OrderedDict[int, RawReader] = collections.OrderedDict()
        self._using: dict[int, int] = {}
        self._closed_bytes = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _member(self, member: int) -> Iterator[RawReader]:
        """The reader of one member, open while the block runs."""
        with self._lock:
            reader = self._readers.get(member)
            if reader is None:
                self._evict()
                reader = self._readers[member] = RawReader(self.sources.members[member], self._by_member[member])
            self._readers.move_to_end(member)
            self._using[member] = self._using.get(member, 0) + 1
        try:
            yield reader
        finally:
            with self._lock:
                self._using[member] -= 1

    def _evict(self) -> None:
        while len(self._readers) >= MAX_OPEN_MEMBERS:
            idle = next((m for m in self._readers if not self._using.get(m)), None)
            if idle is None:
                return  # every open one is being read: one more, for now
            reader = self._readers.pop(idle)
            self._closed_bytes += reader.bytes_read
            reader.close()

    def _of(self, path: str) -> contextlib.AbstractContextManager[RawReader]:
        return self._member(self.arrays[path].member)

    def _joined(self, info: ArrayInfo, region: Region) -> np.ndarray:
        """A region of an array joined from several sources along its first axis (netCDF
        files along their record dimension), each part decoded as xarray decodes it
        when the files encode it differently (:mod:`layoutkit.hdf5.concat`)."""
        from layoutkit.hdf5.concat import decode

        (a, b), rest = region[0], tuple(region[1:])
        parts, start = [], 0
        for seg in info.segments or ():
            lo, hi = max(a, start), min(b, start + seg.shape[0])
            if lo < hi:
                with self._member(seg.member) as reader:
                    data = reader.read(seg.path, ((lo - start, hi - start), *rest))
                parts.append(np.asarray(decode(seg, data) if info.unpack else data, dtype=info.dtype))
            start += seg.shape[0]
        if not parts:
            return np.empty((0, *(hi - lo for lo, hi in rest)), dtype=info.dtype)
        return np.concatenate(parts, axis=0)

    @property
    def bytes_read(self) -> int:
        with self._lock:
            return self._closed_bytes + sum(r.bytes_read for r in self._readers.values())

    def read(self, path: str, region: Region) -> np.ndarray:
        info = self.arrays[path]
        if info.segments is not None:
            return self._joined(info, region)
        with self._of(path) as reader:
            return reader.read(path, region)

    def allocated(self, path: str, region: Region) -> bool:
        if self.arrays[path].segments is not None:
            return True
        with self._of(path) as reader:
            return reader.allocated(path, region)

    def stored_chunks(self, path: str, region: Region) -> dict[tuple[int, ...], tuple[bytes | None, int]]:
        with self._of(path) as reader:
            return reader.stored_chunks(path, region)

    def read_raw_chunk(self, path: str, origin: tuple[int, ...]) -> tuple[bytes, int]:
        with self._of(path) as reader:
            return reader.read_raw_chunk(path, origin)

    def chunk_locations(self, path: str, region: Region | None = None) -> Mapping[tuple[int, ...], tuple[int, int, int]] | None:
        if self.arrays[path].segments is not None:
            return None  # joined from several files: no one file holds its chunks
        with self._of(path) as reader:
            return reader.chunk_locations(path, region)

    def source_of(self, path: str) -> str | os.PathLike | ObjectSource:
        return self.sources.members[self.arrays[path].member]

    def prefetch(self, reads: list[tuple[str, Region]]) -> None:
        """Each member's reads fetched together (:meth:`RawReader.prefetch`)."""
        by_member: dict[int, list[tuple[str, Region]]] = {}
        for path, region in reads:
            if path in self.arrays and self.arrays[path].segments is None:
                by_member.setdefault(self.arrays[path].member, []).append((path, region))
        for member, pieces in by_member.items():
            with self._member(member) as reader:
                reader.prefetch(pieces)

    def close(self) -> None:
        with self._lock:
            while self._readers:
                self._readers.popitem()[1].close()

    def __enter__(self) -> SetReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_reader(source: AnySource,
                arrays: dict[str, ArrayInfo]) -> RawReader | SetReader:
    """The reader of ``arrays`` in ``source``: one file's, or a set's."""
    if isinstance(source, SourceSet):
        return SetReader(source, arrays)
    return RawReader(source, arrays)


def _short(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__).rstrip(".")
