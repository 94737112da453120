"""What the packing layouts share: a Zarr store whose source datasets are rows of packed arrays.

Signal-major (each signal of every shot end to end in one array) and shot-packed (each
shot's datasets, as bytes, in one array) both keep an index that places a source
dataset in a packed array, and mirror everything else at its source path as a
shot-major store does. :class:`PackedArchive` is the reading both share once a layout
has located a dataset: listing the archive, building xarray objects with their time
bases read in the same round of requests, whole shots. A layout's reader subclasses it
and says where a dataset lies (:meth:`PackedArchive.locate`), how rows are read
(:meth:`PackedArchive._read_rows`) and which groups its index implies
(:meth:`PackedArchive.virtual_tree`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cached_property
from typing import Any

import xarray as xr

from layoutkit.readers.base import (
    ScaleCoordinate,
    bytes_back,
    lazy_data,
    plain_attrs,
    scale_coordinate,
    shot_tree,
    with_coords,
)
from layoutkit.readers.zarr_ import ZarrArchive, zarr_dtype
from layoutkit.templates import match_template


class PackedArchive(ZarrArchive):
    """A Zarr store whose source datasets are rows of packed arrays (the rest mirrored).

    A row (what :meth:`locate` returns) has ``data`` (the packed array's path),
    ``start`` and ``length`` (where it lies), ``attrs`` (the source dataset's
    attributes) and ``dims`` (per axis, its dimension scales: paths relative to the
    shot, or absolute).
    """

    element_rows: bool = False
    """Whether a row's start and length count elements of its packed array (signal-major)
    rather than bytes (shot-packed): then a row's shape and type are known without reading
    it, and :meth:`lazy_variables` leaves its values unread."""

    _prefix: re.Pattern[str]
    """What matches a shot's path under the store's template (each packing layout's reader
    compiles it from its template, :func:`~layoutkit.templates.compile_template`)."""

    def has_shots(self) -> bool:
        """A packing layout packs a shot archive's signals: it is one by what it is."""
        return True

    def shot_of(self, path: str) -> str:
        """The shot a packed dataset's path lies in."""
        m = self._prefix.match(path)
        if m is None:
            raise KeyError(f"{path} lies in no shot of the template {self.template!r}")
        return m.group("shot")

    # -- what a packing layout says ------------------------------------------------------

    def locate(self, path: str) -> Any | None:
        """The packed row holding the source dataset at ``path``, or None."""
        raise NotImplementedError

    def _read_rows(self, rows: list[Any]) -> list[Any]:
        """The values of several rows, read together."""
        raise NotImplementedError

    def virtual_tree(self) -> dict[str, set[str]]:
        """Group -> member names of the source hierarchy the packed rows stand for."""
        raise NotImplementedError

    @cached_property
    def _listing(self) -> tuple[list[str], list[str]]:
        """(shots, signals), each in natural order."""
        raise NotImplementedError

    # -- shared --------------------------------------------------------------------------

    def scale_source(self, shot: str, ref: str) -> str:
        return ref if ref.startswith("/") else f"{self.shot_path(shot)}/{ref}"

    def _may_rename(self) -> bool:
        return True  # its shots' and signals' names are in its index, not among its nodes: each listing checked

    def _is_stored_array(self, path: str) -> bool:
        return hasattr(self._nodes.get(path), "shape")

    def children(self, group: str) -> list[str]:
        key = "/" if group in ("", "/") else group.rstrip("/")
        return sorted(set(super().children(group)) | self.virtual_tree().get(key, set()))

    def exists(self, path: str) -> bool:
        return path in self._nodes or self.locate(path) is not None or path in self.virtual_tree()

    @cached_property
    def _mirrored_signals(self) -> dict[str, tuple[str, str]]:
        """The signals stored at their own paths: path -> (shot, signal). A store opened
        for reading does not change, so this and the listings below are worked out once."""
        stored = [p for p in self._nodes if self._is_stored_array(p)]
        return match_template(stored, self.template)

    @property
    def shots(self) -> list[str]:
        return list(self._listing[0])

    @property
    def signals(self) -> list[str]:
        return list(self._listing[1])

    def _variables(self, paths: Iterable[str], lazy: bool = False) -> list[xr.DataArray]:
        """Several source datasets with their coordinates; each packed array is read
        once for all of them, and so is each scale's. The datasets' rows and their
        scales' rows are fetched together (one round of requests, not two: a signal read
        in a bucket waited for its data, then for its time bases)."""
        paths = list(paths)
        located = {p: row for p in paths if (row := self.locate(p)) is not None}  # the packed ones
        packed = list(located)
        scales: dict[str, str] = {}  # the first scale of each axis
        for p in packed:
            shot = self.shot_of(p)
            for axis in located[p].dims:
                if axis:
                    scales.setdefault(self.scale_source(shot, axis[0]), "")
        for p in paths:
            if p not in located:
                for axis in self._scale_paths(p):
                    if axis:
                        scales.setdefault(axis[0], "")
        scale_rows = {s: row for s in scales if (row := self.locate(s)) is not None}
        lazy = lazy and self.element_rows
        rows = [] if lazy else [located[p] for p in packed]
        values = self._read_rows(rows + list(scale_rows.values()))
        datas = dict(zip(packed, values)) if not lazy else {
            p: lazy_data(self, p, (located[p].length, *tuple(self._nodes[located[p].data].shape)[1:]),
                         zarr_dtype(self._nodes[located[p].data])) for p in packed}
        coords = {s: (v, plain_attrs(dict(row.attrs), self.hidden_attrs))
                  for (s, row), v in zip(scale_rows.items(), values[len(rows):])}
        for s in scales:  # a scale stored at its own path, as a shot-major store holds it
            if s not in coords:
                coords[s] = (super().get(s), plain_attrs(dict(self._nodes[s].attributes), self.hidden_attrs))
        index: dict[str, ScaleCoordinate] = {}  # scale -> its coordinate, built once
        out = []
        for p in paths:
            row = located.get(p)
            if row is None:  # mirrored: as a shot-major store holds it
                data = super().get(p)
                attrs = plain_attrs(dict(self._nodes[p].attributes), self.hidden_attrs)
                axes = [axis[:1] for axis in self._scale_paths(p)]
            else:
                data, attrs = datas[p], plain_attrs(dict(row.attrs), self.hidden_attrs)
                shot = self.shot_of(p)
                axes = [[self.scale_source(shot, axis[0])] if axis else [] for axis in row.dims]
            dims, coord = [], {}
            for axis in range(data.ndim):
                scale = axes[axis][0] if axis < len(axes) and axes[axis] else None
                if scale is None:
                    dims.append(f"dim_{axis}")
                    continue
                name = scale.rsplit("/", 1)[-1]
                if scale not in index:
                    values, scale_attrs = coords[scale]
                    index[scale] = scale_coordinate(name, values, bytes_back(scale_attrs))
                coord[name] = index[scale]
                dims.append(name)
            out.append(with_coords(data, dims, coord, bytes_back(dict(attrs))))
        return out

    def _has_array(self, path: str) -> bool:
        """Whether a dataset of the source is at ``path`` (located in a packed array, or
        stored at its path). Unlike :meth:`_exists`, it never needs the tree of groups,
        which is built on first use (50 ms for 7,000 signals)."""
        return self.locate(path) is not None or self._is_stored_array(path)

    def variable(self, path: str) -> xr.DataArray:
        if not self._has_array(path):
            raise KeyError(f"{path} is not an array in {self.path}")
        return self._variables([path])[0]

    def _shot_reads(self, shot: str) -> list[tuple[str, Any]]:
        # a shot is a slice of each signal's series, which zarr reads: nothing to fetch whole
        return []

    def signals_of(self, shot: str | int) -> list[tuple[str, str]]:
        names, paths = self._shot_paths(self.stored_name(str(shot)))  # the shot's rows, not the archive's shot list
        return list(zip(names, paths))

    def _shot_paths(self, shot: str) -> tuple[list[str], list[str]]:
        """A shot's signals and their paths."""
        names = [sig for sig in self.signals if self._has_array(self.path_of(shot, sig))]
        return names, [self.path_of(shot, sig) for sig in names]

    def shot(self, shot: str | int) -> xr.DataTree:
        shot = str(shot)
        names, paths = self._shot_paths(shot)
        arrays = self._variables(paths)
        return shot_tree(shot, list(zip(names, arrays)), self.group_attrs(self.shot_path(shot)))



__all__ = ["PackedArchive"]
