"""The signal-major Zarr layout: every shot of one signal packed into one array.

A *series* is one signal name (``/signals/<SIGNAL>``) or one dimension scale path
relative to its shot (``/scales/timebases/t_1khz``). Its shots are packed end to end
along the first axis: a contiguous ragged array in the CF sense, with per-shot index
arrays. Shots whose datasets differ in dtype, trailing shape, fill value or dimension
scales go to separate *parts* of the series (``data``, ``data_1``, ...)::

    <series>/data{sfx}     (sum of lengths, *trailing)  the shots, end to end
    <series>/shot{sfx}     (n,)  shot id (int64 when every shot name is an integer, else text)
    <series>/start{sfx}    (n,)  first row of each shot in data
    <series>/length{sfx}   (n,)  rows of each shot (CF count variable: sample_dimension)

The series group's attribute :data:`SERIES_ATTR` repeats the index (so a reader that has
the consolidated metadata finds a shot without reading the index arrays) and adds what
the arrays cannot hold: the dimension scales of each axis (as paths relative to the
shot, resolved through the scale series), per-shot attributes that differ from the
common ones on ``data``, and the shots in which a scale is a byte-identical copy of
another scale of the shot (stored once, ``same_as``). ``docs/formats/signal-major.md`` documents the layout
for readers that are not layoutkit.

**Version 2** (Zarr v3 stores): the root holds what does not grow with the shots.
An append (``convert --append``) grows a part's arrays by the new shots alike it: in
``data`` from the next chunk (shard) boundary, leaving the rows before it unwritten and
no shot's (so rows are found by ``start``, never by summing ``length``), in the index
arrays right after their last row; it adds a part (a new suffix) for new shots alike none, and a new pair of ``same_as`` arrays listed in the
series attribute's ``same_as.parts`` (:func:`same_as_parts`); the root-level lists are
written again under new names, which the root's layout attribute gives (``"shots"``,
``"mirrored"``). The
series attribute keeps, per part, its suffix, its dimension scales and its number of
shots; the rows are read from the index arrays (chunked :data:`INDEX_CHUNK` rows at a
time), never from the attribute. Per-shot attributes are the text array ``attrs{sfx}``
(one JSON object per row, ``""`` for none; only when the part has any: ``"attrs":
true``), and the shots in which a scale repeats another are the pair ``same_as_shot`` /
``same_as`` (the shot, the other scale's path relative to it). The root-level text array
``/_shots`` lists every shot; ``/_mirrored`` (when there are any) the nodes inside shots
the packing does not carry (arrays, and groups with a trailing ``/``). Each shot group's
``zarr.json`` carries :data:`SHOT_ATTR`, the shot's own index (:func:`shot_document`):
its row in every series, its attributes beyond each part's, the scales it repeats, and
the nodes inside it (which the root's node listing leaves out). So one signal of every
shot reads its series' index arrays, and one shot reads its own document.

Version 1 (Zarr v2 stores, and Zarr v3 stores written before): the attribute repeats the
whole index (``shots``, ``starts``, ``lengths`` and ``shot_attrs`` per part, ``same_as``
as ``{other scale: [shots]}``), and every node is in the consolidated metadata.

This module is the layout's specification, imported by its writer, its reader and its
comparator alike: the names, the version, the index's encoding (:func:`series_document`)
and decoding (:func:`series_rows`). It imports neither numpy nor h5py: the registry of
layouts loads it with every command.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from layoutkit.formats import json_attrs

if TYPE_CHECKING:
    import numpy as np

LAYOUT_NAME = "signal-major"
ALIASES = ("zarr-signal", "signal")  # the former registry key and convert --order value
LAYOUT_VERSION = 2
"""The version written to Zarr v3 stores; Zarr v2 stores are written as version 1 (their
consolidated metadata cannot leave nodes out), and version 1 is still read."""
ROOT_INDEX_VERSION = 1  # the last version whose index rides in the consolidated metadata
INDEX_CHUNK = 65536  # version 2: rows per chunk of the index arrays
SHOTS_ARRAY = "_shots"  # version 2: every shot, natural order
MIRRORED_ARRAY = "_mirrored"  # version 2: the arrays inside shots the packing does not carry
SHOT_ATTR = "layoutkit_shot"  # version 2: a shot group's own nodes
ATTRS, SAME_AS, SAME_AS_SHOT = "attrs", "same_as", "same_as_shot"
SIGNALS_GROUP = "signals"
SCALES_GROUP = "scales"
SERIES_ATTR = "layoutkit_series"
DATA, SHOT, START, LENGTH = "data", "shot", "start", "length"
SAMPLE_DIM = "sample"
# attributes that zarr or xarray give a meaning of their own on an array: kept per shot
PER_SHOT_ONLY_ATTRS = frozenset({"_FillValue", "_ARRAY_DIMENSIONS"})


@dataclass(frozen=True)
class PackedRow:
    """One shot's dataset inside a packed array."""

    shot: str
    source: str  # the dataset's path in the source
    start: int
    length: int


