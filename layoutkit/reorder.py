"""``layoutkit reorder``: rewrite an HDF5 file as paged-aggregation HDF5, its bytes
ordered shot-major, signal-major or by hierarchy.

Shares the inventory, chunk planning, raw chunk reader and destination handling with
``convert``. The hierarchy stays exactly as in the source; only where bytes sit
changes: every object is created first (metadata pages at the front), then raw data is
written in the chosen order, chunks encoded in parallel and handed to HDF5 in order.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from layoutkit.convert import check_destination, remove_path, replace_path, temporary_sibling
from layoutkit.errors import InvalidOptionError, MissingFilterError, UnsupportedFeatureError
from layoutkit.execute import map_ordered
from layoutkit.inventory import ArrayInfo, Inventory, open_source, read_inventory
from layoutkit.options import ChunkSpec, CompressorSpec, parse_chunks, parse_compressor
from layoutkit.plan import (
    DEFAULT_TEMPLATE,
    Region,
    compile_template,
    iter_blocks,
    match_template,
    plan_chunks,
    plan_page_size,
    region_size,
    write_order,
)
from layoutkit.recipes import provenance_attrs
from layoutkit.source import SourceReader, can_read_raw
from layoutkit.writers.hdf5_paged import (
    ChunkEncoder,
    PagedHDF5Writer,
    StoragePlan,
    can_encode_directly,
    source_filter_ids,
    target_filter_ids,
)

COMPACT_MAX_BYTES = 512


@dataclass(frozen=True)
class ReorderOptions:
    by: str = "shot"
    template: str = DEFAULT_TEMPLATE
    page_size: int | None = None  # None: auto
    compressor: CompressorSpec = field(default_factory=lambda: parse_compressor("gzip:4"))
    compress_threshold: int = 8 * 1024
    chunks: ChunkSpec = field(default_factory=lambda: parse_chunks("source"))
    chunk_bytes: int = 4 * 1024**2
    dedupe: bool = True
    workers: int = 2
    memory_limit: int = 1024**3
    overwrite: bool = False


@dataclass(frozen=True)
class ReorderPlan:
    source: str
    dest: str
    options: ReorderOptions
    order: tuple[str, ...]
    storage: dict[str, StoragePlan]
    dedupe: dict[str, str]
    page_size: int
    shots: int
    signals: int
    nbytes: int


@dataclass(frozen=True)
class ReorderSummary:
    source: str
    dest: str
    by: str
    arrays: int
    merged_scales: int
    raw_copied: int
    page_size: int
    logical_bytes: int
    source_bytes: int
    dest_bytes: int
    seconds: float


def plan_storage(info: ArrayInfo, options: ReorderOptions) -> StoragePlan:
    """Compression policy: compress datasets above the threshold (chunked), store the
    rest uncompressed, contiguous, or compact when tiny."""
    for f in info.filters:
        if not f.available:
            raise MissingFilterError(info.path, f.id, f.name)
    if info.external:
        raise UnsupportedFeatureError(info.path, "external raw storage (data in another file)")
    if info.layout == "virtual":
        raise UnsupportedFeatureError(info.path, "a virtual dataset layout")
    none = parse_compressor("none")
    size = math.prod(info.shape) if info.shape else 1
    if info.null_space or size == 0:
        return StoragePlan(info.path, "none", None, none, False, False)
    if info.nbytes > options.compress_threshold and info.shape:
        chunks = plan_chunks(info.shape, info.dtype.itemsize, info.chunks, options.chunks, options.chunk_bytes)
        raw = (
            can_read_raw(info)
            and info.layout == "chunked"
            and chunks == info.chunks
            and source_filter_ids(info) == target_filter_ids(options.compressor)
        )
        direct = can_read_raw(info) and can_encode_directly(options.compressor)
        return StoragePlan(info.path, "chunked", chunks, options.compressor, raw, direct)
    if info.nbytes <= COMPACT_MAX_BYTES and info.kind in ("numeric", "bool"):
        return StoragePlan(info.path, "compact", None, none, False, False)
    return StoragePlan(info.path, "contiguous", None, none, False, False)


def _scale_key(reader: SourceReader, info: ArrayInfo) -> tuple[Any, ...]:
    data = np.ascontiguousarray(reader.read(info.path, tuple((0, s) for s in info.shape)))
    attrs = {k: repr(v) for k, v in info.attrs.items()}
    return (info.dtype.str, info.shape, hashlib.sha256(data.tobytes()).hexdigest(), tuple(sorted(attrs.items())))


def find_duplicate_scales(
    source: str, inventory: Inventory, template: str, reader: SourceReader | None = None
) -> dict[str, str]:
    """Within each shot, map every dimension scale whose content (dtype, shape, bytes and
    attributes) equals an earlier one's to that earlier one."""
    _, prefix = compile_template(template)
    scales = [a for a in inventory.arrays if a.is_scale and not a.null_space and a.shape and can_read_raw(a)]
    own = reader is None
    reader = reader or SourceReader(source, {a.path: a for a in scales})
    try:
        seen: dict[tuple[str, tuple[Any, ...]], str] = {}
        dupes: dict[str, str] = {}
        for info in scales:
            m = prefix.match(info.path)
            if not m:
                continue
            key = (m.group("shot"), _scale_key(reader, info))
            if key in seen:
                dupes[info.path] = seen[key]
            else:
                seen[key] = info.path
        return dupes
    finally:
        if own:
            reader.close()


