"""What ``inspect`` reports: the frozen :class:`InspectReport`, and the tally that builds it."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from layoutkit.templates import match_template

SMALL_CHUNK_BYTES = 16 * 1024

LARGE_CHUNK_BYTES = 16 * 1024**2

HISTOGRAM_EDGES = (4 * 1024, 16 * 1024, 64 * 1024, 256 * 1024, 1024**2, 4 * 1024**2, 16 * 1024**2)

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
    # arrays of a type Zarr has no spelling for, by the type rule convert stores it by (formats.RULES):
    # in an HDF5 file by their types, in a Zarr store by the attributes that name the rule
    type_rules: dict[str, int] = field(default_factory=dict)

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

def recorded_provenance(value: Any) -> dict[str, Any] | None:
    """The provenance document layoutkit records in a variant's root, if any."""
    try:
        doc = json.loads(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError, AttributeError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("recipe"), dict) else None

def _finite(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None

class Tally:
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
        self.type_rules: Counter[str] = Counter()  # arrays by the type rule Zarr stores them by

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
            type_rules=dict(self.type_rules.most_common()),
            **specific,
        )


def present_part(logical: int, shape: tuple[int, ...], chunks: tuple[int, ...], present: int) -> int:
    """The array's bytes held by ``present`` of its chunks: all of them when every chunk
    is stored, a proportional share when some were never written (sparse arrays)."""
    total = math.prod(-(-s // c) for s, c in zip(shape, chunks)) if shape else 1
    return logical if present >= total else logical * present // max(1, total)


__all__ = ["HISTOGRAM_EDGES", "LARGE_CHUNK_BYTES", "SMALL_CHUNK_BYTES", "CodecUse", "FileSpace", "HistogramBin",
           "InspectReport", "Recommendation", "Tally", "present_part", "recorded_provenance"]
