"""xarray's ``engine="layoutkit"``: every layout layoutkit writes, and the sources, opened
as users of xarray open anything else.

    xr.open_dataset("by-signal.zarr", engine="layoutkit", group="1160930002/ip")
    xr.open_datatree("archive.zarr", engine="layoutkit", group="1160930002")
    xr.open_dataset("tas.zarr", engine="layoutkit", chunks={})     # dask, the stored chunks
    xr.open_datatree("s3://bucket/archive.zarr", engine="layoutkit",
                     backend_kwargs={"storage_options": {"endpoint_url": ...}})

The file or store is opened with :func:`layoutkit.open` (or an open
:class:`~layoutkit.readers.base.Archive` is given), so every layout reads the same tree
whatever its bytes' order. A shot archive is a tree of shots, each a node holding its
signals as variables and their time bases as coordinates where they align as a netCDF
group's variables do (each dimension name one size, each coordinate name one time base),
else a node per signal, each with its own time bases (:func:`_shot_node`); each signal
is what ``archive.shot(shot)`` gives. xarray's own work on a tree is per node (0.8 ms),
so a node per signal cost a 1,000-shot archive 5 s of it. Any other file is its groups
and arrays, at their paths.

**A group costs that group.** ``open_dataset(group=SHOT/SIGNAL)`` finds that one signal
(:meth:`~layoutkit.readers.base.Archive.exists`) and ``group=SHOT`` that shot's signals
(:meth:`~layoutkit.readers.base.Archive.signals_of`); neither lists the archive's shots,
so their cost does not grow with the archive where the layout can find a shot by itself.

**Decoding is xarray's.** Each node's variables go through xarray's own
``StoreBackendEntrypoint`` (``conventions.decode_cf_variables``), with every standard
argument (``mask_and_scale``, ``decode_times``, ``decode_timedelta``, ``use_cftime``,
``concat_characters``, ``decode_coords``, ``drop_variables``) passed through: packed
variables, fill values, times and bounds decode as ``engine="h5netcdf"`` and
``engine="zarr"`` decode them.

**Lazy and chunk-aware.** Values are :class:`~layoutkit.readers.base.ArchiveBackendArray`
objects behind xarray's explicit indexing: a selection reads only the chunks it touches;
``encoding["preferred_chunks"]`` is the stored unit (a Zarr shard or chunk, an HDF5
chunk), so ``chunks={}`` gives dask the stored chunking. Dimension scales (index
coordinates) are read at opening, each once per read however many arrays share it, as
xarray reads index coordinates. On shot-packed Zarr a shot's arrays are bytes of one
packed row, whose types are known only by reading it, so opening a shot reads it.

Options (``backend_kwargs`` or keywords of ``open_dataset``): ``template``,
``storage_options``, ``page_buffer`` (HDF5 page buffer bytes; by default none: a paged file
in a bucket is read a page per GET all the same), as :func:`layoutkit.open` takes them.

Registered as the ``xarray.backends`` entry point ``layoutkit``; nothing is guessed from
a file's name (``guess_can_open`` is False): the engine is named.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from functools import cached_property
from typing import Any

import numpy as np
import xarray as xr
from xarray.backends import BackendEntrypoint
from xarray.backends.common import AbstractDataStore
from xarray.backends.store import StoreBackendEntrypoint

from layoutkit.readers.base import Archive, ArchiveBackendArray, tree_of
from layoutkit.templates import DEFAULT_TEMPLATE

DECODE_PARAMETERS = ("mask_and_scale", "decode_times", "concat_characters", "decode_coords", "drop_variables",
                     "use_cftime", "decode_timedelta")
"""xarray's standard decoding arguments, passed to its own decoding as they come."""


class NoSuchGroupError(KeyError):
    """``group=`` names no group of the tree (a ``KeyError``, as xarray's own engines raise)."""

    def __str__(self) -> str:  # KeyError quotes its message; this one is a sentence
        return str(self.args[0]) if self.args else ""


