"""Whole Zarr v3 arrays read straight from their stored objects, without zarr's codec pipeline.

Most arrays layoutkit writes are one chunk (a signal, a time base), one shard (a shot's
packed bytes, a signal-major series) or a few shards (a long series). Reading such an
array whole through zarr costs more than its bytes: an ``Array`` object per read, and
every chunk decoded and copied through zarr's buffers on its one event-loop thread
(0.78 s for a 199 MB signal-major series of 13 shards, measured). Here the array's
objects are fetched with one concurrent GET each and decoded on the caller's side,
straight into the result: a shard's inner chunks on a small thread pool (zstd and zlib
release the GIL), so concurrent readers decode in parallel.

A :class:`DirectRead` is a plan worked out once from an array's metadata document. Only
plain layouts qualify: numbers, little-endian ``bytes``, then at most numcodecs' byte
``shuffle``, then at most ``zstd``, ``gzip`` or numcodecs' ``zlib`` (the chain a virtual
store spells HDF5's shuffle and deflate with); inside a shard, the same, with its index ``bytes`` + ``crc32c`` (checked, as
zarr checks it) at either end; at most :data:`MAX_OBJECTS` objects. Anything else gets
``None`` and zarr reads it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

MISSING = 2**64 - 1  # a shard index entry of a chunk that is not stored
_POOL: ThreadPoolExecutor | None = None


_POOL_THREADS = max(2, os.cpu_count() or 2)


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(_POOL_THREADS, thread_name_prefix="layoutkit-decode")
    return _POOL


def _forget_pool() -> None:
    # a forked child inherits the pool but not its threads: work sent to it would never run
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_forget_pool)


class ChecksumError(ValueError):
    """A shard index whose crc32c does not match its bytes (a damaged object)."""


@dataclass(frozen=True)
class DirectRead:
    """How to read a whole array from its stored objects (chunks, or shards of ``inner``
    chunks): their keys, and their decoding into one array."""

    keys: tuple[str, ...]  # the objects, in C order of the grid
    dtype: np.dtype
    chunk_shape: tuple[int, ...]  # an object's shape (the chunk, or the shard)
    shape: tuple[int, ...]  # the array's
    compressor: str | None  # "zstd", "gzip", "zlib" or None
    inner: tuple[int, ...] | None = None
    fill_value: Any = 0
    index_at_end: bool = True
    index_checksum: bool = True
    shuffle: int = 0  # numcodecs' byte shuffle of this element size, undone after decompressing (0: none)
    key_format: tuple[str, str] | None = None  # (encoding, separator): a part's keys made when the array's are not listed

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(-(-n // c) for n, c in zip(self.shape, self.chunk_shape))

    def decode(self, raw: Any) -> np.ndarray | None:
        """The array's values from its objects' bytes (any buffer: one, or a list of one
        per key, None for an object not stored): a new, writable array. None when a
        missing object (or a shard's missing chunk) needs a fill value this plan cannot
        give, or when no object is stored at all: zarr reads those.

        Raises
        ------
        ChecksumError
            When a shard's index does not match its checksum.
        """
        raws = raw if isinstance(raw, list) else [raw]
        if not self.keys or len(raws) != len(self.keys) or all(r is None for r in raws):
            return None
        if any(r is None for r in raws) and not _plain_number(self.fill_value):
            return None
        out = np.empty(self.shape, dtype=self.dtype)
        pieces: list[tuple[Any, tuple[slice, ...], tuple[int, ...]]] = []  # (bytes or None, where, block shape)
        for position, key, data in zip(np.ndindex(*self.grid), self.keys, raws):
            origin = tuple(k * c for k, c in zip(position, self.chunk_shape))
            if data is None:
                out[_region(origin, self.chunk_shape, self.shape)] = self.fill_value
            elif self.inner is None:
                pieces.append((data, _region(origin, self.chunk_shape, self.shape), self.chunk_shape))
            else:
                shard = self._shard_pieces(memoryview(data), origin, key)
                if shard is None:
                    return None
                pieces.extend(shard)

        def one(piece: tuple[Any, tuple[slice, ...], tuple[int, ...]]) -> None:
            data, where, block = piece
            if data is None:
                out[where] = self.fill_value
                return
            target = out[where]
            if self.compressor not in (None, "zlib") and not self.shuffle and target.shape == block and target.flags.c_contiguous:
                # a whole block that is one run of the result's memory: decoded in place,
                # no buffer of its own (allocating one per chunk kept two threads from
                # decoding any faster than one: page faults on fresh memory)
                _codec(self.compressor).decode(data, out=target.view(np.uint8).reshape(-1))
                return
            values = np.frombuffer(self._decompress(data), dtype=self.dtype).reshape(block)
            target[...] = values[tuple(slice(0, w.stop - w.start) for w in where)]

        if len(pieces) > 1 and self.compressor:
            # in runs, a few per thread: a task per chunk cost more than decoding it when
            # chunks are small (14,000 chunks of 0.5 kB: 0.9 s a scan, 0.5 s in runs)
            runs = max(1, min(len(pieces), 4 * _POOL_THREADS))

            def each(run: list[Any]) -> None:
                for piece in run:
                    one(piece)

            list(_pool().map(each, [pieces[k::runs] for k in range(runs)]))
        else:
            for piece in pieces:
                one(piece)
        return out

    def part(self, selection: Any) -> DirectRead | None:
        """The plan of a block of whole chunks of the array (on every axis a slice that
        starts on a chunk's edge and stops on one or at the array's end): its chunks' keys
        and its shape. None for any other selection, and for shards (their inner chunks
        are not objects of their own)."""
        if selection is None or selection is Ellipsis or selection == ():
            return self
        if self.inner is not None or not isinstance(selection, tuple) or len(selection) != len(self.shape):
            return None
        ranges, shape = [], []
        for s, n, c in zip(selection, self.shape, self.chunk_shape):
            if not isinstance(s, slice) or s.step not in (None, 1):
                return None
            start, stop, _ = s.indices(n)
            if stop <= start or start % c or (stop % c and stop != n):
                return None
            ranges.append(range(start // c, -(-stop // c)))
            shape.append(stop - start)
        grid = self.grid
        strides = [math.prod(grid[k + 1:]) for k in range(len(grid))]
        if self.keys:
            keys = tuple(self.keys[sum(i * s for i, s in zip(position, strides))]
                         for position in itertools.product(*ranges))
        elif self.key_format is not None and math.prod(len(r) for r in ranges) <= MAX_PART_OBJECTS:
            keys = tuple(_key(self.key_format, position) for position in itertools.product(*ranges))
        else:
            return None
        return dataclasses.replace(self, keys=keys, shape=tuple(shape))

    def cover(self, selection: Any) -> tuple[DirectRead, tuple[slice | int, ...]] | None:
        """The plan of the block of whole chunks that holds a basic selection (integers and
        slices of step 1, on the first axes), and the selection within that block: a
        hyperslab read as one merged read of the chunks it touches, as zarr would read
        them. None for other selections."""
        sel = () if selection is None or selection is Ellipsis else selection
        sel = sel if isinstance(sel, tuple) else (sel,)
        if len(sel) > len(self.shape):
            return None
        sel = sel + (slice(None),) * (len(self.shape) - len(sel))
        block, inner = [], []
        for s, n, c in zip(sel, self.shape, self.chunk_shape):
            if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
                index = int(s) + n if s < 0 else int(s)
                if not 0 <= index < n:
                    return None
                start, stop, keep = index, index + 1, index
            elif isinstance(s, slice) and s.step in (None, 1):
                start, stop, _ = s.indices(n)
                if stop <= start:
                    return None
                keep = None
            else:
                return None
            lo, hi = start - start % c, min(n, -(-stop // c) * c)
            block.append(slice(lo, hi))
            inner.append(keep - lo if keep is not None else slice(start - lo, stop - lo))
        part = self.part(tuple(block))
        return (part, tuple(inner)) if part is not None else None

    def _decompress(self, raw: Any) -> Any:
        if self.compressor == "zlib":  # the standard library's, without numcodecs' checks of its input:
            data = zlib.decompress(raw)  # 14,000 HDF5 deflate chunks of 0.5 kB, 0.2 s of checks
        else:
            data = _codec(self.compressor).decode(raw) if self.compressor else raw
        return _unshuffled(data, self.shuffle) if self.shuffle else data

    def decodes(self, raw: list[Any]) -> bool:
        """Whether :meth:`decode` is sure to give an array for these objects' bytes,
        without decoding them: it gives None only when nothing is stored, or when an
        object or a shard's inner chunk may be missing and the fill value is not a plain
        number."""
        if not self.keys or len(raw) != len(self.keys) or all(r is None for r in raw):
            return False
        return _plain_number(self.fill_value) or (self.inner is None and all(r is not None for r in raw))

    def _shard_pieces(self, raw: memoryview, origin: tuple[int, ...], key: str) -> list[Any] | None:
        """The inner chunks of one shard that fall inside the array: (bytes or None when
        not stored, where in the array, chunk shape); None when a missing chunk needs a
        fill value this plan cannot give."""
        assert self.inner is not None
        grid = tuple(s // c for s, c in zip(self.chunk_shape, self.inner))
        count = math.prod(grid)
        size = 16 * count + (4 if self.index_checksum else 0)
        index_bytes = raw[len(raw) - size :] if self.index_at_end else raw[:size]
        if self.index_checksum:
            import google_crc32c

            body, stored = index_bytes[:-4], bytes(index_bytes[-4:])
            if np.uint32(google_crc32c.value(bytes(body))).tobytes() != stored:
                raise ChecksumError(f"the index of shard {key!r} does not match its checksum")
            index_bytes = body
        index = np.frombuffer(index_bytes, dtype="<u8").reshape(count, 2)
        pieces: list[tuple[memoryview | bytes | None, tuple[slice, ...], tuple[int, ...]]] = []
        for i, position in enumerate(np.ndindex(*grid)):
            start = tuple(o + k * c for o, k, c in zip(origin, position, self.inner))
            if any(a >= n for a, n in zip(start, self.shape)):
                continue  # past the array's edge: never stored
            where = _region(start, self.inner, self.shape)
            if int(index[i, 0]) == MISSING:
                if not _plain_number(self.fill_value):
                    return None  # "NaN", "Infinity", hex floats...: zarr knows them
                pieces.append((None, where, self.inner))
                continue
            offset, length = int(index[i, 0]), int(index[i, 1])
            pieces.append((raw[offset : offset + length], where, self.inner))
        return pieces


@functools.cache
def _codec(name: str) -> Any:
    """The numcodecs codec of a compressor name, made once: called per chunk, and its
    decode keeps no state between calls."""
    import numcodecs

    return {"zstd": numcodecs.Zstd, "gzip": numcodecs.GZip, "zlib": numcodecs.Zlib}[name]()


def _unshuffled(data: Any, elementsize: int) -> np.ndarray:
    """numcodecs' (and HDF5's) byte shuffle undone: byte ``j`` of element ``i`` was stored
    at ``j * count + i``; bytes past the last whole element stay where they are. numpy's
    transpose, without numcodecs' checks of its input (a few microseconds a chunk, which
    counted for 14,000 small chunks)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    count = len(buf) // elementsize
    body = buf[: count * elementsize].reshape(elementsize, count).T.reshape(-1)
    return np.concatenate([body, buf[count * elementsize:]]) if len(buf) % elementsize else body


