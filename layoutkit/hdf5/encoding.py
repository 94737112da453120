"""An HDF5 dataset's filter pipeline spelled as Zarr codecs: the mapping that
``convert --compressor source`` copies stored chunks by (and that a virtual reference
to a chunk where it lies would need).

A stored HDF5 chunk is a valid Zarr chunk once the dataset's filter pipeline is spelled
as Zarr codecs (kerchunk and VirtualiZarr reference such chunks in place): deflate is
zlib (HDF5 writes the zlib format, not gzip), shuffle is numcodecs' byte shuffle,
fletcher32 is numcodecs' Fletcher32 (the same checksum, appended the same way), and the
hdf5plugin zstd and blosc filters write plain zstd frames and blosc frames. Pipelines
with anything else (scale-offset, n-bit, szip, HDF5's own LZ4 framing, bitshuffle, LZF,
unknown ids) have no Zarr spelling: :func:`source_encoding` names the reason. Pure: the
codecs are names and configurations here (:mod:`layoutkit.writers.zarr_raw` builds them),
so that planning imports neither zarr nor numcodecs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from layoutkit.hdf5.filters import Filter
from layoutkit.hdf5.model import ArrayInfo, long_double

# what has no Zarr codec, said the way the summary says it
_UNMAPPED: dict[int, str] = {
    Filter.SZIP: "szip",
    Filter.NBIT: "nbit",
    Filter.SCALEOFFSET: "scaleoffset",
    Filter.LZF: "lzf",
    Filter.LZ4: "lz4 (HDF5's LZ4 framing, which no Zarr codec reads)",
    Filter.BITSHUFFLE: "bitshuffle",
}
BLOSC_CNAMES = {0: "blosclz", 1: "lz4", 2: "lz4hc", 3: "snappy", 4: "zlib", 5: "zstd"}
BLOSC_SHUFFLES = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}
RAW_COPY_KINDS = frozenset({"numeric", "bool", "enum"})  # same bytes in HDF5 and Zarr

@dataclass(frozen=True)
class Stage:
    """One codec of a source encoding: ``zlib``, ``shuffle``, ``fletcher32``, ``zstd`` or
    ``blosc``, with its configuration."""

    name: str
    config: tuple[tuple[str, Any], ...] = ()

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.config)


@dataclass(frozen=True)
class SourceEncoding:
    """A dataset's HDF5 filter pipeline as Zarr codecs, in the order they encode."""

    stages: tuple[Stage, ...]

    def __str__(self) -> str:
        return "+".join(s.name for s in self.stages) or "none"


def source_encoding(info: ArrayInfo) -> SourceEncoding | str:
    """The Zarr spelling of ``info``'s filter pipeline, or why its stored chunks cannot be
    copied as they are (a phrase such as ``"uses scaleoffset"``)."""
    if info.layout != "chunked" or not info.chunks:
        return f"has {info.layout} storage, not chunks"
    if info.kind not in RAW_COPY_KINDS or info.dtype.hasobject:
        return f"holds {info.kind} values (only numbers are copied as stored)"
    if long_double(info.dtype):
        return "holds long doubles (stored as text)"
    if info.raw_fallback:
        return f"is read through HDF5 ({info.raw_fallback})"
    stages = []
    for f in info.filters:
        if f.id in _UNMAPPED:
            return f"uses {_UNMAPPED[f.id]}"
        if f.id == Filter.GZIP:
            stages.append(Stage("zlib", (("level", f.options[0] if f.options else 4),)))
        elif f.id == Filter.SHUFFLE:
            stages.append(Stage("shuffle", (("elementsize", f.options[0] if f.options else info.dtype.itemsize),)))
        elif f.id == Filter.FLETCHER32:
            stages.append(Stage("fletcher32"))
        elif f.id == Filter.ZSTD:
            stages.append(Stage("zstd", (("level", f.options[0] if f.options else 3),)))
        elif f.id == Filter.BLOSC:
            opts = tuple(f.options) + (0,) * 7
            stages.append(Stage("blosc", (
                ("cname", BLOSC_CNAMES.get(opts[6], "blosclz")),
                ("clevel", opts[4] if len(f.options) > 4 else 5),
                ("shuffle", BLOSC_SHUFFLES.get(opts[5] if len(f.options) > 5 else 1, "shuffle")),
                ("typesize", opts[2] or info.dtype.itemsize),
            )))
        else:
            return f"uses the filter {f.name or 'unknown'} (id {f.id})"
    return SourceEncoding(tuple(stages))


__all__ = ["BLOSC_CNAMES", "BLOSC_SHUFFLES", "RAW_COPY_KINDS", "SourceEncoding", "Stage", "source_encoding"]
