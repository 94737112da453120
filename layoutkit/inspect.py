"""``layoutkit inspect``: how an HDF5 file or a Zarr store is laid out, and what to do about it.

:func:`inspect_path` reads metadata and chunk indexes only, never the data, so it is fast
on large files: one walk of the objects (``H5Ovisit``) with each dataset's creation
properties and chunk index (``H5Dchunk_iter``), the file's own space accounting
(``H5Fget_info2``), and for Zarr the metadata documents, the sizes of the chunk files and
the index at the end of each shard. One exception: dimension scales that could be
duplicates (same dtype, shape and attributes as another scale) are read, to compare their
contents; scales are coordinate vectors, small next to the data they label.

The result is a frozen :class:`InspectReport`, with plain recommendations that each name
the command or recipe that applies. The metadata size is the one ``h5stat -S`` reports
as "File metadata" (superblock and its extension, user block, object headers, group,
attribute and chunk indexes and heaps, shared-message tables, free-space headers).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import hashlib
import json
import math
import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import h5py
import numpy as np

from layoutkit.errors import LayoutkitError
from layoutkit.hdf5.filters import filter_name, level_of
from layoutkit.hdf5.inventory import PARALLEL_MIN_DATASETS, open_source, read_attrs
from layoutkit.hdf5.walkers import Walkers
from layoutkit.layouts import find_layout
from layoutkit.options import format_size, parse_workers
from layoutkit.pipeline import PROVENANCE_ATTR
from layoutkit.plan import DEFAULT_PAGE_BYTES, DEFAULT_TEMPLATE, compile_template, match_template
from layoutkit.storage import ObjectSource, is_url, store_at

SMALL_CHUNK_BYTES = 16 * 1024
LARGE_CHUNK_BYTES = 16 * 1024**2
HISTOGRAM_EDGES = (4 * 1024, 16 * 1024, 64 * 1024, 256 * 1024, 1024**2, 4 * 1024**2, 16 * 1024**2)
NETCDF4_DATASET_ATTRS = (b"_Netcdf4Dimid", b"_Netcdf4Coordinates")  # what netCDF-C writes on variables
REGION_BYTES = DEFAULT_PAGE_BYTES  # metadata "spread": object headers in how many 8 MiB stretches
SCALE_READ_LIMIT = 64 * 1024**2  # larger scales are not compared by content
PROGRESS_EVERY = 500  # datasets read between two progress reports, in one process

FSPACE_STRATEGIES = {
    h5py.h5f.FSPACE_STRATEGY_FSM_AGGR: "H5F_FSPACE_STRATEGY_FSM_AGGR",
    h5py.h5f.FSPACE_STRATEGY_PAGE: "H5F_FSPACE_STRATEGY_PAGE",
    h5py.h5f.FSPACE_STRATEGY_AGGR: "H5F_FSPACE_STRATEGY_AGGR",
    h5py.h5f.FSPACE_STRATEGY_NONE: "H5F_FSPACE_STRATEGY_NONE",
}
_LAYOUTS = {h5py.h5d.COMPACT: "compact", h5py.h5d.CONTIGUOUS: "contiguous", h5py.h5d.CHUNKED: "chunked",
            h5py.h5d.VIRTUAL: "virtual"}
ZARR_METADATA = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})


class NotAStoreError(LayoutkitError, NotADirectoryError):
    """A directory that is not a Zarr store."""


# -- the report -----------------------------------------------------------------------


@dataclass(frozen=True)
class CodecUse:
    """Arrays stored through one filter pipeline (``none`` for unfiltered)."""

    pipeline: str
    arrays: int
    chunks: int  # stored chunks; a contiguous or compact dataset counts as one
    logical_bytes: int  # uncompressed size of the data the stored chunks hold (edge chunks: their part in the array)
    stored_bytes: int

    @property
    def ratio(self) -> float:
        return self.logical_bytes / self.stored_bytes if self.stored_bytes else float("nan")


@dataclass(frozen=True)
class HistogramBin:
    """Stored chunks of ``low <= size < high`` bytes (``high`` None: no upper bound)."""

    low: int
    high: int | None
    count: int


@dataclass(frozen=True)
class FileSpace:
    """An HDF5 file's space accounting, as ``h5stat -S`` reports it."""

    strategy: str  # H5F_FSPACE_STRATEGY_*
    persist: bool
    threshold: int
    page_size: int
    metadata_bytes: int
    raw_bytes: int
    free_bytes: int
    unaccounted_bytes: int
    userblock_bytes: int
    metadata_exact: bool  # False when libhdf5 could not be asked for the superblock sizes
    header_regions: int  # 8 MiB stretches of the file that hold object headers
    min_header_regions: int  # how few they would be if the metadata sat together


