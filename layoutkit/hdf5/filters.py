"""HDF5's filters: one table of ids and names for every module that reads or writes them.

The ids are HDF5's own (1-6) and the registered plugins'
(https://portal.hdfgroup.org/documentation/hdf5-docs/registered_filter_plugins.html).
The inventory names a dataset's pipeline with :func:`filter_name`, the raw reader
decodes the ids in :data:`RAW_DECODABLE` itself (:func:`can_read_raw`: which datasets
it reads, what planning needs to know), ``convert --compressor source`` maps
some of them to Zarr codecs, and ``reorder`` compares a source's pipeline with the one it
would write by :func:`pipeline_levels`.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from layoutkit.hdf5.model import ArrayInfo


class Filter(IntEnum):
    """HDF5 filter ids layoutkit knows by name."""

    GZIP = 1  # deflate, in the zlib format
    SHUFFLE = 2
    FLETCHER32 = 3
    SZIP = 4
    NBIT = 5
    SCALEOFFSET = 6
    BZIP2 = 307
    LZF = 32000
    BLOSC = 32001
    LZ4 = 32004
    BITSHUFFLE = 32008
    ZFP = 32013
    ZSTD = 32015
    SZ = 32017
    BLOSC2 = 32026


FILTER_NAMES: dict[int, str] = {f.value: f.name.lower() for f in Filter}
"""Filter id -> the name layoutkit reports (``gzip``, ``shuffle``, ``zstd``...)."""

LEVELLED = frozenset({Filter.GZIP, Filter.ZSTD})
"""Filters whose first option is their compression level."""

RAW_DECODABLE = frozenset({
    Filter.GZIP, Filter.SHUFFLE, Filter.FLETCHER32, Filter.LZF, Filter.BLOSC, Filter.LZ4, Filter.BITSHUFFLE,
    Filter.ZSTD,
})
"""Filters whose chunks layoutkit decodes itself, outside h5py's lock."""


def filter_name(fid: int, plugin_name: bytes | str = b"") -> str:
    """The name of filter ``fid``: layoutkit's, else the one its plugin registered, else
    ``"filter <id>"``."""
    if fid in FILTER_NAMES:
        return FILTER_NAMES[fid]
    if isinstance(plugin_name, bytes):
        plugin_name = plugin_name.decode(errors="replace")
    return plugin_name or f"filter {fid}"


def level_of(fid: int, options: tuple[int, ...] | list[int]) -> int | None:
    """The compression level a filter's options hold, or None for a filter without one."""
    return int(options[0]) if fid in LEVELLED and options else None


def pipeline_levels(filters: Iterable[tuple[int, tuple[int, ...]]]) -> tuple[tuple[int, int | None], ...]:
    """``(id, level)`` of each stage of a pipeline given as ``(id, options)``."""
    return tuple((fid, level_of(fid, options)) for fid, options in filters)


RAW_KINDS = frozenset({"numeric", "bool", "fixed-bytes", "enum", "opaque", "compound"})


def can_read_raw(info: ArrayInfo) -> bool:
    """True when the reader can decode this dataset's chunks itself."""
    if info.kind not in RAW_KINDS or info.external or info.dtype.hasobject or info.raw_fallback or info.strpad:
        return False
    if info.layout == "contiguous":
        return not info.filters
    if info.layout != "chunked":
        return False
    for f in info.filters:
        if f.id not in RAW_DECODABLE:
            return False
        # bitshuffle: plain, or with LZ4 blocks (4); its zstd mode (3) goes through h5py
        if f.id == Filter.BITSHUFFLE and len(f.options) > 4 and f.options[4] not in (0, 2):
            return False
    return True


__all__ = ["FILTER_NAMES", "RAW_KINDS", "Filter", "LEVELLED", "RAW_DECODABLE", "can_read_raw", "filter_name", "level_of",
           "pipeline_levels"]
