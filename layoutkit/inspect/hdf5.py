"""Inspecting an HDF5 file: one walk of the objects (``H5Ovisit``, with each header's
metadata size), each dataset's creation properties and chunk index (``H5Dchunk_iter``)
read here or in walker processes, the file's own space accounting (``H5Fget_info2``),
and dimension scales compared by content."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import h5py
import numpy as np

from layoutkit.formats import PROVENANCE_ATTR
from layoutkit.hdf5.attrs import read_attrs
from layoutkit.hdf5.files import open_source
from layoutkit.hdf5.filters import filter_name, level_of
from layoutkit.hdf5.inventory import STORAGE_LAYOUTS
from layoutkit.hdf5.libhdf5 import file_info
from layoutkit.hdf5.model import type_rule
from layoutkit.hdf5.scales import scale_digest
from layoutkit.hdf5.walk import NETCDF4_HINT_DATASETS, PARALLEL_MIN_DATASETS, netcdf4_hint, walk_objects
from layoutkit.hdf5.walkers import Walkers
from layoutkit.inspect.report import FileSpace, InspectReport, Tally, present_part, recorded_provenance
from layoutkit.storage import ObjectSource
from layoutkit.templates import compile_template

REGION_BYTES = 8 * 1024**2  # metadata "spread": object headers in how many 8 MiB stretches (reorder's page)

SCALE_READ_LIMIT = 64 * 1024**2  # larger scales are not compared by content

PROGRESS_EVERY = 500  # datasets read between two progress reports, in one process

FSPACE_STRATEGIES = {
    h5py.h5f.FSPACE_STRATEGY_FSM_AGGR: "H5F_FSPACE_STRATEGY_FSM_AGGR",
    h5py.h5f.FSPACE_STRATEGY_PAGE: "H5F_FSPACE_STRATEGY_PAGE",
    h5py.h5f.FSPACE_STRATEGY_AGGR: "H5F_FSPACE_STRATEGY_AGGR",
    h5py.h5f.FSPACE_STRATEGY_NONE: "H5F_FSPACE_STRATEGY_NONE",
}


def _pipeline(filters: list[tuple[int, tuple[int, ...], str]]) -> tuple[str, list[str]]:
    """("shuffle+gzip:4", ["shuffle", "gzip"]) for a dataset's filter pipeline."""
    names, parts = [], []
    for fid, opts, name in filters:
        names.append(name)
        level = level_of(fid, opts)
        parts.append(f"{name}:{level}" if level is not None else name)
    return ("+".join(parts) or "none"), names

class _Scales:
    """Dimension scales, and which repeat another by content (dtype, shape, values and
    attributes, as ``reorder`` compares them), anywhere or within the same shot."""

    def __init__(self, template: str) -> None:
        self.prefix = compile_template(template)[1]
        self.keys: list[tuple[str, tuple[Any, ...]]] = []
        self.count = 0

    def add(self, path: str, content_key: tuple[Any, ...] | None) -> None:
        self.count += 1
        if content_key is not None:
            self.keys.append((path, content_key))

    def duplicates(self) -> tuple[int, int]:
        """(duplicates anywhere, duplicates within the same shot)."""
        seen: set[tuple[Any, ...]] = set()
        seen_in_shot: set[tuple[str, tuple[Any, ...]]] = set()
        anywhere = same_shot = 0
        for path, key in self.keys:
            anywhere += key in seen
            seen.add(key)
            m = self.prefix.match(path)
            if m:
                same_shot += (m.group("shot"), key) in seen_in_shot
                seen_in_shot.add((m.group("shot"), key))
        return anywhere, same_shot

def _scale_content(f: h5py.File, dsid: h5py.h5d.DatasetID, shape: tuple[int, ...] | None,
                   nbytes: int) -> tuple[Any, ...] | None:
    """A scale's dtype, shape, a digest of its values and its attributes (beyond a
    scale's bookkeeping, CLASS and NAME); None for one too large (or without a shape)
    to compare by content."""
    if not shape or nbytes > SCALE_READ_LIMIT:
        return None
    data = None
    if not dsid.dtype.hasobject:  # straight into a buffer, without h5py's selection machinery
        data = np.empty(shape, dtype=dsid.dtype)
        try:
            dsid.read(h5py.h5s.ALL, h5py.h5s.ALL, data)
        except (TypeError, ValueError):
            data = None
    if data is None:
        data = np.ascontiguousarray(h5py.Dataset(dsid)[()])
    return scale_digest(data, read_attrs(h5py.Dataset(dsid), f, [], is_scale=True))

