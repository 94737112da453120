"""The reader of signal-major Zarr: every shot of a signal packed into one array, with an
index of rows (:mod:`layoutkit.layouts.signal_major.spec`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import xarray as xr

from layoutkit.formats import LAYOUT_ATTR
from layoutkit.layouts.signal_major.spec import (
    LAYOUT_NAME,
    LAYOUT_VERSION,
    SERIES_ATTR,
    SIGNALS_GROUP,
    series_rows,
    series_same_as,
)
from layoutkit.plan import compile_template, natural_key
from layoutkit.readers.base import (
    NotAnArchiveError,
    Selection,
    plain_attrs,
)
from layoutkit.readers.packed import PackedArchive
from layoutkit.readers.zarr_ import tree_of


@dataclass(frozen=True)
class _Row:
    """Where one shot's dataset lies in a packed array."""

    data: str  # the packed array
    start: int
    length: int
    attrs: dict[str, Any]  # the attributes of this shot's dataset beyond the array's own
    dims: tuple[tuple[str, ...], ...]  # per axis, the scales (paths relative to the shot)


@dataclass(frozen=True)
class _Series:
    group: str  # "/signals/ip", "/scales/timebases/t_1khz"
    rows: dict[str, _Row]  # shot -> row
    same_as: dict[str, str]  # shot -> the source path (relative to the shot) of an equal scale


class SignalMajorArchive(PackedArchive):
    """A signal-major Zarr store from ``convert --layout signal-major``: every shot of a
    signal packed in one array (:mod:`layoutkit.layouts.signal_major.write` has the layout).

    The per-shot index comes with the metadata (the series groups' attributes), so
    finding a shot costs no request: ``signal`` reads each packed array once and slices
    it per shot, ``shot`` reads one slice of each signal's array (a partial shard read).
    Source paths (``/shots/<SHOT>/signals/<SIGNAL>``, or a scale's) work in ``get``
    as well as the stored arrays' paths; arrays the packing does not carry are mirrored
    at their source paths and read as in a shot-major store.
    """

    layout = LAYOUT_NAME

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # the parameters of ZarrArchive
        super().__init__(*args, **kwargs)
        meta = self.root.attrs.get(LAYOUT_ATTR) or {}
        if int(meta.get("version", 0)) > LAYOUT_VERSION:
            raise NotAnArchiveError(
                f"{self.path} holds version {meta.get('version')} of the signal-major layout; this layoutkit "
                f"reads version {LAYOUT_VERSION} and older."
            )
        self._set_template(meta.get("template", self.template))  # the store is packed by its own template
        _, self._prefix = compile_template(self.template)
        self._series: dict[str, _Series] = {}  # by source path relative to the shot
        self._signal_series: dict[str, _Series] = {}  # by signal name
        for group, node in self._nodes.items():
            doc = None if hasattr(node, "shape") else dict(node.attributes).get(SERIES_ATTR)
            if not doc:
                continue
            series = self._read_series(group, doc)
            self._series[doc["source"]] = series
            if group.startswith(f"/{SIGNALS_GROUP}/"):
                self._signal_series[group.rsplit("/", 1)[-1]] = series
        self._tree: dict[str, set[str]] | None = None

    def _read_series(self, group: str, doc: dict[str, Any]) -> _Series:
        rows, common = {}, {}
        for row in series_rows(group, doc):
            if row.data not in common:
                common[row.data] = plain_attrs(dict(self._nodes[row.data].attributes), self.hidden_attrs)
            rows[row.shot] = _Row(row.data, row.start, row.length, {**common[row.data], **row.shot_attrs}, row.dims)
        return _Series(group, rows, series_same_as(doc))

    # -- source paths -> packed rows -----------------------------------------------

    def _locate(self, path: str) -> _Row | None:
        """The packed row holding the source dataset at ``path``, or None."""
        m = self._prefix.match(path)
        if m is None:
            return None
        shot, rel = m.group("shot"), path[m.end() :]
        series = self._series.get(rel)
        if series is None:
            return None
        if shot in series.rows:
            return series.rows[shot]
        kept = self._series.get(series.same_as.get(shot, ""))  # a scale stored once per shot
        return kept.rows.get(shot) if kept else None

    def _virtual_tree(self) -> dict[str, set[str]]:
        """Group -> member names of the source hierarchy the packed rows stand for."""
        if self._tree is None:
            self._tree = tree_of(f"{self.shot_path(shot)}/{rel}" for rel, series in self._series.items()
                                  for shot in {*series.rows, *series.same_as})
        return self._tree

    @cached_property
    def _listing(self) -> tuple[list[str], list[str]]:
        shots = {shot for s in self._signal_series.values() for shot in s.rows}
        signals = {name for name, s in self._signal_series.items() if s.rows}
        shots |= {shot for shot, _ in self._mirrored_signals.values()}
        signals |= {sig for _, sig in self._mirrored_signals.values()}
        return sorted(shots, key=natural_key), sorted(signals, key=natural_key)

    # -- reading ---------------------------------------------------------------------

    def get(self, path: str, selection: Selection = ()) -> np.ndarray:
        if self._is_stored_array(path):
            return super().get(path, selection)
        row = self._locate(path)
        if row is None:
            raise KeyError(f"{path} is not in {self.path}")
        a = self._array(row.data)
        if not selection:
            return np.asarray(a[row.start : row.start + row.length])
        first, rest = selection[0], tuple(selection[1:])
        if isinstance(first, slice):
            lo, hi, step = first.indices(row.length)
            if step == 1:
                return np.asarray(a[(slice(row.start + lo, row.start + max(lo, hi)), *rest)])
            return np.asarray(a[(slice(row.start, row.start + row.length), *rest)])[first]
        index = int(first) + (row.length if int(first) < 0 else 0)
        if not 0 <= index < row.length:
            raise IndexError(f"index {first} is out of bounds for axis 0 of {path}, of length {row.length}")
        return np.asarray(a[(row.start + index, *rest)])

    def _read_rows(self, rows: list[_Row]) -> list[np.ndarray]:
        """The data of several rows, reading each packed array once (the range that
        covers its rows)."""
        spans: dict[str, tuple[int, int]] = {}
        for r in rows:
            lo, hi = spans.get(r.data, (r.start, r.start + r.length))
            spans[r.data] = (min(lo, r.start), max(hi, r.start + r.length))
        values = self._read_many([(p, (slice(lo, hi),)) for p, (lo, hi) in spans.items()])
        blocks = {p: (lo, v) for (p, (lo, _)), v in zip(spans.items(), values)}
        return [blocks[r.data][1][r.start - blocks[r.data][0] : r.start - blocks[r.data][0] + r.length] for r in rows]

    def signal(self, signal: str) -> dict[str, xr.DataArray]:
        series = self._signal_series.get(signal)
        shots = set(series.rows) if series else set()
        shots |= {shot for shot, sig in self._mirrored_signals.values() if sig == signal}
        ordered = sorted(shots, key=natural_key)
        arrays = self._variables([self.path_of(shot, signal) for shot in ordered])
        return {shot: a.rename(signal) for shot, a in zip(ordered, arrays)}


def open_archive(location: Any, *, template: str, model: Any = None, sleep: Any = None, page_buffer: int = 0,
                 root: Any = None) -> SignalMajorArchive:
    """The reader of a store of this layout (:meth:`layoutkit.layout.Layout.open`)."""
    return SignalMajorArchive(location, template, model, sleep, root=root)


__all__ = ["open_archive", "SignalMajorArchive"]