class LayoutkitBackend(BackendEntrypoint):
    """xarray's backend for layoutkit's layouts (module docstring)."""

    description = "Open any layout layoutkit writes (Zarr, paged HDF5, Icechunk) and its HDF5 sources"
    url = "https://github.com/layoutkit/layoutkit/blob/main/docs/reading.md"
    open_dataset_parameters = ("filename_or_obj", *DECODE_PARAMETERS, "group", "template", "storage_options",
                               "page_buffer")

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        return False

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool | str = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        group: str | None = None,
        template: str = DEFAULT_TEMPLATE,
        storage_options: dict[str, str] | None = None,
        page_buffer: int | None = None,
    ) -> xr.Dataset:
        """One group of the tree (the root when ``group`` is None) as a Dataset; only that
        group is read."""
        decode = dict(mask_and_scale=mask_and_scale, decode_times=decode_times, concat_characters=concat_characters,
                      decode_coords=decode_coords, drop_variables=drop_variables, use_cftime=use_cftime,
                      decode_timedelta=decode_timedelta)
        archive, owned = _archive(filename_or_obj, template, storage_options, page_buffer)
        try:
            tree = _Tree(archive)
            node = tree.node(_parts(group))
            ds = _decoded(*node, decode)
        except BaseException:
            if owned:
                archive.close()
            raise
        if owned:
            ds.set_close(archive.close)
        return ds

    def open_groups_as_dict(self, filename_or_obj: Any, *, group: str | None = None,
                            template: str = DEFAULT_TEMPLATE, storage_options: dict[str, str] | None = None,
                            page_buffer: int | None = None, **decode: Any) -> dict[str, xr.Dataset]:
        """Every group of the subtree at ``group`` (the root when None), by path relative
        to it ("/" is the group itself); the archive is closed with the first dataset's
        ``close``."""
        _check_decode(decode)
        archive, owned = _archive(filename_or_obj, template, storage_options, page_buffer)
        try:
            out = {path: _decoded(variables, attrs, decode)
                   for path, (variables, attrs) in _Tree(archive).subtree(_parts(group))}
        except BaseException:
            if owned:
                archive.close()
            raise
        if owned:
            out["/"].set_close(archive.close)
        return out

    def open_datatree(self, filename_or_obj: Any, *, group: str | None = None,
                      template: str = DEFAULT_TEMPLATE, storage_options: dict[str, str] | None = None,
                      page_buffer: int | None = None, **decode: Any) -> xr.DataTree:
        """The subtree at ``group`` (the whole tree when None): every node's variables
        lazy, its dimension scales read once per shot."""
        groups = self.open_groups_as_dict(filename_or_obj, group=group, template=template,
                                          storage_options=storage_options, page_buffer=page_buffer, **decode)
        close = groups["/"]._close
        try:
            tree = tree_of(groups)
        except BaseException:
            if close is not None:
                close()
            raise
        if close is not None:
            tree.set_close(close)
        return tree


def _check_decode(decode: dict[str, Any]) -> None:
    unknown = sorted(set(decode) - set(DECODE_PARAMETERS))
    if unknown:
        known = ", ".join((*DECODE_PARAMETERS, "group", "template", "storage_options", "page_buffer"))
        raise TypeError(f"engine='layoutkit' takes no argument {unknown[0]!r}; it takes {known}.")


def _archive(where: Any, template: str, storage_options: dict[str, str] | None,
             page_buffer: int | None) -> tuple[Archive, bool]:
    """The archive to read, and whether it is this engine's to close (an open archive
    given by the caller stays the caller's)."""
    if isinstance(where, Archive):
        return where, False
    import layoutkit

    where = os.fspath(where) if isinstance(where, os.PathLike) else where
    return layoutkit.open(where, template=template, storage_options=storage_options, page_buffer=page_buffer), True


def _parts(group: str | None) -> tuple[str, ...]:
    return tuple(p for p in (group or "").split("/") if p)


Node = tuple[dict[str, xr.Variable], dict[str, Any]]
"""A node of the tree before decoding: its variables (lazy) and its attributes."""


