"""Whole Zarr v3 arrays read straight from their stored objects, without zarr's codec pipeline.

Most arrays layoutkit writes are one chunk (a signal, a time base) or one shard (a shot's
packed bytes, a small signal-major series). Reading such an array whole through zarr
costs more than its bytes: an ``Array`` object per read, and for a shard a request for
its index before a request for its chunks, every inner chunk then decoded on zarr's one
event-loop thread. Here a whole array is one GET of its one object, and decoding happens
on the caller's thread (a shard's inner chunks on a small thread pool; zstd and zlib
release the GIL), so concurrent readers decode in parallel.

A :class:`DirectRead` is a plan worked out once from an array's metadata document. Only
plain layouts qualify: numbers, little-endian ``bytes``, then at most ``zstd`` or
``gzip``; inside a shard, the same, with its index ``bytes`` + ``crc32c`` (checked, as
zarr checks it) at either end. Anything else gets ``None`` and zarr reads it.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

MISSING = 2**64 - 1  # a shard index entry of a chunk that is not stored
_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max(2, os.cpu_count() or 2), thread_name_prefix="layoutkit-decode")
    return _POOL


class ChecksumError(ValueError):
    """A shard index whose crc32c does not match its bytes (a damaged object)."""


@dataclass(frozen=True)
class DirectRead:
    """How to read a whole array from its one stored object: its key and its decoding.

    ``inner`` is the shape of a shard's inner chunks, or None when the object is a plain
    chunk.
    """

    key: str
    dtype: np.dtype
    chunk_shape: tuple[int, ...]  # the stored object's shape (the chunk, or the shard)
    shape: tuple[int, ...]  # the array's
    compressor: str | None  # "zstd", "gzip" or None
    inner: tuple[int, ...] | None = None
    fill_value: Any = 0
    index_at_end: bool = True
    index_checksum: bool = True

    def decode(self, raw: bytes) -> np.ndarray | None:
        """The array's values from the object's bytes (a writable array); None when the
        object is a shard whose missing chunks need a fill value this plan cannot give.

        Raises
        ------
        ChecksumError
            When a shard's index does not match its checksum.
        """
        if self.inner is None:
            block = np.frombuffer(self._decompress(raw), dtype=self.dtype).reshape(self.chunk_shape)
        else:
            block = self._decode_shard(memoryview(raw))
            if block is None:
                return None
        return block[tuple(slice(0, n) for n in self.shape)].copy()  # writable, as zarr's are

    def _decompress(self, raw: Any) -> Any:
        if self.compressor == "zstd":
            from numcodecs import Zstd

            return Zstd().decode(raw)
        if self.compressor == "gzip":
            from numcodecs import GZip

            return GZip().decode(raw)
        return raw

    def _decode_shard(self, raw: memoryview) -> np.ndarray | None:
        assert self.inner is not None
        grid = tuple(s // c for s, c in zip(self.chunk_shape, self.inner))
        count = math.prod(grid)
        size = 16 * count + (4 if self.index_checksum else 0)
        index_bytes = raw[len(raw) - size :] if self.index_at_end else raw[:size]
        if self.index_checksum:
            import google_crc32c

            body, stored = index_bytes[:-4], bytes(index_bytes[-4:])
            if np.uint32(google_crc32c.value(bytes(body))).tobytes() != stored:
                raise ChecksumError(f"{self.key}: the shard index does not match its checksum")
            index_bytes = body
        index = np.frombuffer(index_bytes, dtype="<u8").reshape(count, 2)
        missing = index[:, 0] == MISSING
        if missing.any() and not isinstance(self.fill_value, (bool, int, float)):
            return None  # "NaN", "Infinity", hex floats...: zarr knows them
        out = np.empty(self.chunk_shape, dtype=self.dtype)

        def one(i: int) -> None:
            where = tuple(
                slice(k * c, (k + 1) * c) for k, c in zip(np.unravel_index(i, grid), self.inner)  # type: ignore[arg-type]
            )
            if missing[i]:
                out[where] = self.fill_value
                return
            start, length = int(index[i, 0]), int(index[i, 1])
            data = self._decompress(raw[start : start + length])
            out[where] = np.frombuffer(data, dtype=self.dtype).reshape(self.inner)

        if count > 1 and self.compressor:
            list(_pool().map(one, range(count)))
        else:
            for i in range(count):
                one(i)
        return out


def _key(doc: dict[str, Any], ndim: int) -> str | None:
    keys = doc.get("chunk_key_encoding") or {}
    separator = (keys.get("configuration") or {}).get("separator", "/")
    if keys.get("name") == "default":
        return "c" + "".join(f"{separator}0" for _ in range(ndim))
    if keys.get("name") == "v2":
        return separator.join("0" for _ in range(ndim))
    return None


def _plain_codecs(codecs: list[dict[str, Any]]) -> tuple[bool, str | None]:
    """Whether a codec chain is little-endian bytes then at most zstd or gzip, and which."""
    if not codecs or codecs[0].get("name") != "bytes":
        return False, None
    if (codecs[0].get("configuration") or {}).get("endian", "little") != "little":
        return False, None
    if len(codecs) == 1:
        return True, None
    if len(codecs) == 2 and codecs[1].get("name") in ("zstd", "gzip"):
        return True, codecs[1]["name"]
    return False, None


def plan_direct_read(doc: dict[str, Any], shape: tuple[int, ...], dtype: np.dtype) -> DirectRead | None:
    """The plan for a Zarr v3 array of numbers stored as one chunk or one shard of plain
    codecs, from its metadata document; None for anything else (zarr reads it)."""
    if not shape or 0 in shape or dtype.kind not in "biufc?" or dtype.byteorder == ">":
        return None
    grid = doc.get("chunk_grid") or {}
    chunk_shape = tuple((grid.get("configuration") or {}).get("chunk_shape") or ())
    if grid.get("name") != "regular" or len(chunk_shape) != len(shape) or any(c < n for c, n in zip(chunk_shape, shape)):
        return None
    key = _key(doc, len(shape))
    if key is None:
        return None
    dtype = dtype.newbyteorder("<") if dtype.itemsize > 1 else dtype
    codecs = list(doc.get("codecs") or ())
    if len(codecs) == 1 and codecs[0].get("name") == "sharding_indexed":
        return _plan_shard(codecs[0].get("configuration") or {}, key, dtype, chunk_shape, shape, doc.get("fill_value", 0))
    plain, compressor = _plain_codecs(codecs)
    return DirectRead(key, dtype, chunk_shape, shape, compressor) if plain else None


def _plan_shard(config: dict[str, Any], key: str, dtype: np.dtype, shard: tuple[int, ...], shape: tuple[int, ...],
                fill_value: Any) -> DirectRead | None:
    inner = tuple(config.get("chunk_shape") or ())
    if len(inner) != len(shard) or any(c <= 0 or s % c for s, c in zip(shard, inner)):
        return None
    plain, compressor = _plain_codecs(list(config.get("codecs") or ()))
    index_codecs = [c.get("name") for c in config.get("index_codecs") or ()]
    index_endian = ((config.get("index_codecs") or [{}])[0].get("configuration") or {}).get("endian", "little")
    if not plain or index_codecs not in (["bytes"], ["bytes", "crc32c"]) or index_endian != "little":
        return None
    location = config.get("index_location", "end")
    if location not in ("start", "end"):
        return None
    return DirectRead(key, dtype, shard, shape, compressor, inner, fill_value, location == "end",
                      index_codecs[-1] == "crc32c")


__all__ = ["ChecksumError", "DirectRead", "plan_direct_read"]