def _plain_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float))


def _region(origin: tuple[int, ...], block: tuple[int, ...], shape: tuple[int, ...]) -> tuple[slice, ...]:
    """Where a block at ``origin`` lies in the array, cut at its edge."""
    return tuple(slice(o, min(o + b, n)) for o, b, n in zip(origin, block, shape))


def _key_format(doc: dict[str, Any]) -> tuple[str, str] | None:
    """The array's chunk key encoding and separator; None for an unknown encoding."""
    keys = doc.get("chunk_key_encoding") or {}
    name = keys.get("name")
    if name not in ("default", "v2"):
        return None
    return name, (keys.get("configuration") or {}).get("separator", "/" if name == "default" else ".")


def _key(key_format: tuple[str, str], position: tuple[int, ...]) -> str:
    name, separator = key_format
    if name == "default":
        return "c" + "".join(f"{separator}{k}" for k in position)
    return separator.join(str(k) for k in position)


def _keys(doc: dict[str, Any], grid: tuple[int, ...]) -> tuple[str, ...] | None:
    """The keys of every object of the grid, in C order; None for an unknown encoding."""
    key_format = _key_format(doc)
    return None if key_format is None else tuple(_key(key_format, position) for position in np.ndindex(*grid))


def _plain_codecs(codecs: list[dict[str, Any]]) -> tuple[bool, str | None, int]:
    """Whether a codec chain is little-endian bytes, then at most numcodecs' shuffle, then
    at most zstd, gzip or numcodecs' zlib; the compressor and the shuffle's element size
    (0: none)."""
    if not codecs or codecs[0].get("name") != "bytes":
        return False, None, 0
    if (codecs[0].get("configuration") or {}).get("endian", "little") != "little":
        return False, None, 0
    rest, shuffle = codecs[1:], 0
    if rest and rest[0].get("name") == "numcodecs.shuffle":
        shuffle = int((rest[0].get("configuration") or {}).get("elementsize") or 0)
        if shuffle <= 0:
            return False, None, 0
        rest = rest[1:]
    if not rest:
        return True, None, shuffle
    if len(rest) == 1 and rest[0].get("name") in _COMPRESSORS:
        return True, _COMPRESSORS[rest[0]["name"]], shuffle
    return False, None, 0