class _Tree:
    """The tree the engine shows of an archive, node by node: a shot archive's root, shots
    and signals, or any other file's groups."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive

    @cached_property
    def shots(self) -> bool:
        """Whether the archive is shown as shots and signals (asked only where a group's
        path does not tell: a signal or a shot found by the template tells)."""
        return self.archive.has_shots()

    def node(self, parts: tuple[str, ...]) -> Node:
        """One node, read alone (NoSuchGroupError when there is none)."""
        a = self.archive
        if len(parts) == 2 and a.exists(path := a.path_of(*parts)):  # a signal, found by the template
            return _signal_node(a, parts[1], a.lazy_variables([path])[0])
        if len(parts) == 1 and (signals := a.signals_of(parts[0])):  # a shot
            return _shot_node(a, parts[0], signals)[0]
        if not self.shots:
            found = dict(self._array_nodes(parts))
            if "/" not in found:
                raise self._no_group(parts)
            return found["/"]
        if not parts:
            return {}, a.group_attrs("/")
        raise self._no_group(parts)

    def subtree(self, parts: tuple[str, ...]) -> Iterator[tuple[str, Node]]:
        """Every node at and below ``parts``, by path relative to it."""
        a = self.archive
        if len(parts) == 2 and a.exists(a.path_of(*parts)):  # a signal, found by the template
            yield "/", self.node(parts)
            return
        one_shot = a.signals_of(parts[0]) if len(parts) == 1 else []
        if not one_shot and not (not parts and self.shots):  # not a shot archive's: groups and arrays
            nodes = list(self._array_nodes(parts))
            if not nodes:
                raise self._no_group(parts)
            yield from nodes
            return
        if one_shot:
            by_shot = {parts[0]: one_shot}
        else:
            yield "/", ({}, a.group_attrs("/"))
            by_shot = {}
            for shot, signal, path in a.every_signal():  # one walk of the archive
                by_shot.setdefault(shot, []).append((signal, path))
        for shot, signals in by_shot.items():  # a shot's signals together: each time base read once
            at = "/" if parts else f"/{shot}"
            node, apart = _shot_node(a, shot, signals)
            yield at, node
            for signal, array in apart:
                yield f"{at.rstrip('/')}/{signal}", _signal_node(a, signal, array)

    def _array_nodes(self, parts: tuple[str, ...]) -> Iterator[tuple[str, Node]]:
        """A file that is not a shot archive: the groups at and below ``parts`` with their
        arrays (a dimension scale is its dimension's coordinate), by path relative to it."""
        a = self.archive
        top = "/" + "/".join(parts)
        inside = (lambda p: True) if not parts else (lambda p: p == top or p.startswith(top + "/"))
        groups: dict[str, list[str]] = {}
        for path in sorted(a.arrays()):
            group = path.rpartition("/")[0] or "/"
            if not inside(group):
                continue
            groups.setdefault(group, [])
            if not a.dimension_only(path):
                groups[group].append(path)
        if not groups and (not parts or not a.exists(top)):
            return
        wanted = [p for paths in groups.values() for p in paths]
        arrays = dict(zip(wanted, a.lazy_variables(wanted)))  # each scale read once
        for group in list(groups):  # the groups between, with their attributes
            chain = group.strip("/").split("/") if group != "/" else []
            for i in range(len(parts), len(chain)):
                groups.setdefault("/" + "/".join(chain[:i]) if i else "/", [])
        groups.setdefault(top if parts else "/", [])
        for group in sorted(groups):
            named = {d for p in groups[group] for d in arrays[p].dims}
            for path in groups[group]:
                name = path.rsplit("/", 1)[-1]
                array = arrays[path]
                if array.ndim == 1 and array.dims[0] != name and name in named and str(array.dims[0]).startswith("dim_"):
                    arrays[path] = array.rename({array.dims[0]: name})  # a scale is its dimension's coordinate
            _phony_dims(arrays, groups[group])
            variables: dict[str, xr.Variable] = {}
            for path in groups[group]:
                _add_array(variables, a, path.rsplit("/", 1)[-1], arrays[path], path)
            relative = "/" + group[len(top):].strip("/") if parts else group
            attrs = a.group_attrs(group)
            if group == "/":  # netCDF-4's own bookkeeping, hidden as netCDF's readers hide it
                attrs.pop("_NCProperties", None)
            yield relative, (variables, attrs)

    @staticmethod
    def _no_group(parts: tuple[str, ...]) -> NoSuchGroupError:
        return NoSuchGroupError(f"no group {'/'.join(parts)!r} in this archive")


def _phony_dims(arrays: dict[str, xr.DataArray], paths: list[str]) -> None:
    """Axes without a dimension scale are ``dim_<axis>``; where one such name would have two
    lengths in a group (two datasets of 5 and 3 values), xarray refuses the group, so there
    each unnamed axis is named by its length instead, ``phony_dim_<k>`` for the group's
    k-th length (a second axis of that length in one array, its own), as h5netcdf names
    them (``phony_dims="sort"``)."""
    lengths: dict[str, set[int]] = {}
    for p in paths:
        for dim, n in arrays[p].sizes.items():
            if str(dim).startswith("dim_"):
                lengths.setdefault(str(dim), set()).add(n)
    if all(len(n) < 2 for n in lengths.values()):
        return
    number: dict[tuple[int, int], str] = {}
    for p in paths:
        renames: dict[Any, str] = {}
        for dim, n in arrays[p].sizes.items():
            if str(dim).startswith("dim_"):
                again = sum(1 for d in renames if arrays[p].sizes[d] == n)
                renames[dim] = number.setdefault((n, again), f"phony_dim_{len(number)}")
        if renames:
            arrays[p] = arrays[p].rename(renames)


def _shot_node(archive: Archive, shot: str, signals: list[tuple[str, str]]) -> tuple[Node, list[tuple[str, xr.DataArray]]]:
    """A shot's node, and the signals that are nodes of their own below it (none when
    they align). Its signals are its variables where they align as a netCDF group's
    variables do: each dimension name one size, each coordinate name one time base;
    else each signal is a node of its own, with its own time bases."""
    attrs = archive.group_attrs(archive.shot_path(shot))
    arrays = archive.lazy_variables([path for _, path in signals])
    variables = _aligned(archive, [(signal, array) for (signal, _), array in zip(signals, arrays)])
    if variables is not None:
        return (variables, attrs), []
    return ({}, attrs), [(signal, array) for (signal, _), array in zip(signals, arrays)]


def _aligned(archive: Archive, arrays: list[tuple[str, xr.DataArray]]) -> dict[str, xr.Variable] | None:
    """The variables of one node holding ``arrays`` and their coordinates, or None where
    two of them give one name two meanings (a dimension two sizes, a coordinate two time
    bases, a signal the name of another's coordinate)."""
    sizes: dict[Any, int] = {}
    coords: dict[Any, xr.DataArray] = {}
    names = {signal for signal, _ in arrays}
    for _, array in arrays:
        for dim, size in array.sizes.items():
            if sizes.setdefault(dim, size) != size:
                return None
        for name, coord in array.coords.items():
            seen = coords.setdefault(name, coord)
            if name in names or (seen is not coord and not _same_coordinate(seen, coord)):
                return None
    variables: dict[str, xr.Variable] = {}
    for signal, array in arrays:
        _add_array(variables, archive, signal, array, archive_path(array))
    return variables


def _same_coordinate(a: xr.DataArray, b: xr.DataArray) -> bool:
    """Whether two signals' coordinates of one name are one time base (the same values,
    dimensions, type and attributes; read once per shot, they are mostly the same object)."""
    return (a.dims == b.dims and a.dtype == b.dtype and a.attrs == b.attrs
            and (a.variable._data is b.variable._data or np.array_equal(np.asarray(a.values), np.asarray(b.values))))


def _signal_node(archive: Archive, signal: str, array: xr.DataArray) -> Node:
    variables: dict[str, xr.Variable] = {}
    _add_array(variables, archive, signal, array, archive_path(array))
    return variables, {}


def archive_path(array: xr.DataArray) -> str | None:
    """The archive path a lazy array reads (None: its values are in memory)."""
    data = getattr(array.variable._data, "array", None)
    return data.path if isinstance(data, ArchiveBackendArray) else None


def _add_array(variables: dict[str, xr.Variable], archive: Archive, name: str, array: xr.DataArray,
               path: str | None) -> None:
    """An array and its coordinates as the plain variables xarray's decoding takes (an
    index coordinate's values are in memory, read once and shared)."""
    for cname, coord in array.coords.items():
        if cname not in variables:
            values = np.asarray(coord.values)
            variables[str(cname)] = xr.Variable(coord.dims, values, cf_attrs(coord.attrs, values.dtype))
    encoding: dict[str, Any] = {}
    chunks = archive.stored_chunks(path) if path else None
    if chunks and len(chunks) == array.ndim:
        encoding = {"chunks": chunks, "preferred_chunks": dict(zip(array.dims, chunks))}
    if path:
        encoding["source"] = f"{archive.path}:{path}"
    attrs = dict(array.attrs)
    fill = archive.fill_attribute(path) if path else None
    if fill is not None and "_FillValue" not in attrs:  # Zarr v2: the array's fill value, as xarray's engine
        attrs["_FillValue"] = fill
    variables[name] = xr.Variable(array.dims, array.variable._data, cf_attrs(attrs, array.dtype), encoding=encoding)


FILL_ATTRS = ("_FillValue", "missing_value")
CF_SCALARS = frozenset({*FILL_ATTRS, "scale_factor", "add_offset"})
"""The attributes xarray's decoding takes as scalars, as netCDF's readers give them."""


def cf_attrs(attrs: dict[str, Any], dtype: np.dtype) -> dict[str, Any]:
    """Attributes as netCDF's readers give them to xarray's decoding: a one-element fill
    value, scale or offset a scalar (netCDF's data model), a fill value of the variable's type (a Zarr store
    holds a float's as xarray's zarr engine writes it: base64 of its bytes, decoded as that
    engine decodes it)."""
    out = {k: v[0] if k in CF_SCALARS and isinstance(v, list) and len(v) == 1 else v for k, v in attrs.items()}
    for key in FILL_ATTRS:
        value = out.get(key)
        if value is None or np.dtype(dtype).kind not in "iufcb":
            continue
        if isinstance(value, str) and np.dtype(dtype).kind in "fc":
            from xarray.backends.zarr import FillValueCoder

            value = FillValueCoder.decode(value, dtype)
        try:
            out[key] = np.asarray(value, dtype=dtype)[()]
        except (TypeError, ValueError, OverflowError):  # not of the variable's type: as it came
            pass
    return out


class _NodeStore(AbstractDataStore):
    """One node's variables and attributes as xarray's decoding reads a store."""

    def __init__(self, variables: dict[str, xr.Variable], attrs: dict[str, Any]) -> None:
        self._variables, self._attrs = variables, attrs

    def get_variables(self) -> dict[str, xr.Variable]:
        return self._variables

    def get_attrs(self) -> dict[str, Any]:
        return self._attrs

    def get_dimensions(self) -> dict[str, int]:
        return {str(d): n for v in self._variables.values() for d, n in v.sizes.items()}


def _decoded(variables: dict[str, xr.Variable], attrs: dict[str, Any], decode: dict[str, Any]) -> xr.Dataset:
    """A node as a Dataset, decoded by xarray's own decoding; variable-length sequences
    (ragged arrays: an object array of arrays) as read, beside it: xarray's decoding
    takes an object array's first element for a scalar and fails on a sequence."""
    ragged = {name: v for name, v in variables.items() if _ragged(v)}
    ds = StoreBackendEntrypoint().open_dataset(
        _NodeStore({k: v for k, v in variables.items() if k not in ragged}, dict(attrs)), **decode)
    return ds.assign(ragged) if ragged else ds


def _ragged(variable: xr.Variable) -> bool:
    """Whether an object variable holds sequences (its first element read to tell)."""
    if variable.dtype != np.dtype(object) or not variable.size:
        return False
    first = variable[(0,) * variable.ndim].values if variable.ndim else variable.values
    return isinstance(np.asarray(first, dtype=object).reshape(-1)[0], np.ndarray)


__all__ = ["DECODE_PARAMETERS", "LayoutkitBackend", "NoSuchGroupError", "archive_path"]
