"""The ``hdf5-paged`` layout (``reorder``): paged-aggregation HDF5, its bytes ordered
shot-major, signal-major or by hierarchy.

The hierarchy stays exactly as in the source; only where bytes sit changes: every object
is created first (metadata pages at the front), then raw data is written in the chosen
order, chunks read and encoded in parallel (the task function, :func:`make_piece`) and
handed to HDF5 in order on one thread (h5py holds one lock, and the byte order in the
file is the order of the writes). Dimension scales that repeat another of the same shot
are stored once (:mod:`layoutkit.hdf5.scales`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from layoutkit.errors import InvalidOptionError, MissingFilterError, UnsupportedFeatureError
from layoutkit.hdf5.inventory import ArrayInfo, Inventory, open_source
from layoutkit.hdf5.scales import ScaleDigest, duplicate_scales
from layoutkit.hdf5.source import SourceReader, can_read_raw
from layoutkit.layouts.hdf5_paged.write import (
    ChunkEncoder,
    PagedHDF5Writer,
    StoragePlan,
    can_encode_directly,
    source_filter_ids,
    target_filter_ids,
)
from layoutkit.options import (
    CHUNK_SIZE_KEY,
    CHUNKS_KEY,
    COMPRESSOR_KEY,
    STR_OR_INT,
    ChunkSpec,
    CompressorSpec,
    RecipeKey,
    choice_parser,
    exact_size,
    parse_bool,
    parse_chunks,
    parse_compressor,
    parse_size,
    size_parser,
)
from layoutkit.pipeline import Layout, Work
from layoutkit.plan import (
    DEFAULT_TEMPLATE,
    TEMPLATE_KEY,
    Region,
    iter_blocks,
    match_template,
    plan_chunks,
    plan_page_size,
    region_size,
    write_order,
)
from layoutkit.storage import Destination, read_head

BY = ("shot", "signal", "group")
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


def _parse_page_size(text: Any) -> int | None:
    """``auto``, or a power of two of at least 512 B (HDF5's file space pages)."""
    if str(text).strip().lower() == "auto":
        return None
    size = parse_size(text, what="page size")
    if size < 512 or size & (size - 1):
        raise InvalidOptionError(
            f"Expected a page size that is a power of two of at least 512 B, such as 8MiB, or auto. Got {text!r}."
        )
    return size


REORDER_RECIPE_KEYS: tuple[RecipeKey, ...] = (
    RecipeKey("by", "by", choice_parser("--by", BY), str, "\"shot\", \"signal\" or \"group\""),
    TEMPLATE_KEY,
    RecipeKey("page_size", "page_size", _parse_page_size, lambda v: "auto" if v is None else exact_size(v),
              "auto or a size such as \"8MiB\"", STR_OR_INT),
    COMPRESSOR_KEY,
    RecipeKey("compress_threshold", "compress_threshold", size_parser("compression threshold"), exact_size,
              "a size such as \"8KiB\"", STR_OR_INT),
    CHUNKS_KEY,
    CHUNK_SIZE_KEY,
    RecipeKey("dedupe", "dedupe", parse_bool, bool, "true or false", (bool,)),
)


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
    if info.extendible:
        # an unlimited axis needs chunks: one, no larger than the data (the source's chunks
        # of a few bytes of data are often kilobytes, stored whole: a 584 KiB file grew 4x)
        chunks = tuple(max(1, min(c, n)) for c, n in zip(info.chunks or info.shape, info.shape))
        return StoragePlan(info.path, "chunked", chunks, none, False, False)
    if info.nbytes <= COMPACT_MAX_BYTES and info.kind in ("numeric", "bool"):
        return StoragePlan(info.path, "compact", None, none, False, False)
    return StoragePlan(info.path, "contiguous", None, none, False, False)


def plan_reorder(
    inventory: Inventory, options: ReorderOptions, scale_digests: dict[str, ScaleDigest], dest: str = ""
) -> ReorderPlan:
    """Plan the whole reorder from the inventory and the scales' fingerprints (pure)."""
    src = inventory.path
    paths = [a.path for a in inventory.arrays]
    matches = match_template(paths, options.template)
    if options.by in ("shot", "signal") and not matches:
        examples = ", ".join(paths[:5]) or "(no datasets)"
        raise InvalidOptionError(
            f"The template {options.template!r} matches no dataset in {str(src)!r} "
            f"(it has e.g. {examples}); pass --template, or --by group to order any file."
        )
    storage = {a.path: plan_storage(a, options) for a in inventory.arrays}
    dedupe = duplicate_scales(inventory.arrays, scale_digests, options.template) if options.dedupe else {}
    scales_of = {
        a.path: [dedupe.get(s, s) for axis in a.dim_scales for s in axis] for a in inventory.arrays if a.dim_scales
    }
    infos = {a.path: a for a in inventory.arrays}
    sizes = {a.path: a.storage_bytes for a in inventory.arrays}
    order = [p for p in write_order(paths, options.by, options.template, scales_of, sizes) if p not in dedupe]
    largest = max(
        (math.prod(s.chunks) * infos[p].dtype.itemsize for p, s in storage.items() if s.chunks), default=0
    )
    # the file to be: the source's raw data (no smaller for the policy's threshold) and ~2 KiB per object
    estimate = sum(a.storage_bytes for a in inventory.arrays) + 2048 * (len(inventory.arrays) + len(inventory.groups))
    page = options.page_size or plan_page_size(largest, estimate)
    return ReorderPlan(
        source=str(src),
        dest=dest,
        options=options,
        order=tuple(order),
        storage=storage,
        dedupe=dedupe,
        page_size=page,
        shots=len({s for s, _ in matches.values()}),
        signals=len({g for _, g in matches.values()}),
        nbytes=sum(infos[p].nbytes for p in order),
    )


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


@dataclass(frozen=True)
class PieceJob:
    reader: SourceReader
    plan: ReorderPlan
    infos: dict[str, ArrayInfo]
    encoders: dict[str, ChunkEncoder]


def make_piece(job: PieceJob, item: tuple[str, Region]) -> _Piece:
    """Read (and encode, where the target allows) one chunk or dataset, for the writer."""
    reader, plan, infos, encoders = job.reader, job.plan, job.infos, job.encoders
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


def _largest_piece(plan: ReorderPlan, infos: dict[str, ArrayInfo]) -> int:
    """Bytes of the largest unit written at once: a chunk, or a whole unchunked dataset."""
    sizes = [
        math.prod(s.chunks) * infos[p].dtype.itemsize if s.chunks else infos[p].nbytes
        for p, s in plan.storage.items()
        if s.layout != "none"
    ]
    return max(sizes, default=1)


class HDF5Paged(Layout):
    """Paged-aggregation HDF5 with the source's hierarchy, bytes in shot, signal or group order."""

    name = "hdf5-paged"
    command = "reorder"
    target = "hdf5-paged"
    output = "file"
    options_class = ReorderOptions
    recipe_keys = REORDER_RECIPE_KEYS
    description = "paged-aggregation HDF5, the hierarchy kept, bytes ordered by shot, signal or group"

    def scale_template(self, options: ReorderOptions) -> str | None:
        return options.template if options.dedupe else None

    def plan(self, inventory: Inventory, options: ReorderOptions, scale_digests: dict[str, ScaleDigest],
             dest: str = "") -> ReorderPlan:
        if options.compressor.name == "source":
            raise InvalidOptionError(
                "Expected a compressor for reorder such as gzip:4 (a chunk whose filters already match "
                "is copied without re-encoding); --compressor source is convert's. Got --compressor source."
            )
        return plan_reorder(inventory, options, scale_digests, dest)

    def begin(self, staged: Path, source: Path, inventory: Inventory, plan: ReorderPlan,
              attrs: dict[str, Any]) -> Work:
        options = plan.options
        infos = {a.path: a for a in inventory.arrays}
        writer = PagedHDF5Writer(staged, plan.page_size, inventory.userblock_size)
        reader: SourceReader | None = None

        def close() -> None:
            writer.close()
            if reader is not None:
                reader.close()

        try:
            with open_source(source) as src:
                writer.create(inventory, src, plan.storage, plan.dedupe, attrs)
            encoders = {
                p: ChunkEncoder(s.compressor, infos[p].dtype.itemsize) for p, s in plan.storage.items() if s.direct
            }
            reader = SourceReader(source, infos)
        except BaseException:
            close()
            raise
        counts = {"raw_copied": 0}

        def sink(piece: _Piece) -> int:
            if piece.chunk is not None:
                writer.write_chunk(piece.path, tuple(a for a, _ in piece.region), piece.chunk, piece.filter_mask)
                counts["raw_copied"] += plan.storage[piece.path].raw_copy
            elif piece.data is not None:
                writer.write_region(piece.path, piece.region, piece.data)
            return piece.nbytes

        window = max(2, options.memory_limit // max(1, 4 * _largest_piece(plan, infos)))
        return Work(
            make_piece, PieceJob(reader, plan, infos, encoders), _pieces(plan, infos), sink=sink,
            window=min(window, 8 * options.workers), close=close,
            state={"counts": counts, "source": source, "userblock": inventory.userblock_size},
        )

    def finish(self, work: Work, staged: Path, plan: ReorderPlan) -> None:
        work.close()  # HDF5 writes its last metadata on close
        userblock = work.state["userblock"]
        if userblock:
            with open(staged, "r+b") as fout:
                fout.write(read_head(work.state["source"], userblock))

    def summarize(self, source: Path, dest: Destination, inventory: Inventory, plan: ReorderPlan, work: Work,
                  seconds: float) -> ReorderSummary:
        return ReorderSummary(
            source=str(source), dest=str(dest), by=plan.options.by, arrays=len(plan.order),
            merged_scales=len(plan.dedupe), raw_copied=work.state["counts"]["raw_copied"], page_size=plan.page_size,
            logical_bytes=plan.nbytes, source_bytes=source.stat().st_size, dest_bytes=dest.size(), seconds=seconds,
        )


__all__ = ["HDF5Paged", "ReorderOptions", "ReorderPlan", "ReorderSummary", "make_piece", "plan_reorder", "plan_storage"]