_COMPRESSORS = {"zstd": "zstd", "gzip": "gzip", "numcodecs.zlib": "zlib"}


MAX_OBJECTS = 256  # more objects than this: zarr reads the array, with its own limits
MAX_PART_OBJECTS = 65536  # a part of an array planned here reads at most this many objects


def plan_direct_read(doc: dict[str, Any], shape: tuple[int, ...], dtype: np.dtype,
                     any_size: bool = False) -> DirectRead | None:
    """The plan for a Zarr v3 array of numbers stored in at most :data:`MAX_OBJECTS`
    chunks or shards of plain codecs, from its metadata document; None for anything else
    (zarr reads it). ``any_size``: an array of more objects too, whose plan lists no keys
    and reads only parts of the array (:meth:`DirectRead.part`)."""
    if not shape or 0 in shape or dtype.kind not in "biufc?" or dtype.byteorder == ">":
        return None
    grid_doc = doc.get("chunk_grid") or {}
    chunk_shape = tuple((grid_doc.get("configuration") or {}).get("chunk_shape") or ())
    if grid_doc.get("name") != "regular" or len(chunk_shape) != len(shape) or 0 in chunk_shape:
        return None
    grid = tuple(-(-n // c) for n, c in zip(shape, chunk_shape))
    key_format = _key_format(doc)
    if key_format is None or (math.prod(grid) > MAX_OBJECTS and not any_size):
        return None
    keys = _keys(doc, grid) if math.prod(grid) <= MAX_OBJECTS else ()
    dtype = dtype.newbyteorder("<") if dtype.itemsize > 1 else dtype
    codecs = list(doc.get("codecs") or ())
    fill_value = doc.get("fill_value", 0)
    if len(codecs) == 1 and codecs[0].get("name") == "sharding_indexed":
        return _plan_shard(codecs[0].get("configuration") or {}, keys, dtype, chunk_shape, shape, fill_value) if keys \
            else None
    plain, compressor, shuffle = _plain_codecs(codecs)
    return DirectRead(keys or (), dtype, chunk_shape, shape, compressor, None, fill_value, shuffle=shuffle,
                      key_format=key_format) if plain else None


def _plan_shard(config: dict[str, Any], keys: tuple[str, ...], dtype: np.dtype, shard: tuple[int, ...], shape: tuple[int, ...],
                fill_value: Any) -> DirectRead | None:
    inner = tuple(config.get("chunk_shape") or ())
    if len(inner) != len(shard) or any(c <= 0 or s % c for s, c in zip(shard, inner)):
        return None
    plain, compressor, shuffle = _plain_codecs(list(config.get("codecs") or ()))
    index_codecs = [c.get("name") for c in config.get("index_codecs") or ()]
    index_endian = ((config.get("index_codecs") or [{}])[0].get("configuration") or {}).get("endian", "little")
    if not plain or index_codecs not in (["bytes"], ["bytes", "crc32c"]) or index_endian != "little":
        return None
    location = config.get("index_location", "end")
    if location not in ("start", "end"):
        return None
    return DirectRead(keys, dtype, shard, shape, compressor, inner, fill_value, location == "end",
                      index_codecs[-1] == "crc32c", shuffle)


__all__ = ["MAX_OBJECTS", "MAX_PART_OBJECTS", "ChecksumError", "DirectRead", "plan_direct_read"]