@dataclass(frozen=True)
class Recommendation:
    finding: str
    action: str  # names the command or recipe that applies


@dataclass(frozen=True)
class InspectReport:
    """How one HDF5 file or Zarr store is laid out (see :func:`inspect_path`)."""

    path: str
    format: str  # "hdf5", "netcdf4", "zarr v3", "zarr v2"
    total_bytes: int  # the file, or every file of the store
    groups: int
    arrays: int
    logical_bytes: int  # uncompressed size of every array
    stored_bytes: int  # bytes of raw data (chunks, shards, contiguous data)
    metadata_bytes: int
    layouts: dict[str, int]
    filters: dict[str, int]  # arrays using each filter (HDF5) or codec (Zarr)
    codecs: tuple[CodecUse, ...]
    chunks: int
    chunk_histogram: tuple[HistogramBin, ...]
    small_chunks: int  # stored chunks under SMALL_CHUNK_BYTES
    large_chunks: int  # stored chunks of LARGE_CHUNK_BYTES or more
    file_space: FileSpace | None  # HDF5 only
    consolidated: bool | None  # Zarr only
    scales: int | None  # dimension scales (HDF5 only)
    duplicate_scales: int | None  # scales whose content equals an earlier scale's
    shot_duplicate_scales: int | None  # ... in the same shot: what `reorder` merges
    template: str
    template_matches: int
    shots: int
    signals: int
    missing_filters: tuple[str, ...]  # "path: filter" with no plugin available
    written_by: dict[str, Any] | None  # the recipe layoutkit recorded, when it wrote this variant
    recommendations: tuple[Recommendation, ...] = field(default=())
    seconds: float = 0.0

    @property
    def ratio(self) -> float:
        return self.logical_bytes / self.stored_bytes if self.stored_bytes else float("nan")

    def to_json(self) -> str:
        """The report as a JSON document (``layoutkit inspect --json``)."""
        doc = asdict(self)
        doc["ratio"] = _finite(self.ratio)
        for codec, use in zip(doc["codecs"], self.codecs):
            codec["ratio"] = _finite(use.ratio)
        return json.dumps(doc, indent=2)


def _recorded(value: Any) -> dict[str, Any] | None:
    """The provenance document layoutkit records in a variant's root, if any."""
    try:
        doc = json.loads(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError, AttributeError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("recipe"), dict) else None


