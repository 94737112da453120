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
LAYOUT_VERSION = 1
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


def index_arrays(group: str, suffix: str) -> tuple[str, str, str]:
    """The paths of a part's index arrays: its shot ids, starts and lengths."""
    return f"{group}/{SHOT}{suffix}", f"{group}/{START}{suffix}", f"{group}/{LENGTH}{suffix}"


__all__ = [
    "ALIASES", "DATA", "LAYOUT_NAME", "LAYOUT_VERSION", "LENGTH", "PER_SHOT_ONLY_ATTRS", "SAMPLE_DIM", "SCALES_GROUP",
    "SERIES_ATTR", "SHOT", "SIGNALS_GROUP", "START", "PackedPart", "PackedRow", "PackedSeries", "SeriesRow",
    "index_arrays", "series_document", "series_rows", "series_same_as",
]