def _read_facts(f: h5py.File, source: Any, datasets: list[bytes], walkers: Walkers | None,
                progress: Callable[[int, int], None] | None) -> list[_DatasetFacts]:
    """Each dataset's facts: shared out to the walkers when there are many, else read
    here; ``progress(done, total)`` as they come."""
    total, read = len(datasets), 0

    def done(n: int) -> None:
        nonlocal read
        read += n
        if progress is not None:
            progress(read, total)

    if walkers is not None and total >= PARALLEL_MIN_DATASETS:
        return walkers.map(_facts_of, str(source), list(enumerate(datasets)), done=done)
    facts = []
    for i, name in enumerate(datasets):
        facts.append(_dataset_facts(f, name, i))
        if (i + 1) % PROGRESS_EVERY == 0 or i + 1 == total:
            done((i + 1) - read)
    return facts


def _file_space(f: h5py.File, meta: int, raw: int, header_addresses: list[int]) -> FileSpace:
    """The file's space as h5stat -S accounts it: ``meta`` (object headers, their
    indexes and heaps) plus the superblock, shared messages, free-space headers and
    user block that ``H5Fget_info2`` reports."""
    fid = f.id
    fcpl = fid.get_create_plist()
    strategy, persist, threshold = fcpl.get_file_space_strategy()
    userblock = fcpl.get_userblock()
    space_info = file_info(f)
    if space_info is not None:
        meta += (
            space_info.super.super_size + space_info.super.super_ext_size + space_info.sohm.hdr_size
            + space_info.sohm.msgs_info.index_size + space_info.sohm.msgs_info.heap_size + space_info.free.meta_size
        )
    meta += userblock
    free = space_info.free.tot_space if space_info is not None else 0
    return FileSpace(
        strategy=FSPACE_STRATEGIES.get(strategy, "unknown"),
        persist=bool(persist),
        threshold=int(threshold),
        page_size=int(fcpl.get_file_space_page_size()),
        metadata_bytes=int(meta),
        raw_bytes=int(raw),
        free_bytes=int(free),
        unaccounted_bytes=int(fid.get_filesize() - meta - raw - free),
        userblock_bytes=int(userblock),
        metadata_exact=space_info is not None,
        header_regions=len({a // REGION_BYTES for a in header_addresses}),
        min_header_regions=max(1, -(-meta // REGION_BYTES)),
    )


def inspect_hdf5(path: Path, template: str, workers: int = 1,
                 progress: Callable[[int, int], None] | None = None) -> InspectReport:
    """The report of an HDF5 file (local, or an :class:`ObjectSource` in a bucket)."""
    tally = Tally()
    scales = _Scales(template)
    with open_source(path) as f:
        walkers = Walkers(workers) if workers > 1 and not isinstance(path, ObjectSource) else None
        try:
            walk = walk_objects(f.id, walkers)
            facts = _read_facts(f, path, walk.datasets, walkers, progress)
        finally:
            if walkers is not None:
                walkers.close()
        tally.groups += walk.groups
        meta = walk.metadata_bytes
        for one in facts:
            meta -= _tally_dataset(one, tally, scales)
        space = _file_space(f, meta, tally.raw, walk.header_addresses)
        anywhere, same_shot = scales.duplicates()
        is_netcdf4 = "_NCProperties" in f.attrs or tally.netcdf_hints > 0
        written_by = recorded_provenance(f.attrs.get(PROVENANCE_ATTR))
        filesize = f.id.get_filesize()
    return tally.report(
        template,
        path=str(path),
        format="netcdf4" if is_netcdf4 else "hdf5",
        total_bytes=int(filesize),
        metadata_bytes=int(space.metadata_bytes),
        file_space=space,
        consolidated=None,
        scales=scales.count,
        duplicate_scales=anywhere,
        shot_duplicate_scales=same_shot,
        written_by=written_by,
    )


class _DatasetFacts(NamedTuple):
    """What inspect takes from one dataset: read in this process or in a walker's."""

    path: str
    logical: int
    layout: str  # "external" for contiguous data in another file
    pipeline: str
    filters: tuple[str, ...]
    missing: tuple[str, ...]  # "path: filter" for each filter this HDF5 lacks
    storage: int  # bytes stored
    piece: tuple[int, tuple[int, ...], bool] | None  # logical bytes, stored sizes, counted as chunks
    netcdf_hint: bool
    scale: tuple[tuple[Any, ...] | None] | None  # a scale: (its content key, or None)
    rule: str | None = None  # the type rule Zarr stores its type by (hdf5.model.type_rule)

def _facts_of(source: str, datasets: list[tuple[int, bytes]]) -> list[_DatasetFacts]:
    """A walker's job: the facts of ``datasets``, (the walk's index, name) each."""
    with open_source(source) as f:
        return [_dataset_facts(f, name, index) for index, name in datasets]

def _dataset_facts(f: h5py.File, name: bytes, index: int) -> _DatasetFacts:
    """The facts of the dataset at ``name``, the walk's ``index``-th (netCDF-4's own
    attributes are looked for on the first 50)."""
    path = "/" + name.decode("utf-8", "surrogateescape") if name != b"." else "/"
    dsid = h5py.h5d.open(f.id, name)
    dcpl = dsid.get_create_plist()
    layout = STORAGE_LAYOUTS.get(dcpl.get_layout(), "other")
    space = dsid.get_space()
    null = space.get_simple_extent_type() == h5py.h5s.NULL
    shape = None if null else tuple(int(n) for n in space.shape)
    tid = dsid.get_type()
    itemsize = tid.get_size()
    logical = 0 if shape is None else math.prod(shape) * itemsize
    filters, missing = [], []
    for i in range(dcpl.get_nfilters()):
        filter_id, _flags, opts, fname = dcpl.get_filter(i)
        label = filter_name(filter_id, fname)
        filters.append((filter_id, tuple(int(o) for o in opts), label))
        if not h5py.h5z.filter_avail(filter_id):
            missing.append(f"{path}: {label}")
    pipeline, names = _pipeline(filters)
    external = dcpl.get_external_count() > 0 if layout == "contiguous" else False
    storage = int(dsid.get_storage_size())
    piece = None
    if layout == "chunked":
        sizes: list[int] = []
        dsid.chunk_iter(lambda info: sizes.append(info.size))
        piece = (present_part(logical, shape or (), dcpl.get_chunk(), len(sizes)), tuple(sizes), True)
    elif storage and not external:
        piece = (storage, (storage,), False)
    hint = index < NETCDF4_HINT_DATASETS and netcdf4_hint(dsid)
    scale = (_scale_content(f, dsid, shape, logical),) if h5py.h5ds.is_scale(dsid) else None
    return _DatasetFacts(path, logical, "external" if external else layout, pipeline, tuple(names), tuple(missing),
                         storage, piece, hint, scale, _rule(dsid, tid))

PLAIN_CLASSES = (h5py.h5t.INTEGER, h5py.h5t.STRING, h5py.h5t.BITFIELD, h5py.h5t.OPAQUE)
"""Type classes Zarr holds as they are (floats too, up to 64 bits): no NumPy type is made for them."""


def _rule(dsid: h5py.h5d.DatasetID, tid: h5py.h5t.TypeID) -> str | None:
    """The type rule a dataset's type is stored by in Zarr; None for a type Zarr holds as
    it is, or one h5py cannot give as a NumPy type (convert names it, refusing)."""
    kind = tid.get_class()
    if kind in PLAIN_CLASSES or kind == h5py.h5t.FLOAT and tid.get_size() <= 8:
        return None
    try:
        return type_rule(dsid.dtype)
    except (TypeError, ValueError):
        return None


def _tally_dataset(facts: _DatasetFacts, tally: Tally, scales: _Scales) -> int:
    """Record one dataset; return the bytes of compact data its object header holds
    (h5stat counts them as raw data, not metadata)."""
    tally.array(facts.path, facts.logical, facts.layout, facts.pipeline, facts.filters)
    tally.missing.extend(facts.missing)
    tally.raw += 0 if facts.layout == "external" else facts.storage
    if facts.piece is not None:
        logical, sizes, as_chunks = facts.piece
        tally.stored_piece(facts.pipeline, logical, list(sizes), count_as_chunks=as_chunks)
    tally.netcdf_hints += facts.netcdf_hint
    if facts.rule is not None:
        tally.type_rules[facts.rule] += 1
    if facts.scale is not None:
        scales.add(facts.path, facts.scale[0])
    return facts.storage if facts.layout == "compact" else 0


__all__ = ["PARALLEL_MIN_DATASETS", "inspect_hdf5"]