def _finite(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None


# -- shared pieces ----------------------------------------------------------------------


class _Tally:
    """Counts gathered while walking arrays, turned into the report's fields."""

    def __init__(self) -> None:
        self.groups = 0
        self.arrays = 0
        self.logical = 0
        self.stored = 0
        self.raw = 0  # HDF5: raw data in the file (h5stat's "Raw data"; compact data included)
        self.layouts: Counter[str] = Counter()
        self.filters: Counter[str] = Counter()
        self.codec_arrays: Counter[str] = Counter()
        self.codec_chunks: Counter[str] = Counter()
        self.codec_logical: Counter[str] = Counter()
        self.codec_stored: Counter[str] = Counter()
        self.sizes: list[int] = []  # every stored chunk
        self.paths: list[str] = []
        self.missing: list[str] = []
        self.netcdf_hints = 0  # HDF5: datasets with netCDF-4's own attributes

    def array(self, path: str, logical: int, layout: str, pipeline: str, filters: Iterable[str]) -> None:
        self.arrays += 1
        self.paths.append(path)
        self.logical += logical
        self.layouts[layout] += 1
        self.codec_arrays[pipeline] += 1
        for name in set(filters):
            self.filters[name] += 1

    def stored_piece(self, pipeline: str, logical: int, sizes: list[int], count_as_chunks: bool = True) -> None:
        """``sizes`` of stored pieces holding ``logical`` bytes of the array's data."""
        self.codec_chunks[pipeline] += len(sizes)
        self.codec_logical[pipeline] += logical
        self.codec_stored[pipeline] += sum(sizes)
        self.stored += sum(sizes)
        if count_as_chunks:
            self.sizes.extend(sizes)

    def codecs(self) -> tuple[CodecUse, ...]:
        return tuple(
            CodecUse(p, self.codec_arrays[p], self.codec_chunks[p], self.codec_logical[p], self.codec_stored[p])
            for p in sorted(self.codec_arrays, key=lambda p: (-self.codec_stored[p], p))
        )

    def histogram(self) -> tuple[HistogramBin, ...]:
        sizes = np.asarray(self.sizes, dtype=np.int64)
        counts = np.bincount(np.searchsorted(HISTOGRAM_EDGES, sizes, side="right"), minlength=len(HISTOGRAM_EDGES) + 1)
        lows = (0, *HISTOGRAM_EDGES)
        highs = (*HISTOGRAM_EDGES, None)
        return tuple(HistogramBin(lo, hi, int(n)) for lo, hi, n in zip(lows, highs, counts))

    def report(self, template: str, **specific: Any) -> InspectReport:
        """The report: what was tallied, plus the fields only one format has."""
        matches = match_template(self.paths, template)
        return InspectReport(
            groups=self.groups,
            arrays=self.arrays,
            logical_bytes=self.logical,
            stored_bytes=self.stored,
            layouts=dict(self.layouts),
            filters=dict(self.filters),
            codecs=self.codecs(),
            chunks=len(self.sizes),
            chunk_histogram=self.histogram(),
            small_chunks=sum(s < SMALL_CHUNK_BYTES for s in self.sizes),
            large_chunks=sum(s >= LARGE_CHUNK_BYTES for s in self.sizes),
            template=template,
            template_matches=len(matches),
            shots=len({s for s, _ in matches.values()}),
            signals=len({g for _, g in matches.values()}),
            missing_filters=tuple(self.missing),
            **specific,
        )


def inspect_path(
    path: str | os.PathLike, template: str = DEFAULT_TEMPLATE, storage_options: dict[str, str] | None = None,
    workers: int = 1, progress: Callable[[int, int], None] | None = None,
) -> InspectReport:
    """Diagnose how an HDF5 file (netCDF-4 included) or a Zarr store is laid out.

    Parameters
    ----------
    path
        An HDF5 file or a Zarr store (a directory, v2 or v3); an HDF5 file may be in a
        bucket (``s3://...``, with ``storage_options``), read by ranged GETs.
    template
        Where shots and signals are (``{shot}`` and ``{signal}`` match one path
        component each), to report the shots x signals found.
    workers
        Processes that read the datasets of a local HDF5 file with at least
        :data:`~layoutkit.hdf5.inventory.PARALLEL_MIN_DATASETS` of them (h5py serialises
        every call into HDF5, so threads would not help); 1 reads them here.
    progress
        Called as ``progress(done, total)`` while an HDF5 file's datasets are read
        (``total`` is known once the walk has found them all).

    Returns
    -------
    InspectReport

    Raises
    ------
    LayoutkitError
        The path is missing, not HDF5, damaged, or a directory that is not a Zarr store;
        or the template is malformed.
    """
    compile_template(template)  # refuse a malformed template, or a worker count below 1, before any work
    parse_workers(workers)
    t0 = time.perf_counter()
    if is_url(str(path)):
        from layoutkit.archive import zarr_format_at

        prefixed = store_at(str(path), storage_options or {})
        if zarr_format_at(prefixed) is not None:  # a store: one LIST, its documents, and shard indexes by range
            report = _inspect_zarr_store(_BucketFiles(prefixed), str(path), template)
            report = replace(report, recommendations=tuple(recommend(report)))
            return replace(report, seconds=time.perf_counter() - t0)
        source = ObjectSource(str(path), tuple(sorted((storage_options or {}).items())))
        report = _inspect_hdf5(source, template, progress=progress)  # type: ignore[arg-type]
        report = replace(report, recommendations=tuple(recommend(report)))
        return replace(report, seconds=time.perf_counter() - t0)
    p = Path(path)
    if p.is_dir():
        report = _inspect_zarr(p, template)
    else:
        report = _inspect_hdf5(p, template, workers, progress)
    report = replace(report, recommendations=tuple(recommend(report)))
    return replace(report, seconds=time.perf_counter() - t0)


# -- HDF5 -------------------------------------------------------------------------------


class _IH(ctypes.Structure):
    _fields_ = [("index_size", ctypes.c_uint64), ("heap_size", ctypes.c_uint64)]


class _Super(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("super_size", ctypes.c_uint64), ("super_ext_size", ctypes.c_uint64)]


class _Free(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("meta_size", ctypes.c_uint64), ("tot_space", ctypes.c_uint64)]


class _Sohm(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("hdr_size", ctypes.c_uint64), ("msgs_info", _IH)]


class _FileInfo2(ctypes.Structure):  # H5F_info2_t
    _fields_ = [("super", _Super), ("free", _Free), ("sohm", _Sohm)]


@functools.cache
def _libhdf5() -> Any:
    """The HDF5 library h5py uses, for the one call h5py does not wrap (H5Fget_info2).
    It must be the very library h5py loaded: identifiers are only valid in it."""
    loaded = []
    try:
        with open("/proc/self/maps") as maps:
            loaded = sorted({line.split()[-1] for line in maps if "libhdf5" in line and "hl" not in line.split("/")[-1]})
    except OSError:  # not Linux: h5py's bundled copy
        base = Path(h5py.__file__).parent
        loaded = glob.glob(str(base.parent / "h5py.libs" / "libhdf5*")) + glob.glob(str(base / ".dylibs" / "libhdf5*"))
        loaded = [p for p in loaded if "hl" not in Path(p).name]
    for candidate in loaded:
        try:
            lib = ctypes.CDLL(candidate)
        except OSError:
            continue
        if hasattr(lib, "H5Fget_info2"):
            lib.H5Fget_info2.argtypes = [ctypes.c_int64, ctypes.POINTER(_FileInfo2)]
            lib.H5Fget_info2.restype = ctypes.c_int
            return lib
    return None


def _file_info(f: h5py.File) -> _FileInfo2 | None:
    lib = _libhdf5()
    info = _FileInfo2()
    if lib is None or lib.H5Fget_info2(f.id.id, ctypes.byref(info)) < 0:
        return None
    return info


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
    content = data.tobytes() if data.dtype.kind != "O" else repr(data.tolist()).encode()
    attrs = read_attrs(h5py.Dataset(dsid), f, [], is_scale=True)
    return (data.dtype.str, shape, hashlib.sha256(content).hexdigest(), repr(sorted((k, repr(v)) for k, v in attrs.items())))


def _inspect_hdf5(path: Path, template: str, workers: int = 1,
                  progress: Callable[[int, int], None] | None = None) -> InspectReport:
    tally = _Tally()
    scales = _Scales(template)
    meta = 0
    header_addrs: list[int] = []
    with open_source(path) as f:
        fid = f.id
        seen: set[int] = set()

        datasets: list[bytes] = []
        walkers = Walkers(workers) if workers > 1 and not isinstance(path, ObjectSource) else None

        def visit(name: bytes, info: Any) -> None:
            nonlocal meta
            if info.addr in seen:
                return
            seen.add(info.addr)
            header_addrs.append(info.addr)
            ms = info.meta_size
            meta += info.hdr.space.total + ms.obj.index_size + ms.obj.heap_size + ms.attr.index_size + ms.attr.heap_size
            if info.type == h5py.h5o.TYPE_GROUP:
                tally.groups += 1
            elif info.type == h5py.h5o.TYPE_DATASET:
                datasets.append(name)
                if walkers is not None and len(datasets) == PARALLEL_MIN_DATASETS:
                    walkers.start()  # their start overlaps the rest of this walk

        try:
            visit(b".", h5py.h5o.get_info(fid))
            h5py.h5o.visit(fid, visit, info=True)
            total, read = len(datasets), 0

            def done(n: int) -> None:
                nonlocal read
                read += n
                if progress is not None:
                    progress(read, total)

            if walkers is not None and total >= PARALLEL_MIN_DATASETS:
                facts = walkers.map(_facts_of, str(path), list(enumerate(datasets)), done=done)
            else:
                facts = []
                for i, name in enumerate(datasets):
                    facts.append(_dataset_facts(f, name, i))
                    if (i + 1) % PROGRESS_EVERY == 0 or i + 1 == total:
                        done((i + 1) - read)
        finally:
            if walkers is not None:
                walkers.close()
        for one in facts:
            meta -= _tally_dataset(one, tally, scales)
        fcpl = fid.get_create_plist()
        strategy, persist, threshold = fcpl.get_file_space_strategy()
        userblock = fcpl.get_userblock()
        file_info = _file_info(f)
        if file_info is not None:
            meta += (
                file_info.super.super_size + file_info.super.super_ext_size + file_info.sohm.hdr_size
                + file_info.sohm.msgs_info.index_size + file_info.sohm.msgs_info.heap_size + file_info.free.meta_size
            )
        meta += userblock
        free = file_info.free.tot_space if file_info is not None else 0
        filesize = fid.get_filesize()
        anywhere, same_shot = scales.duplicates()
        is_netcdf4 = "_NCProperties" in f.attrs or tally.netcdf_hints > 0
        written_by = _recorded(f.attrs.get(PROVENANCE_ATTR))
        raw = tally.raw
        space = FileSpace(
            strategy=FSPACE_STRATEGIES.get(strategy, "unknown"),
            persist=bool(persist),
            threshold=int(threshold),
            page_size=int(fcpl.get_file_space_page_size()),
            metadata_bytes=int(meta),
            raw_bytes=int(raw),
            free_bytes=int(free),
            unaccounted_bytes=int(filesize - meta - raw - free),
            userblock_bytes=int(userblock),
            metadata_exact=file_info is not None,
            header_regions=len({a // REGION_BYTES for a in header_addrs}),
            min_header_regions=max(1, -(-meta // REGION_BYTES)),
        )
    return tally.report(
        template,
        path=str(path),
        format="netcdf4" if is_netcdf4 else "hdf5",
        total_bytes=int(filesize),
        metadata_bytes=int(meta),
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
    layout = _LAYOUTS.get(dcpl.get_layout(), "other")
    space = dsid.get_space()
    null = space.get_simple_extent_type() == h5py.h5s.NULL
    shape = None if null else tuple(int(n) for n in space.shape)
    itemsize = dsid.get_type().get_size()
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
        piece = (_present_part(logical, shape or (), dcpl.get_chunk(), len(sizes)), tuple(sizes), True)
    elif storage and not external:
        piece = (storage, (storage,), False)
    hint = index < 50 and any(h5py.h5a.exists(dsid, n) for n in NETCDF4_DATASET_ATTRS)
    scale = (_scale_content(f, dsid, shape, logical),) if h5py.h5ds.is_scale(dsid) else None
    return _DatasetFacts(path, logical, "external" if external else layout, pipeline, tuple(names), tuple(missing),
                         storage, piece, hint, scale)


def _tally_dataset(facts: _DatasetFacts, tally: _Tally, scales: _Scales) -> int:
    """Record one dataset; return the bytes of compact data its object header holds
    (h5stat counts them as raw data, not metadata)."""
    tally.array(facts.path, facts.logical, facts.layout, facts.pipeline, facts.filters)
    tally.missing.extend(facts.missing)
    tally.raw += 0 if facts.layout == "external" else facts.storage
    if facts.piece is not None:
        logical, sizes, as_chunks = facts.piece
        tally.stored_piece(facts.pipeline, logical, list(sizes), count_as_chunks=as_chunks)
    tally.netcdf_hints += facts.netcdf_hint
    if facts.scale is not None:
        scales.add(facts.path, facts.scale[0])
    return facts.storage if facts.layout == "compact" else 0


# -- Zarr -------------------------------------------------------------------------------


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
        shuffle = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}.get(shuffle, shuffle)
        return f"blosc:{conf.get('cname')}:{conf.get('clevel')}:{shuffle}"
    if name in ("numcodecs.shuffle", "shuffle"):
        return "shuffle"
    return str(name).removeprefix("numcodecs.")


def _zarr_array(doc: dict[str, Any], zarr_format: int) -> dict[str, Any]:
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


class _FolderFiles:
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


class _BucketFiles:
    """The objects of a store under a bucket prefix: one LIST, then GETs and ranged GETs."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def entries(self) -> list[tuple[str, int]]:
        from layoutkit.storage.buckets import list_keys

        return list_keys(self.store, "")

    def text(self, key: str) -> str:
        import obstore

        return bytes(obstore.get(self.store, key).bytes()).decode()

    def read(self, key: str, offset: int, size: int) -> bytes:
        import obstore

        return bytes(obstore.get_range(self.store, key, start=offset, length=size))


def _inspect_zarr(root: Path, template: str) -> InspectReport:
    return _inspect_zarr_store(_FolderFiles(root), str(root), template)


def _parent(key: str) -> str:
    return key.rpartition("/")[0]


def _inspect_zarr_store(files: Any, name: str, template: str) -> InspectReport:
    """The report of a Zarr store, from its objects (a folder's files or a prefix's keys)."""
    entries = files.entries()
    keys = {k for k, _ in entries}
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
    tally = _Tally()
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

    docs = sorted((k for k in keys if k.rsplit("/", 1)[-1] in (doc_name, group_doc)), key=lambda k: k.count("/"))
    for key in docs:  # parents before children
        folder = _parent(key)
        if owner(folder) is not None:
            continue  # a document inside an array's folder is not a node of its own
        if key.endswith(doc_name):
            doc = json.loads(files.text(key))
            if zarr_format == 2 or doc.get("node_type") == "array":
                arrays[folder] = _zarr_array(doc, zarr_format)
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
        written_by=_recorded(root_attrs.get(PROVENANCE_ATTR)),
    )


def _zarr_stats(files: Any, path: str, meta: dict[str, Any], chunk_files: list[tuple[str, int]], tally: _Tally) -> None:
    itemsize = _itemsize(meta["dtype"])
    names = [n for n in (_zarr_codec_name(c) for c in meta["codecs"]) if n]
    pipeline = "+".join(names) or "none"
    sharded = meta["shard"] is not None
    kinds = [n.split(":")[0] for n in names]
    tally.array(path, math.prod(meta["shape"]) * itemsize, "sharded" if sharded else "chunked", pipeline, kinds)
    logical = math.prod(meta["shape"]) * itemsize
    if not sharded:
        sizes = [size for _, size in chunk_files]
        tally.stored_piece(pipeline, _present_part(logical, meta["shape"], meta["chunk"], len(sizes)), sizes)
        return
    per_shard = math.prod(-(-s // c) for s, c in zip(meta["shard"], meta["chunk"]))
    every: list[int] = []
    for shard, size in chunk_files:
        sizes = _shard_chunk_sizes(files, shard, size, per_shard, meta["index_at_end"], meta["index_crc"])
        every += sizes
        tally.stored += size - sum(sizes)  # the shard's index
    tally.stored_piece(pipeline, _present_part(logical, meta["shape"], meta["chunk"], len(every)), every)


def _present_part(logical: int, shape: tuple[int, ...], chunks: tuple[int, ...], present: int) -> int:
    """The array's bytes held by ``present`` of its chunks: all of them when every chunk
    is stored, a proportional share when some were never written (sparse arrays)."""
    total = math.prod(-(-s // c) for s, c in zip(shape, chunks)) if shape else 1
    return logical if present >= total else logical * present // max(1, total)


# -- recommendations --------------------------------------------------------------------


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "0%"


def recommend(r: InspectReport) -> list[Recommendation]:
    """Plain recommendations tied to what the report found; each names a command or recipe."""
    out: list[Recommendation] = []
    zarr_store = r.format.startswith("zarr")

    def add(finding: str, action: str) -> None:
        out.append(Recommendation(finding, action))

    if r.missing_filters:
        add(f"{len(r.missing_filters)} dataset(s) use a filter with no plugin installed, e.g. {r.missing_filters[0]}.",
            "pip install hdf5plugin (or set HDF5_PLUGIN_PATH) before `layoutkit convert` or `reorder`.")
    if r.chunks and r.small_chunks >= 10 and r.small_chunks * 4 >= r.chunks:
        add(f"{r.small_chunks:,} of {r.chunks:,} chunks ({_pct(r.small_chunks, r.chunks)}) are under 16 KiB: "
            "each costs a request, mostly latency, on object storage.",
            "`layoutkit convert --chunks auto` grows them to ~4 MiB (recipes zarr-shot, cloud-netcdf)"
            + ("; re-convert from the HDF5 source." if zarr_store else "; for HDF5, `layoutkit reorder --chunks auto`."))
    if r.large_chunks:
        add(f"{r.large_chunks:,} chunk(s) are 16 MiB or larger: reading one value reads the whole chunk.",
            "`layoutkit convert --chunks auto --chunk-size 4MiB`" + ("" if zarr_store else " or `layoutkit reorder --chunks auto`."))
    fs = r.file_space
    if fs is not None:
        paged = fs.strategy.endswith("_PAGE")
        spread = fs.header_regions > max(2, 2 * fs.min_header_regions)
        if spread or (not paged and r.total_bytes >= 16 * 1024**2):
            what = []
            if spread:
                what.append(f"metadata is spread through the file (object headers spread over {fs.header_regions:,} "
                            f"stretches of 8 MiB; together they would fill {fs.min_header_regions})")
            if not paged:
                what.append(f"file space is {fs.strategy.removeprefix('H5F_FSPACE_STRATEGY_')}, not paged, so "
                            "HDF5's page buffer cannot turn small reads into few large ones")
            finding = "; ".join(what)
            add(finding[0].upper() + finding[1:] + ".",
                "`layoutkit reorder` with paged aggregation puts all metadata in the first pages "
                "(recipes cmod-shot, cmod-signal).")
    if r.shot_duplicate_scales:
        extra = (r.duplicate_scales or 0) - r.shot_duplicate_scales
        add(f"{r.shot_duplicate_scales:,} dimension scale(s) repeat another of the same shot byte for byte"
            + (f" (and {extra:,} repeat one of another shot)" if extra > 0 else "") + ".",
            "`layoutkit reorder` stores them once per shot (--dedupe, on by default; recipes cmod-shot, cmod-signal).")
    recipe = (r.written_by or {}).get("recipe", {})
    layout = find_layout(recipe.get("layout", recipe.get("order")))  # "order": an earlier layoutkit's key
    # the recorded recipe's keys are the options' fields: the layout says whether they order shots
    ordered = layout is not None and layout.needs_shot_archive(SimpleNamespace(**recipe))
    if r.written_by:
        what = f", layout {layout.name}" if layout is not None else ""
        what += f", ordered by {recipe['by']}" if recipe.get("by") else ""
        described = f" ({layout.description})" if layout is not None and layout.format == "zarr" else ""
        add(f"Written by `layoutkit {r.written_by.get('command')}` (layoutkit {r.written_by.get('version')}, "
            f"target {recipe.get('target')}{what}){described}.",
            f"`layoutkit recipes from {r.path}` prints its recipe; `--recipe` with it writes the same layout again.")
    if r.shots >= 2 and not ordered:
        add(f"A shot archive: {r.shots:,} shots x {r.signals:,} signals under {r.template}.",
            "Order the bytes for how they are read: `layoutkit reorder --recipe cmod-shot` (a shot at a time) or "
            "`--recipe cmod-signal` (a signal across shots); as Zarr, `layoutkit convert --recipe signal-major` or "
            "`--recipe shot-packed`.")
    none = next((c for c in r.codecs if c.pipeline == "none"), None)
    if none and none.stored_bytes >= 16 * 1024**2 and none.stored_bytes * 2 >= r.stored_bytes:
        add(f"{format_size(none.stored_bytes)} ({_pct(none.stored_bytes, r.stored_bytes)} of the data) is stored uncompressed.",
            "Compress it: `layoutkit convert --compressor zstd:3` (recipe shot-major) or `layoutkit reorder "
            "--compressor gzip:4` (recipe cmod-shot); recipe local-fast for LZ4 on a fast local disk.")
    if zarr_store:
        if r.chunks >= 10_000 and not r.layouts.get("sharded"):
            add(f"{r.chunks:,} chunk files and no shards: listing and copying the store costs one request per file.",
                "`layoutkit convert --shards auto` packs chunks into ~64 MiB shards (recipes signal-major, cloud-netcdf).")
        if not r.consolidated and r.arrays >= 100:
            add(f"{r.arrays:,} arrays and no consolidated metadata: opening the store reads one document per array.",
                "`layoutkit convert` consolidates by default (every recipe has consolidate = true).")
    elif r.format == "netcdf4":
        add("A netCDF-4 file.",
            "For object storage, `layoutkit convert --recipe cloud-netcdf`: xarray opens the store as it opens this file.")
    if not out:
        add("Nothing stands out: chunks, metadata and compression are in a reasonable shape.", "No command needed.")
    return out


__all__ = ["CodecUse", "FileSpace", "HistogramBin", "InspectReport", "Recommendation", "inspect_path", "recommend"]