def plan_reorder(
    src: str | os.PathLike, dst: str | os.PathLike, options: ReorderOptions, inventory: Inventory | None = None
) -> tuple[Inventory, ReorderPlan]:
    """Walk the source and plan the whole reorder (no writing)."""
    inventory = inventory or read_inventory(src, workers=options.workers)
    paths = [a.path for a in inventory.arrays]
    matches = match_template(paths, options.template)
    if options.by in ("shot", "signal") and not matches:
        examples = ", ".join(paths[:5]) or "(no datasets)"
        raise InvalidOptionError(
            f"The template {options.template!r} matches no dataset in {str(src)!r} "
            f"(it has e.g. {examples}); pass --template, or --by group to order any file."
        )
    storage = {a.path: plan_storage(a, options) for a in inventory.arrays}
    dedupe = find_duplicate_scales(str(src), inventory, options.template) if options.dedupe else {}
    scales_of = {
        a.path: [dedupe.get(s, s) for axis in a.dim_scales for s in axis] for a in inventory.arrays if a.dim_scales
    }
    infos = {a.path: a for a in inventory.arrays}
    sizes = {a.path: a.storage_bytes for a in inventory.arrays}
    order = [p for p in write_order(paths, options.by, options.template, scales_of, sizes) if p not in dedupe]
    largest = max(
        (math.prod(s.chunks) * infos[p].dtype.itemsize for p, s in storage.items() if s.chunks), default=0
    )
    page = options.page_size or plan_page_size(largest)
    plan = ReorderPlan(
        source=str(src),
        dest=str(dst),
        options=options,
        order=tuple(order),
        storage=storage,
        dedupe=dedupe,
        page_size=page,
        shots=len({s for s, _ in matches.values()}),
        signals=len({g for _, g in matches.values()}),
        nbytes=sum(infos[p].nbytes for p in order),
    )
    return inventory, plan


# ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Piece:
    """One unit of data to write, produced by a worker and written in order."""

    path: str
    region: Region
    chunk: bytes | None = None  # pre-encoded chunk (write_direct_chunk)
    filter_mask: int = 0
    data: np.ndarray | None = None  # values for HDF5 to store (and filter) itself
    nbytes: int = 0


def _pieces(plan: ReorderPlan, infos: dict[str, ArrayInfo]) -> Iterator[tuple[str, Region]]:
    for path in plan.order:
        s = plan.storage[path]
        info = infos[path]
        if s.layout == "none":
            continue
        if s.layout == "chunked" and s.chunks:
            yield from ((path, r) for r in iter_blocks(info.shape, s.chunks))
        else:
            yield path, tuple((0, n) for n in info.shape)