@dataclass(frozen=True)
class PackedPart:
    """One packed array of a series: shots alike in dtype, trailing shape, fill value
    and dimension scales, in natural shot order."""

    suffix: str
    dtype: np.dtype
    kind: str
    trailing: tuple[int, ...]
    fill_value: Any
    dims: tuple[tuple[str, ...], ...]  # per axis, the scales attached (paths relative to the shot)
    attrs: dict[str, Any]  # attributes every shot has, with equal values
    shot_attrs: dict[str, dict[str, Any]]  # the rest, per shot
    rows: tuple[PackedRow, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return (sum(r.length for r in self.rows), *self.trailing)

    @property
    def starts(self) -> list[int]:
        return [r.start for r in self.rows]

    @property
    def lengths(self) -> list[int]:
        return [r.length for r in self.rows]


@dataclass(frozen=True)
class PackedSeries:
    """One signal name, or one dimension scale path, across every shot."""

    group: str  # in the store, e.g. "signals/ip" or "scales/timebases/t_1khz"
    source: str  # the path relative to the shot, e.g. "signals/ip"
    parts: tuple[PackedPart, ...]
    same_as: dict[str, tuple[str, ...]]  # another series' source -> shots where this equals it

    def array(self, part: PackedPart, name: str) -> str:
        return f"/{self.group}/{name}{part.suffix}"


def series_document(series: PackedSeries) -> dict[str, Any]:
    """The JSON of the series group's :data:`SERIES_ATTR` attribute."""
    return {
        "source": series.source,
        "parts": [
            {
                "suffix": p.suffix,
                "dims": [list(axis) for axis in p.dims],
                "shots": [r.shot for r in p.rows],
                "starts": p.starts,
                "lengths": p.lengths,
                "shot_attrs": {shot: json_attrs(a) for shot, a in p.shot_attrs.items()},
            }
            for p in series.parts
        ],
        "same_as": {k: list(v) for k, v in series.same_as.items()},
    }


def same_as_rows(series: PackedSeries) -> list[tuple[str, str]]:
    """(shot, the other scale's source) of every shot in which the series repeats another
    scale, in natural shot order (version 2's ``same_as_shot`` / ``same_as`` arrays)."""
    from layoutkit.templates import natural_key

    rows = [(shot, other) for other, shots in series.same_as.items() for shot in shots]
    return sorted(rows, key=lambda r: natural_key(r[0]))


def series_document_v2(series: PackedSeries) -> dict[str, Any]:
    """The series attribute of version 2: nothing that grows with the shots."""
    return {
        "source": series.source,
        "parts": [
            {"suffix": p.suffix, "dims": [list(axis) for axis in p.dims], "shots": len(p.rows),
             "attrs": bool(p.shot_attrs)}
            for p in series.parts
        ],
        "same_as": {"shots": sum(len(v) for v in series.same_as.values()), "sources": sorted(series.same_as)},
    }


def shot_documents(series: list[PackedSeries]) -> dict[str, dict[str, Any]]:
    """Version 2: each shot's own index, by shot (:data:`SHOT_ATTR` of its group, with
    ``groups`` and ``mirrored`` added by the writer)::

        {"rows": {"signals/ip": ["", 180, 80], ...},   series source -> [part suffix, start, length]
         "attrs": {"signals/ip": {"offset": 3.0}},     the shot's attributes beyond the part's
         "same_as": {"timebases/ne_time": "timebases/t"}}  a scale this shot stores as another
    """
    out: dict[str, dict[str, Any]] = {}
    for s in series:
        for p in s.parts:
            for r in p.rows:
                doc = out.setdefault(r.shot, {"rows": {}, "attrs": {}, "same_as": {}})
                doc["rows"][s.source] = [p.suffix, r.start, r.length]
                if r.shot in p.shot_attrs:
                    doc["attrs"][s.source] = json_attrs(p.shot_attrs[r.shot])
        for other, shots in s.same_as.items():
            for shot in shots:
                out.setdefault(shot, {"rows": {}, "attrs": {}, "same_as": {}})["same_as"][s.source] = other
    return out


class SeriesRow(NamedTuple):
    """One shot of a series, as its index records it."""

    shot: str
    data: str  # the packed array, e.g. "/signals/ip/data_1"
    start: int
    length: int
    shot_attrs: dict[str, Any]  # this shot's attributes beyond the packed array's own
    dims: tuple[tuple[str, ...], ...]  # per axis, the scales (paths relative to the shot)


def series_rows(group: str, doc: dict[str, Any]) -> Iterator[SeriesRow]:
    """Every shot a series' :data:`SERIES_ATTR` document indexes (the inverse of
    :func:`series_document`); ``group`` is the series group's path in the store."""
    for part in doc.get("parts", ()):
        data = f"{group}/{DATA}{part['suffix']}"
        dims = tuple(tuple(axis) for axis in part["dims"])
        extra = part.get("shot_attrs", {})
        for shot, start, length in zip(part["shots"], part["starts"], part["lengths"]):
            yield SeriesRow(shot, data, int(start), int(length), extra.get(shot, {}), dims)


def series_same_as(doc: dict[str, Any]) -> dict[str, str]:
    """Shot -> the scale (path relative to the shot) it repeats, in a scale series that
    is stored once per shot (:func:`series_document`'s ``same_as``)."""
    return {shot: other for other, shots in doc.get("same_as", {}).items() for shot in shots}


def same_as_parts(same_as: dict[str, Any]) -> list[dict[str, Any]]:
    """Version 2: the pairs of ``same_as_shot{suffix}`` / ``same_as{suffix}`` arrays of a
    series (its attribute's ``same_as``): one unsuffixed pair as a run writes it, one
    more per append that brought such shots (``"parts": [{"suffix": ..., "shots": n}]``)."""
    if "parts" in same_as:
        return list(same_as["parts"])
    return [{"suffix": "", "shots": int(same_as.get("shots", 0))}]


def index_arrays(group: str, suffix: str) -> tuple[str, str, str]:
    """The paths of a part's index arrays: its shot ids, starts and lengths."""
    return f"{group}/{SHOT}{suffix}", f"{group}/{START}{suffix}", f"{group}/{LENGTH}{suffix}"


__all__ = [
    "ALIASES", "ATTRS", "DATA", "INDEX_CHUNK", "LAYOUT_NAME", "LAYOUT_VERSION", "LENGTH", "MIRRORED_ARRAY",
    "PER_SHOT_ONLY_ATTRS", "ROOT_INDEX_VERSION", "SAMPLE_DIM", "SAME_AS", "SAME_AS_SHOT", "SCALES_GROUP",
    "SERIES_ATTR", "SHOT", "SHOTS_ARRAY", "SHOT_ATTR", "SIGNALS_GROUP", "START", "PackedPart", "PackedRow",
    "PackedSeries", "SeriesRow", "index_arrays", "same_as_parts", "same_as_rows", "series_document", "series_document_v2", "shot_documents",
    "series_rows", "series_same_as",
]
