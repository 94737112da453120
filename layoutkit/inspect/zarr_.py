"""Inspecting a Zarr store (v2 or v3, a folder or a bucket prefix): its metadata documents,
the sizes of its chunk files, and the index at the end of each shard."""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from layoutkit.errors import LayoutkitError
from layoutkit.formats import PROVENANCE_ATTR, rule_of_attrs
from layoutkit.inspect.report import InspectReport, Tally, present_part, recorded_provenance
from layoutkit.options import ZarrFormat
from layoutkit.storage.retry import retrying

ZARR_METADATA = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})

class NotAStoreError(LayoutkitError, NotADirectoryError):
    """A directory that is not a Zarr store."""

def _zarr_codec_name(codec: dict[str, Any]) -> str | None:
    """A codec as layoutkit's compressor syntax where it has one (zstd:3, blosc:lz4:5:shuffle)."""
    name = codec.get("name") or codec.get("id")
    conf = codec.get("configuration") or {k: v for k, v in codec.items() if k != "id"}
    if name in ("bytes", "transpose", "vlen-utf8", "vlen-bytes", "crc32c"):
        return None
    if name in ("zstd", "gzip", "zlib"):
        level = conf.get("level")
        return f"{name}:{level}" if level is not None else name
    if name == "blosc":
        shuffle = conf.get("shuffle")
        shuffle = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}.get(shuffle, shuffle) if isinstance(shuffle, int) else shuffle
        return f"blosc:{conf.get('cname')}:{conf.get('clevel')}:{shuffle}"
    if name in ("numcodecs.shuffle", "shuffle"):
        return "shuffle"
    return str(name).removeprefix("numcodecs.")

def _zarr_array(doc: dict[str, Any], zarr_format: ZarrFormat) -> dict[str, Any]:
    """Shape, item size, chunk shape, codecs and sharding of one array's metadata."""
    if zarr_format == 3:
        codecs = doc.get("codecs") or []
        shard = codecs[0] if codecs and codecs[0].get("name") == "sharding_indexed" else None
        grid = tuple(doc["chunk_grid"]["configuration"]["chunk_shape"])
        dtype = doc.get("data_type")
        if shard is not None:
            conf = shard["configuration"]
            inner = tuple(conf["chunk_shape"])
            index_codecs = conf.get("index_codecs") or []
            return dict(shape=tuple(doc["shape"]), dtype=dtype, chunk=inner, shard=grid, codecs=conf.get("codecs") or [],
                        index_at_end=conf.get("index_location", "end") == "end",
                        index_crc=any(c.get("name") == "crc32c" for c in index_codecs))
        return dict(shape=tuple(doc["shape"]), dtype=dtype, chunk=grid, shard=None, codecs=codecs)
    codecs = [*(doc.get("filters") or []), *([doc["compressor"]] if doc.get("compressor") else [])]
    return dict(shape=tuple(doc["shape"]), dtype=doc.get("dtype"), chunk=tuple(doc["chunks"]), shard=None, codecs=codecs)

def _itemsize(dtype: Any) -> int:
    try:
        dt = np.dtype(dtype if not isinstance(dtype, list) else [tuple(f) for f in dtype])
    except (TypeError, ValueError):
        return 0  # variable-length strings and other types without a fixed size
    return 0 if dt.kind == "O" else dt.itemsize

def _shard_chunk_sizes(files: Any, key: str, size: int, inner_per_shard: int, at_end: bool, crc: bool) -> list[int]:
    """Sizes of the inner chunks a shard holds, from its index (16 bytes per chunk)."""
    want = inner_per_shard * 16 + (4 if crc else 0)
    raw = files.read(key, size - want if at_end else 0, want)
    index = np.frombuffer(raw[: inner_per_shard * 16], dtype="<u8").reshape(-1, 2)
    present = index[:, 0] != np.iinfo(np.uint64).max
    return [int(n) for n in index[present, 1]]

class FolderFiles:
    """The objects of a store folder: keys (``a/b/zarr.json``) and sizes, texts, byte ranges."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def entries(self) -> list[tuple[str, int]]:
        out = []
        for dirpath, _dirnames, filenames in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            for name in filenames:
                key = name if rel == "." else f"{Path(rel).as_posix()}/{name}"
                out.append((key, os.stat(os.path.join(dirpath, name)).st_size))
        return out

    def text(self, key: str) -> str:
        return (self.root / key).read_text()

    def read(self, key: str, offset: int, size: int) -> bytes:
        with open(self.root / key, "rb") as fh:
            fh.seek(offset)
            return fh.read(size)

class BucketFiles:
    """The objects of a store under a bucket prefix: one LIST, then GETs and ranged GETs."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def entries(self) -> list[tuple[str, int]]:
        from layoutkit.storage.buckets import list_keys

        return list_keys(self.store, "")

    def text(self, key: str) -> str:
        import obstore

        return retrying(lambda: bytes(obstore.get(self.store, key).bytes())).decode()

    def read(self, key: str, offset: int, size: int) -> bytes:
        import obstore

        return bytes(retrying(lambda: obstore.get_range(self.store, key, start=offset, length=size)))