def _make_piece(
    reader: SourceReader, plan: ReorderPlan, infos: dict[str, ArrayInfo], encoders: dict[str, ChunkEncoder],
    item: tuple[str, Region],
) -> _Piece | None:
    path, region = item
    s = plan.storage[path]
    info = infos[path]
    nbytes = region_size(region) * info.dtype.itemsize if region else info.dtype.itemsize
    if s.layout == "chunked" and not reader.allocated(path, region):
        return _Piece(path, region, nbytes=nbytes)  # never written in the source: leave it so
    if s.raw_copy:
        origin = tuple(a for a, _ in region)
        raw, mask = reader.read_raw_chunk(path, origin)
        return _Piece(path, region, chunk=raw, filter_mask=mask, nbytes=nbytes)
    data = reader.read(path, region)
    if s.direct and s.chunks:
        shape = tuple(b - a for a, b in region)
        block = np.ascontiguousarray(data)
        if shape != s.chunks:  # HDF5 stores edge chunks whole
            full = np.zeros(s.chunks, dtype=info.dtype)
            full[tuple(slice(0, n) for n in shape)] = block
            block = full
        return _Piece(path, region, chunk=encoders[path].encode(block.tobytes()), nbytes=nbytes)
    return _Piece(path, region, data=data, nbytes=nbytes)


def reorder(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: ReorderOptions | None = None,
    progress: Callable[[int], None] | None = None,
    plan: tuple[Inventory, ReorderPlan] | None = None,
) -> ReorderSummary:
    """Rewrite ``src`` as a paged-aggregation HDF5 file ordered by shot, signal or group.

    Raises
    ------
    LayoutkitError
        For every expected failure (bad source, template matching nothing, existing
        destination, missing filter).
    """
    options = options or ReorderOptions()
    src_path, dst_path = Path(src), Path(dst)
    check_destination(dst_path, options.overwrite)
    inventory, rplan = plan or plan_reorder(src_path, dst_path, options)
    report = progress or (lambda n: None)
    t0 = time.perf_counter()
    tmp = temporary_sibling(dst_path)
    infos = {a.path: a for a in inventory.arrays}
    raw_copied = 0
    try:
        writer = PagedHDF5Writer(tmp, rplan.page_size, inventory.userblock_size)
        try:
            with open_source(src_path) as source:
                writer.create(inventory, source, rplan.storage, rplan.dedupe, provenance_attrs("reorder", options))
            encoders = {
                p: ChunkEncoder(s.compressor, infos[p].dtype.itemsize)
                for p, s in rplan.storage.items() if s.direct
            }
            with SourceReader(src_path, infos) as reader:
                window = max(2, options.memory_limit // max(1, 4 * _largest_piece(rplan, infos)))
                pieces = map_ordered(
                    lambda item: _make_piece(reader, rplan, infos, encoders, item),
                    _pieces(rplan, infos),
                    options.workers,
                    window=min(window, 8 * options.workers),
                )
                for piece in pieces:
                    if piece.chunk is not None:
                        writer.write_chunk(piece.path, tuple(a for a, _ in piece.region), piece.chunk, piece.filter_mask)
                        raw_copied += rplan.storage[piece.path].raw_copy
                    elif piece.data is not None:
                        writer.write_region(piece.path, piece.region, piece.data)
                    report(piece.nbytes)
        finally:
            writer.close()
        if inventory.userblock_size:
            with open(src_path, "rb") as fin, open(tmp, "r+b") as fout:
                fout.write(fin.read(inventory.userblock_size))
        replace_path(tmp, dst_path)
    except BaseException:
        remove_path(tmp)
        raise
    return ReorderSummary(
        source=str(src_path),
        dest=str(dst_path),
        by=options.by,
        arrays=len(rplan.order),
        merged_scales=len(rplan.dedupe),
        raw_copied=raw_copied,
        page_size=rplan.page_size,
        logical_bytes=rplan.nbytes,
        source_bytes=src_path.stat().st_size,
        dest_bytes=dst_path.stat().st_size,
        seconds=time.perf_counter() - t0,
    )


def _largest_piece(plan: ReorderPlan, infos: dict[str, ArrayInfo]) -> int:
    """Bytes of the largest unit written at once: a chunk, or a whole unchunked dataset."""
    sizes = [
        math.prod(s.chunks) * infos[p].dtype.itemsize if s.chunks else infos[p].nbytes
        for p, s in plan.storage.items()
        if s.layout != "none"
    ]
    return max(sizes, default=1)
