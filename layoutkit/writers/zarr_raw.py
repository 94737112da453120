"""HDF5 chunks as Zarr chunks, byte for byte (``convert --compressor source``).

A stored HDF5 chunk is a valid Zarr chunk once the dataset's filter pipeline is spelled
as Zarr codecs (kerchunk and VirtualiZarr reference such chunks in place): deflate is
zlib (HDF5 writes the zlib format, not gzip), shuffle is numcodecs' byte shuffle,
fletcher32 is numcodecs' Fletcher32 (the same checksum, appended the same way), and the
hdf5plugin zstd and blosc filters write plain zstd frames and blosc frames. HDF5 stores
edge chunks whole, as Zarr does, so the chunk grids match when the Zarr chunk shape is
the HDF5 one. The mapping itself is pure (:mod:`layoutkit.hdf5.encoding`, which planning
uses); here its stages become zarr's codec objects. Pipelines with anything else have no
Zarr spelling, and those arrays are decoded and re-encoded.

:func:`encode_shard` assembles a Zarr v3 shard from stored chunks and the shard index
(little-endian ``(offset, nbytes)`` pairs followed by their CRC32C), so sharded output
is written at copy speed too.
"""

from __future__ import annotations

from typing import Any

import google_crc32c
import numcodecs
import numpy as np
import zarr.codecs
import zarr.codecs.numcodecs

from layoutkit.hdf5.encoding import SourceEncoding

EMPTY = 2**64 - 1  # a shard index entry of a chunk that is not stored


def zarr3_codecs(encoding: SourceEncoding) -> list[Any]:
    """The bytes-to-bytes codecs of a Zarr v3 array (zstd and blosc are the specification's
    own; zlib, shuffle and fletcher32 are numcodecs', which zarr-python reads)."""
    out: list[Any] = []
    for s in encoding.stages:
        o = s.options
        if s.name == "zlib":
            out.append(zarr.codecs.numcodecs.Zlib(level=o["level"]))
        elif s.name == "shuffle":
            out.append(zarr.codecs.numcodecs.Shuffle(elementsize=o["elementsize"]))
        elif s.name == "fletcher32":
            out.append(zarr.codecs.numcodecs.Fletcher32())
        elif s.name == "zstd":
            out.append(zarr.codecs.ZstdCodec(level=o["level"]))
        else:
            out.append(zarr.codecs.BloscCodec(cname=o["cname"], clevel=o["clevel"], shuffle=o["shuffle"],
                                              typesize=o["typesize"]))
    return out


def zarr2_codecs(encoding: SourceEncoding) -> tuple[list[Any], Any]:
    """Zarr v2 ``filters`` and ``compressor``: the last stage compresses, the rest filter."""
    codecs: list[Any] = []
    for s in encoding.stages:
        o = s.options
        if s.name == "zlib":
            codecs.append(numcodecs.Zlib(level=o["level"]))
        elif s.name == "shuffle":
            codecs.append(numcodecs.Shuffle(elementsize=o["elementsize"]))
        elif s.name == "fletcher32":
            codecs.append(numcodecs.Fletcher32())
        elif s.name == "zstd":
            codecs.append(numcodecs.Zstd(level=o["level"]))
        else:
            codecs.append(numcodecs.Blosc(cname=o["cname"], clevel=o["clevel"],
                                          shuffle={"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[o["shuffle"]]))
    return codecs[:-1], (codecs[-1] if codecs else None)


def shard_index_supported(sharding: dict[str, Any]) -> bool:
    """True when :func:`encode_shard` writes the index this sharding codec reads."""
    names = [c.get("name") for c in sharding.get("index_codecs", [])]
    endian = ((sharding.get("index_codecs") or [{}])[0].get("configuration") or {}).get("endian", "little")
    return names in (["bytes", "crc32c"], ["bytes"]) and endian == "little" and \
        sharding.get("index_location", "end") in ("start", "end")


def encode_shard(chunks: list[bytes | None], per_shard: tuple[int, ...], sharding: dict[str, Any]) -> list[bytes] | None:
    """One shard object from its inner chunks' stored bytes (C order over ``per_shard``;
    ``None``: not stored), as the parts it is made of, in order (written one after the
    other, not joined: a shard is up to the memory budget, and its chunks are already in
    memory), or None when no chunk is stored (the shard is left out)."""
    if not any(c is not None for c in chunks):
        return None
    index = np.full((len(chunks), 2), EMPTY, dtype="<u8")
    crc = [c.get("name") for c in sharding.get("index_codecs", [])] == ["bytes", "crc32c"]
    index_bytes = len(chunks) * 16 + (4 if crc else 0)
    at_start = sharding.get("index_location", "end") == "start"
    offset = index_bytes if at_start else 0
    body = []
    for i, c in enumerate(chunks):
        if c is None:
            continue
        index[i] = (offset, len(c))
        offset += len(c)
        body.append(c)
    raw = index.reshape(*per_shard, 2).tobytes()
    if crc:
        raw += np.uint32(google_crc32c.value(raw)).astype("<u4").tobytes()
    return [raw, *body] if at_start else [*body, raw]


__all__ = ["encode_shard", "shard_index_supported", "zarr2_codecs", "zarr3_codecs"]