class StoreFiles:
    """The objects of a zarr store read through zarr's own interface (an Icechunk
    repository's session: its keys listed, the sizes of a virtual store's referenced
    chunks those of the ranges they point to)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def entries(self) -> list[tuple[str, int]]:
        from zarr.core.sync import sync

        async def listed() -> list[tuple[str, int]]:
            import asyncio

            keys = [k async for k in self.store.list()]
            return list(zip(keys, await asyncio.gather(*(self.store.getsize(k) for k in keys))))

        return sync(listed())

    def text(self, key: str) -> str:
        return self.read(key, 0, -1).decode()

    def read(self, key: str, offset: int, size: int) -> bytes:
        from zarr.abc.store import OffsetByteRequest, RangeByteRequest
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        wanted = OffsetByteRequest(offset) if size < 0 else RangeByteRequest(offset, offset + size)
        buf = sync(self.store.get(key, default_buffer_prototype(), wanted if offset or size >= 0 else None))
        if buf is None:
            raise FileNotFoundError(key)
        return buf.to_bytes()


def inspect_zarr(root: Path, template: str) -> InspectReport:
    return inspect_zarr_store(FolderFiles(root), str(root), template)

def _parent(key: str) -> str:
    return key.rpartition("/")[0]

# long: one pass over the store's listing: each key is a document, a chunk or a shard, counted where met.
def inspect_zarr_store(files: Any, name: str, template: str) -> InspectReport:
    """The report of a Zarr store, from its objects (a folder's files or a prefix's keys)."""
    entries = files.entries()
    keys = {k for k, _ in entries}
    zarr_format: ZarrFormat
    if "zarr.json" in keys:
        zarr_format = 3
        root_doc = json.loads(files.text("zarr.json"))
        consolidated = root_doc.get("consolidated_metadata") is not None
        root_attrs = root_doc.get("attributes") or {}
    elif ".zgroup" in keys or ".zarray" in keys:
        zarr_format = 2
        consolidated = ".zmetadata" in keys
        root_attrs = json.loads(files.text(".zattrs")) if ".zattrs" in keys else {}
    else:
        raise NotAStoreError(f"{name!r} is a directory but not a Zarr store (no zarr.json or .zgroup).")
    tally = Tally()
    doc_name = "zarr.json" if zarr_format == 3 else ".zarray"
    group_doc = "zarr.json" if zarr_format == 3 else ".zgroup"
    arrays: dict[str, dict[str, Any]] = {}  # array folder ("" for the root) -> its metadata

    def owner(folder: str) -> str | None:
        """The array whose folder holds ``folder`` (itself included), if any."""
        while True:
            if folder in arrays:
                return folder
            if not folder:
                return None
            folder = _parent(folder)

    # v2: the arrays' attributes from the consolidated metadata, read once
    v2_meta = json.loads(files.text(".zmetadata")).get("metadata", {}) if zarr_format == 2 and consolidated else None
    docs = sorted((k for k in keys if k.rsplit("/", 1)[-1] in (doc_name, group_doc)), key=lambda k: k.count("/"))
    for key in docs:  # parents before children
        folder = _parent(key)
        if owner(folder) is not None:
            continue  # a document inside an array's folder is not a node of its own
        if key.endswith(doc_name):
            doc = json.loads(files.text(key))
            if zarr_format == 2 or doc.get("node_type") == "array":
                arrays[folder] = _zarr_array(doc, zarr_format)
                attrs = doc.get("attributes") if zarr_format == 3 else _v2_attrs(files, keys, folder, v2_meta)
                if (rule := rule_of_attrs(attrs or {})) is not None:
                    tally.type_rules[rule] += 1
                continue
        if key.endswith(group_doc):
            tally.groups += 1
    total = metadata = 0
    chunk_files: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for key, size in entries:
        total += size
        if key.rsplit("/", 1)[-1] in ZARR_METADATA:
            metadata += size
        elif (own := owner(_parent(key))) is not None:
            chunk_files[own].append((key, size))
    for folder, meta in sorted(arrays.items()):
        _zarr_stats(files, "/" + folder if folder else "/", meta, chunk_files[folder], tally)
    return tally.report(
        template,
        path=name,
        format=f"zarr v{zarr_format}",
        total_bytes=total,
        metadata_bytes=metadata,
        file_space=None,
        consolidated=consolidated,
        scales=None,
        duplicate_scales=None,
        shot_duplicate_scales=None,
        written_by=recorded_provenance(root_attrs.get(PROVENANCE_ATTR)),
    )

def _v2_attrs(files: Any, keys: set[str], folder: str, consolidated: dict[str, Any] | None) -> dict[str, Any]:
    """A Zarr v2 array's attributes: from the ``consolidated`` metadata when the store has
    it, else its own ``.zattrs`` (empty without one)."""
    key = f"{folder}/.zattrs" if folder else ".zattrs"
    if consolidated is not None:
        return consolidated.get(key) or {}
    return json.loads(files.text(key)) if key in keys else {}


def _zarr_stats(files: Any, path: str, meta: dict[str, Any], chunk_files: list[tuple[str, int]], tally: Tally) -> None:
    itemsize = _itemsize(meta["dtype"])
    names = [n for n in (_zarr_codec_name(c) for c in meta["codecs"]) if n]
    pipeline = "+".join(names) or "none"
    sharded = meta["shard"] is not None
    kinds = [n.split(":")[0] for n in names]
    tally.array(path, math.prod(meta["shape"]) * itemsize, "sharded" if sharded else "chunked", pipeline, kinds)
    logical = math.prod(meta["shape"]) * itemsize
    if not sharded:
        sizes = [size for _, size in chunk_files]
        tally.stored_piece(pipeline, present_part(logical, meta["shape"], meta["chunk"], len(sizes)), sizes)
        return
    per_shard = math.prod(-(-s // c) for s, c in zip(meta["shard"], meta["chunk"]))
    every: list[int] = []
    for shard, size in chunk_files:
        sizes = _shard_chunk_sizes(files, shard, size, per_shard, meta["index_at_end"], meta["index_crc"])
        every += sizes
        tally.stored += size - sum(sizes)  # the shard's index
    tally.stored_piece(pipeline, present_part(logical, meta["shape"], meta["chunk"], len(every)), every)

__all__ = ["BucketFiles", "FolderFiles", "NotAStoreError", "inspect_zarr", "inspect_zarr_store"]
