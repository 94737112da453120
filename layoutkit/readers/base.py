"""What every reader of :mod:`layoutkit.archive` shares: the :class:`Archive` interface
(a shot archive's ``shots``, ``signals``, ``read``, ``shot``, ``signal``; any file's
``arrays``, ``get``, ``blocks``), and the building of xarray objects from what a layout
stores (dimension scales as coordinates, a shot as a DataTree)."""

from __future__ import annotations

import base64
import inspect
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np
import pandas as pd
import xarray as xr
from xarray.backends.common import BackendArray

from layoutkit.errors import InvalidOptionError, LayoutkitError
from layoutkit.formats import LONG_DOUBLE_ATTRS_ATTR, long_doubles, stored_path
from layoutkit.plan import iter_blocks
from layoutkit.storage.counting import Counter
from layoutkit.templates import DEFAULT_TEMPLATE, natural_key

Selection = tuple[slice | int, ...]
SCAN_BLOCK_BYTES = 16 * 1024**2  # contiguous datasets are scanned in blocks of this size


class NotAnArchiveError(LayoutkitError, FileNotFoundError):
    """The path is neither an HDF5 file nor a Zarr store."""


class Archive:
    """A shot archive (or any array hierarchy) in one layout.

    Subclasses implement the layout; the public methods are the same for all.
    Attributes: ``path``, ``format`` ("hdf5" or "zarr"), ``layout`` (e.g. "hdf5",
    "hdf5-paged", "shot-major"), ``template`` and ``counter`` (requests and bytes read).
    """

    format: ClassVar[str] = ""
    layout: str = ""
    # a Zarr store: a name with a backslash is at its stored path (formats.stored_path)
    names_stored: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, kind in (("shot", "shot"), ("signal", "signal"), ("signal_packed", "signal")):
            if name in cls.__dict__:  # every layout's own reads say so when the name is unknown
                setattr(cls, name, _refusing_unknown(cls.__dict__[name], kind))
        if cls.names_stored:  # a source's path (a name with a backslash) read at its stored path
            for name in AT_PATH:
                if name in cls.__dict__:
                    setattr(cls, name, _at_stored_path(cls.__dict__[name]))
            for name in AT_PATHS:
                if name in cls.__dict__:
                    setattr(cls, name, _at_stored_paths(cls.__dict__[name]))
            members = dict(cls.__dict__)
            if not any(getattr(b, "names_stored", False) for b in cls.__bases__):  # the first: Archive's own too
                members = {**{k: v for k, v in Archive.__dict__.items() if k not in members}, **members}
            for name, member in members.items():  # listed by the source's names (source_name)
                if isinstance(member, property) and not name.startswith("_") and member.fget is not None:
                    setattr(cls, name, property(_by_source_names(member.fget, name)))
                elif inspect.isfunction(member) and not name.startswith("_"):
                    setattr(cls, name, _by_source_names(member, name))

    def __init__(self, path: Path, template: str) -> None:
        self.path = path
        self.counter = Counter()
        self._set_template(template)

    def _set_template(self, template: str) -> None:
        self.template = "/" + template.strip("/")
        parts = self.template.strip("/").split("/")
        if parts.count("{shot}") != 1 or parts.count("{signal}") != 1:
            raise InvalidOptionError(
                f"Expected a template with one {{shot}} and one {{signal}} component, such as "
                f"{DEFAULT_TEMPLATE}. Got {template!r}."
            )
        self._parts = parts

    # -- what a layout's reader implements (public hooks: a reader of another package's
    # layout overrides these, and nothing private) -----------------------------------

    def children(self, group: str) -> list[str]:
        """Names of the members of a group ([] when it does not exist)."""
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        """Whether the archive has an array or group at ``path`` (a path of the source)."""
        raise NotImplementedError

    def arrays(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Every stored array, with its shape and dtype (what ``open`` lists)."""
        raise NotImplementedError

    def get(self, path: str, selection: Selection = ()) -> np.ndarray:
        """Read ``selection`` of the array at ``path`` (a path of the source)."""
        raise NotImplementedError

    def dimension_only(self, path: str) -> bool:
        """Whether the array at ``path`` is a netCDF dimension without a variable (a
        placeholder scale, not data: converted stores keep it as a dimension only)."""
        return False

    def blocks(self) -> list[tuple[str, Selection]]:
        """The stored arrays cut into the units the layout stores (chunks, shards,
        ~16 MiB blocks of contiguous data): the plan of a full scan."""
        raise NotImplementedError

    def read_block(self, path: str, selection: Selection) -> np.ndarray:
        """Read one unit of :meth:`blocks`."""
        return self.get(path, selection)

    def read_blocks(self, units: Iterable[tuple[str, Selection]]) -> Iterator[np.ndarray]:
        """Read units of :meth:`blocks` in turn, each given back before the next is read
        (a layout whose units are small may read several together)."""
        for path, selection in units:
            yield self.read_block(path, selection)

    def variable(self, path: str) -> xr.DataArray:
        """The array at ``path`` with its dimension scales as coordinates."""
        raise NotImplementedError

    def group_attrs(self, path: str) -> dict[str, Any]:
        """The attributes of the group at ``path`` ({} when there is none)."""
        return {}

    def lazy_variables(self, paths: Iterable[str]) -> list[xr.DataArray]:
        """The arrays at ``paths`` as :meth:`_variables` gives them, their values read only
        when asked for (xarray's engine, :mod:`layoutkit.xarray_engine`); their dimension
        scales, the coordinates, are read now (each once), as xarray reads index
        coordinates. A layout that cannot tell an array's dimensions without reading it
        reads it now."""
        return self._variables(paths)

    def has_shots(self) -> bool:
        """Whether the archive is a shot archive (its template's groups hold signals),
        asked without listing the shots where the layout can: the group before the
        template's shot component exists and is not empty."""
        prefix = self.template[: self.template.index("{shot}")].rstrip("/")
        if prefix and not self.exists(prefix):
            return False
        return next(self._expand({}), None) is not None

    def every_signal(self) -> Iterator[tuple[str, str, str]]:
        """``(shot, signal, path)`` for every signal of every shot, shot by shot in natural
        order: one walk of the archive."""
        return self._expand({})

    def signals_of(self, shot: str | int) -> list[tuple[str, str]]:
        """The signals of one shot, ``(signal, path)``, in natural order; [] when the shot
        has none. Costs what finding one shot's signals costs, not a listing of the shots."""
        return [(signal, path) for _, signal, path in self._expand({"shot": self.stored_name(str(shot))})]

    def fill_attribute(self, path: str) -> Any:
        """The ``_FillValue`` xarray's engine for this format would add to the array at
        ``path`` from its metadata (Zarr v2's ``fill_value``, which xarray reads as a mask),
        or None."""
        return None

    def stored_chunks(self, path: str) -> tuple[int, ...] | None:
        """The unit the layout stores the array at ``path`` in (a Zarr shard or chunk, an
        HDF5 chunk): what a reader should read at a time (xarray's ``preferred_chunks``).
        None: the array is read whole (contiguous, packed rows)."""
        return None

    def page_buffer_stats(self) -> dict[str, float] | None:
        """Hit rates of the HDF5 page buffer, when there is one."""
        return None

    def close(self) -> None:
        pass

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.layout} {self.path}>"

    # -- the shot archive view, built on the above ---------------------------------

    def _expand(self, fixed: dict[str, str]) -> Iterator[tuple[str, str, str]]:
        """Walk the template: yield (shot, signal, path) for every path that exists,
        listing groups only where a placeholder is not fixed."""

        def walk(i: int, prefix: str, bound: dict[str, str]) -> Iterator[tuple[str, str, str]]:
            if i == len(self._parts):
                yield bound["shot"], bound["signal"], prefix
                return
            part = self._parts[i]
            key = part[1:-1] if part in ("{shot}", "{signal}") else None
            if key is None or key in fixed:
                name = fixed[key] if key else part
                path = f"{prefix}/{name}"
                if i + 1 < len(self._parts) or self.exists(path):
                    yield from walk(i + 1, path, {**bound, key: name} if key else bound)
                return
            for name in sorted(self.children(prefix or "/"), key=natural_key):
                yield from walk(i + 1, f"{prefix}/{name}", {**bound, key: name})

        yield from walk(0, "", {})

    @property
    def shots(self) -> list[str]:
        """Every shot that has at least one signal, in natural order."""
        return sorted({shot for shot, _, _ in self._expand({})}, key=natural_key)

    @property
    def signals(self) -> list[str]:
        """Every signal name found in any shot, in natural order."""
        return sorted({sig for _, sig, _ in self._expand({})}, key=natural_key)

    def source_name(self, name: str) -> str:
        """A name or path as this archive stores it, as the source names it: in a Zarr
        store, a stored name with a backslash (``coil%5CB``, the type rules, "Names") as
        the source's (``coil\\B``); else as it is. What the archive lists (``shots``,
        ``signals``, ``arrays()``, ``children()``, a shot's tree, ...) is given so."""
        return name

    def _may_rename(self) -> bool:
        """Whether :meth:`source_name` may give another name than it is given: False where
        the archive knows no name of it was stored apart (what it lists is then given as
        it is, unchecked)."""
        return self.names_stored

    def stored_name(self, name: str) -> str:
        """A shot's or signal's name as this archive holds it: in a Zarr store, one with a
        backslash at its stored name (the type rules, "Names"); else as given."""
        return stored_path(name) if self.names_stored else name

    def path_of(self, shot: str, signal: str) -> str:
        return self.template.format(shot=shot, signal=signal)

    def shot_path(self, shot: str) -> str:
        """The group of one shot (the template up to its shot component)."""
        return self.template[: self.template.index("{shot}")] + shot

    def read(self, shot: str | int, signal: str) -> xr.DataArray:
        """One signal of one shot, with its dimension scales as coordinates.

        Raises
        ------
        KeyError
            When the shot has no such signal.
        """
        path = self.path_of(self.stored_name(str(shot)), self.stored_name(signal))
        if not self.exists(path):
            raise KeyError(f"shot {shot} has no signal {signal!r} ({path} is not in {self.path})")
        return self.variable(path).rename(signal)

    def shot(self, shot: str | int) -> xr.DataTree:
        """Every signal of one shot: a DataTree with one node per signal (signals keep
        their own time bases, so they are not forced onto shared dimensions) and the
        shot group's attributes.

        Raises
        ------
        KeyError
            When the archive has no such shot, naming the nearest it has."""
        shot = self.stored_name(str(shot))
        attrs = self.group_attrs(self.shot_path(shot))  # metadata, before the data is fetched
        found: list[tuple[str, str, str]] = []
        arrays = self._variables(_paths(self._expand({"shot": shot}), found))
        return shot_tree(shot, [(sig, a) for (_, sig, _), a in zip(found, arrays)], attrs)

    def signal(self, signal: str) -> dict[str, xr.DataArray]:
        """One signal for every shot that has it: shot -> DataArray.

        Raises
        ------
        KeyError
            When no shot has such a signal, naming the nearest signals there are."""
        found: list[tuple[str, str, str]] = []
        arrays = self._variables(_paths(self._expand({"signal": self.stored_name(signal)}), found))
        return {shot: a.rename(signal) for (shot, _, _), a in zip(found, arrays)}

    def signal_packed(self, signal: str) -> xr.Dataset:
        """One signal of every shot as one packed dataset, not one DataArray per shot: the
        shots' values end to end along ``sample`` (the variable named as the signal), the
        time base of each value along it too (named as the time base, or ``time`` when the
        shots use several, with ``time_base`` naming each shot's), and per shot (``shot``
        dimension) its name, ``start`` and ``length``. Shot ``k`` is
        ``ds[signal][start[k] : start[k] + length[k]]``. Attributes: the first shot's
        (per-shot attributes: :meth:`signal`). For all-shot reads of large archives: the
        signal-major layout gives it from its packed arrays without building an array per
        shot (:meth:`signal` builds 50,000 for 50,000 shots).

        Raises
        ------
        KeyError
            When no shot has such a signal, naming the nearest signals there are.
        """
        return pack_signal(signal, self.signal(signal))

    def _variables(self, paths: Iterable[str]) -> list[xr.DataArray]:
        """The variables at ``paths``, in order (as :meth:`_variable`; a reader may fetch
        their bytes together first). ``paths`` is taken one at a time as it is found, so
        that a reader can look at each dataset's metadata while the lookup that found it
        is fresh."""
        return [self.variable(path) for path in paths]

    def iter_shots(self, shots: Iterable[str | int]) -> Iterator[tuple[str, xr.DataTree]]:
        """Several shots, one after another: ``(shot, shot tree)`` as :meth:`shot` gives it.

        A layout that can fetches the next shot's objects while the caller works on the
        current one (shot-packed Zarr: one request's wait hidden per shot), holding at most
        one shot's stored bytes ahead."""
        for shot in shots:
            yield str(shot), self.shot(shot)


def native_compound(dtype: np.dtype) -> np.dtype:
    """A compound with members of the other byte order as the same compound in this
    machine's (same names and offsets): xarray's decoding makes such a compound raw bytes
    (``V12``) and then cannot cast its values to them. Any other type as it is (xarray
    turns plain numbers to native order itself)."""
    if not dtype.names:
        return dtype
    formats = [native_compound(dtype[n]) if dtype[n].names else dtype[n].newbyteorder("=") for n in dtype.names]
    spec: Any = {"names": list(dtype.names), "formats": formats, "itemsize": dtype.itemsize,
                 "offsets": [dtype.fields[n][1] for n in dtype.names]}  # type: ignore[index]
    return np.dtype(spec)


class ArchiveArray:
    """One array of an archive as xarray's lazy indexing wants it: a shape, a dtype, and
    basic indexing that reads only the selection (:meth:`Archive.get`)."""

    def __init__(self, archive: Archive, path: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.archive, self.path, self.shape, self.dtype = archive, path, shape, native_compound(np.dtype(dtype))

    def __getitem__(self, key: Any) -> np.ndarray:
        from xarray.core import indexing

        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._read)

    def _read(self, key: tuple[Any, ...]) -> np.ndarray:
        spans, picks, dropped, lengths = [], [], [], []
        for axis, (k, n) in enumerate(zip(key, self.shape)):
            if isinstance(k, slice):
                idx = range(*k.indices(n))
                lengths.append(len(idx))
                lo, hi = (min(idx), max(idx) + 1) if len(idx) else (0, 0)
                spans.append(slice(lo, hi))
                picks.append(None if len(idx) == hi - lo else np.asarray(idx) - lo)
            else:
                i = int(k) + (n if int(k) < 0 else 0)
                spans.append(slice(i, i + 1))
                picks.append(None)
                dropped.append(axis)
        if 0 in lengths:
            return np.empty(tuple(lengths), dtype=self.dtype)
        block = np.asarray(self.archive.get(self.path, tuple(spans)))
        if self.dtype.names and block.dtype != self.dtype:
            block = block.astype(self.dtype)
        for axis, pick in enumerate(picks):
            if pick is not None:
                block = np.take(block, pick, axis=axis)
        return block.squeeze(axis=tuple(dropped)) if dropped else block


class ArchiveBackendArray(ArchiveArray, BackendArray):
    """:class:`ArchiveArray` as an xarray ``BackendArray``: indexed through xarray's
    explicit indexing, so that a selection reads only the units it touches."""


def lazy_data(archive: Archive, path: str, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """:class:`ArchiveBackendArray` wrapped as xarray wraps a backend's arrays."""
    from xarray.core import indexing

    return indexing.LazilyIndexedArray(ArchiveBackendArray(archive, path, shape, dtype))


def pack_signal(signal: str, arrays: dict[str, xr.DataArray]) -> xr.Dataset:
    """:meth:`Archive.signal_packed` made from one DataArray per shot."""
    shots = list(arrays)
    values = [np.atleast_1d(a.values) for a in arrays.values()]
    times = [a.coords[a.dims[0]].values if a.ndim and a.dims[0] in a.coords else None for a in arrays.values()]
    bases = [str(a.dims[0]) if a.ndim and a.dims[0] in a.coords else "" for a in arrays.values()]
    first = next(iter(arrays.values()), None)
    return packed_dataset(signal, shots, values, times, bases, dict(first.attrs) if first is not None else {})


def packed_dataset(signal: str, shots: list[str], values: list[np.ndarray], times: list[Any], bases: list[str],
                   attrs: dict[str, Any]) -> xr.Dataset:
    """The packed dataset of :meth:`Archive.signal_packed`, from each shot's values and
    time base (None: none) in shot order."""
    lengths = np.fromiter((len(v) for v in values), dtype=np.int64, count=len(values))
    starts = np.zeros_like(lengths)
    np.cumsum(lengths[:-1], out=starts[1:])
    data = np.concatenate(values) if values else np.empty(0)
    rest = tuple(f"dim_{i}" for i in range(1, data.ndim))
    ds = xr.Dataset({signal: (("sample", *rest), data, attrs)},
                    coords={"shot": ("shot", np.asarray(shots, dtype=str)), "start": ("shot", starts),
                            "length": ("shot", lengths)})
    if values and all(t is not None for t in times):
        names = sorted(set(bases))
        name = names[0] if len(names) == 1 else "time"
        ds[name] = ("sample", np.concatenate(times))
        if len(names) > 1:
            ds.coords["time_base"] = ("shot", np.asarray(bases, dtype=str))
    return ds


AT_PATH = ("exists", "get", "read_block", "variable", "group_attrs", "stored_chunks", "fill_attribute",
           "dimension_only", "zarr_array", "node")
"""A Zarr store's archive methods that take a source's path first (:func:`_at_stored_path`)."""
AT_PATHS = ("_variables", "lazy_variables", "read_blocks")
"""... and those that take several (paths, or ``(path, selection)`` units)."""
_INSIDE = threading.local()  # per thread: the archives running one of their own public methods


def _by_source_names(method: Any, name: str) -> Any:
    """A public method of an archive whose store keeps names apart from the source's
    (``names_stored``): called from outside the archive, what it lists or names comes back
    by the source's names (:meth:`Archive.source_name`); called from the archive's own
    methods, as stored (they look nodes up by it)."""
    import functools

    @functools.wraps(method)
    def named(self: Archive, *args: Any, **kwargs: Any) -> Any:
        if not self._may_rename():  # (no name stored apart: nothing to give otherwise)
            return method(self, *args, **kwargs)
        inside = getattr(_INSIDE, "archives", None)
        if inside is None:
            inside = _INSIDE.archives = set()
        if id(self) in inside:
            return method(self, *args, **kwargs)
        inside.add(id(self))
        try:
            out = method(self, *args, **kwargs)
        finally:
            inside.discard(id(self))
        return _source_named(self, name, out)

    return named


def _source_named(archive: Archive, method: str, out: Any) -> Any:
    """What an archive's public method gave, by the source's names (only where a name was
    stored apart: its stored form holds ``%5C``)."""
    name = archive.source_name
    if method in ("children", "shots", "signals"):
        return [name(n) for n in out] if any("%5C" in n for n in out) else out
    if method == "arrays":
        return {name(p): v for p, v in out.items()} if any("%5C" in p for p in out) else out
    if method == "blocks":
        return [(name(p), s) for p, s in out] if any("%5C" in p for p, _ in out) else out
    if method == "signals_of":
        return [(name(s), name(p)) for s, p in out]
    if method in ("variable", "read"):
        return _renamed_array(archive, out)
    if method == "lazy_variables":
        return [_renamed_array(archive, a) for a in out]
    if method == "signal":
        return {name(k): _renamed_array(archive, a) for k, a in out.items()}
    if method == "shot" and isinstance(out, xr.DataTree):
        return _renamed_tree(archive, out)
    if method == "signal_packed" and isinstance(out, xr.Dataset):
        names = {str(k): name(str(k)) for k in (*out.variables, *out.dims) if "%5C" in str(k)}
        out = out.rename({k: v for k, v in names.items() if k != v}) if names else out
        shots = [str(s) for s in out["shot"].values]
        return out.assign_coords(shot=("shot", np.asarray([name(s) for s in shots], dtype=str))) \
            if any("%5C" in s for s in shots) else out
    return out


def _renamed_array(archive: Archive, a: Any) -> Any:
    """A DataArray with its dimensions and coordinates by the source's names."""
    if not isinstance(a, xr.DataArray):
        return a
    names = {str(k): archive.source_name(str(k)) for k in (*a.dims, *a.coords) if "%5C" in str(k)}
    out = a.rename({k: v for k, v in names.items() if k != v}) if names else a
    return out.rename(archive.source_name(str(a.name))) if a.name is not None and "%5C" in str(a.name) else out


def _renamed_tree(archive: Archive, tree: xr.DataTree) -> xr.DataTree:
    """A shot's tree (one node per signal) by the source's names."""
    if "%5C" not in str(tree.name) and not any("%5C" in str(k) for sig, node in tree.children.items()
                                               for k in (sig, *node.dims)):  # (0.2 ms for 70 signals)
        return tree
    signals = []
    for sig, node in tree.children.items():
        ds = node.to_dataset()
        names = {str(k): archive.source_name(str(k)) for k in (*ds.variables, *ds.dims) if "%5C" in str(k)}
        var = ds.rename({k: v for k, v in names.items() if k != v})[archive.source_name(str(sig))]
        signals.append((archive.source_name(str(sig)), var))
    return shot_tree(archive.source_name(str(tree.name)), signals, {str(k): v for k, v in tree.attrs.items()})


def _at_stored_paths(read: Any) -> Any:
    """``read`` (an archive's method taking paths, or ``(path, selection)`` units, first)
    given the paths a Zarr store names a source's paths by."""
    import functools

    def stored(item: Any) -> Any:
        if isinstance(item, tuple):
            return (stored_path(item[0]), *item[1:]) if "\\" in item[0] else item
        return stored_path(item) if "\\" in item else item

    @functools.wraps(read)
    def at(self: Archive, items: Iterable[Any], *args: Any, **kwargs: Any) -> Any:
        return read(self, map(stored, items), *args, **kwargs)

    return at


def _at_stored_path(read: Any) -> Any:
    """``read`` (an archive's method taking a path first) given the path a Zarr store
    names a source's path by (:func:`~layoutkit.formats.stored_path`)."""
    import functools

    @functools.wraps(read)
    def at(self: Archive, path: str, *args: Any, **kwargs: Any) -> Any:
        return read(self, stored_path(path) if "\\" in path else path, *args, **kwargs)

    return at


def _refusing_unknown(read: Any, kind: str) -> Any:
    """``read`` (an archive's ``shot`` or ``signal``), raising KeyError, with the nearest
    names it has, when it finds nothing and the archive has no such shot or signal."""
    import functools

    @functools.wraps(read)
    def checked(self: Archive, name: Any) -> Any:
        found = read(self, self.stored_name(name) if isinstance(name, str) else name)
        empty = (not found.children if isinstance(found, xr.DataTree)
                 else found.sizes.get("shot", 0) == 0 if isinstance(found, xr.Dataset) else not found)
        if empty:
            known = self.shots if kind == "shot" else self.signals
            if str(name) not in known:
                raise KeyError(unknown_name(kind, str(name), known, self.path))
        return found

    return checked


def unknown_name(kind: str, name: str, known: list[str], where: Any) -> str:
    """``no shot '999' in shots.h5; the nearest: '99', '989'`` (or the first few names)."""
    import difflib

    near = difflib.get_close_matches(name, known, n=3, cutoff=0.5) or known[:3]
    listed = ", ".join(repr(n) for n in near)
    hint = f"; the nearest: {listed}" if near else f"; it has no {kind}s"
    return f"no {kind} {name!r} in {where} ({len(known)} {kind}s){hint}"


def _paths(expanded: Iterable[tuple[str, str, str]], found: list[tuple[str, str, str]]) -> Iterator[str]:
    """The paths of ``(shot, signal, path)`` triples, each triple kept in ``found`` as it passes."""
    for triple in expanded:
        found.append(triple)
        yield triple[2]


def shot_tree(shot: str, signals: list[tuple[str, xr.DataArray]], attrs: dict[str, Any]) -> xr.DataTree:
    """A shot's DataTree: one child node per signal, holding it as a one-variable dataset.

    ``DataTree.from_dict`` and ``DataTree(children=...)`` copy every node first (attributes
    deep-copied); the ``children`` setter takes the nodes as they are, 3x faster for a shot
    of 70 signals, but still aligns each child with its parent, which was most of a shot
    read's time outside decoding (7-13 ms a shot). The parent here is a new node with no
    variables, coordinates or indexes, so that check has nothing to compare and nothing to
    deduplicate: :func:`_adopt` links the nodes as the setter would, 4x faster again, and
    falls back to the setter on an xarray whose nodes are built otherwise.
    """
    tree = xr.DataTree(name=shot)
    nodes = {sig: _node(a.to_dataset(name=sig)) for sig, a in signals}
    if not _adopt(tree, nodes):
        tree.children = nodes
    tree.attrs = attrs
    return tree


def tree_of(groups: dict[str, xr.Dataset]) -> xr.DataTree:
    """``xr.DataTree.from_dict(groups)`` (paths ``"/"``, ``"/a"``, ``"/a/b"``) without
    copying every node, where every node that has children holds no variables (a shot
    archive's root and shots): the nodes are linked as :func:`shot_tree` links a shot's
    signals. Any other tree, or an xarray whose nodes are built otherwise, goes through
    ``from_dict``."""
    paths = sorted(groups, key=lambda p: (p.count("/") if p != "/" else 0, p))
    kids: dict[str, dict[str, str]] = {}
    for path in paths:
        if path != "/":
            parent, _, name = path.rstrip("/").rpartition("/")
            kids.setdefault(parent or "/", {})[name] = path
    if (not _nodes_settable() or "/" not in groups or any(p not in groups for p in kids)
            or any(groups[p].variables for p in kids)):
        return xr.DataTree.from_dict(groups)
    nodes = {path: _node(groups[path]) for path in paths}
    for parent in sorted(kids, key=lambda p: p.count("/") if p != "/" else 0):
        if not _adopt(nodes[parent], {name: nodes[path] for name, path in kids[parent].items()}):
            return xr.DataTree.from_dict(groups)
    return nodes["/"]


@cache
def _tree_slots(cls: type) -> frozenset[str]:
    """The slots of a DataTree class, which :func:`_node` and :func:`_adopt` set."""
    return frozenset(name for c in cls.__mro__ for name in getattr(c, "__slots__", ()))


@cache
def _nodes_settable() -> bool:
    """Whether this xarray's DataTree nodes have what :func:`_node` sets (asked once, not per node)."""
    return {"_children", "_parent", "_name", "_data_variables"} <= _tree_slots(xr.DataTree) and hasattr(
        xr.DataTree, "_set_node_data"
    )


def _node(dataset: xr.Dataset) -> xr.DataTree:
    """``xr.DataTree(dataset)`` for a new dataset that nothing else holds. The constructor
    first copies the dataset (its variables and indexes: 20-25 ms of a read of 8 shots of
    70 signals, 8% of it), then sets the node's data from the copy and makes it a
    parentless node; this does the last two on the dataset itself, on an xarray whose
    nodes have the slots it sets (else the constructor; tests/test_archive.py compares
    the two)."""
    if not _nodes_settable():
        return xr.DataTree(dataset)
    node = xr.DataTree.__new__(xr.DataTree)
    node._parent, node._children, node._name = None, {}, None
    node._set_node_data(dataset)
    return node


def _adopt(parent: xr.DataTree, children: dict[str, xr.DataTree]) -> bool:
    """Attach new, parentless ``children`` to an empty, childless ``parent``: the links
    the ``children`` setter makes, without its alignment check (vacuous against a parent
    that holds nothing). False, with nothing changed, when this xarray's nodes do not have
    the slots it sets (tests/test_archive.py compares the result with the setter's)."""
    if not {"_children", "_parent", "_name"} <= _tree_slots(type(parent)) or parent.children or parent.dataset.variables:
        return False
    if any(node.parent is not None or node.children for node in children.values()):
        return False
    for name, node in children.items():
        node._name, node._parent = name, parent
    parent._children = dict(children)
    return True


def plain_attrs(attrs: dict[str, Any], hidden: frozenset[str]) -> dict[str, Any]:
    """A store's attributes without those that carry structure (``hidden``), its long
    doubles' text back as long doubles (:data:`~layoutkit.formats.LONG_DOUBLE_ATTRS_ATTR`)."""
    out = {k: v for k, v in attrs.items() if k not in hidden}
    for name, kind in (attrs.get(LONG_DOUBLE_ATTRS_ATTR) or {}).items():
        if isinstance(out.get(name), (str, list)):  # (not yet read back)
            out[name] = long_doubles(out[name], kind)[()]
    return out


def bytes_back(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes as a reader gets them: the bytes that were not UTF-8 (stored as text
    ``base64:...``, the type rules, "Attributes") back as bytes, e.g. Latin-1 units ``b"\\xb5m"``."""

    def back(v: Any) -> Any:
        if isinstance(v, str) and v.startswith("base64:"):
            try:
                return base64.b64decode(v[len("base64:"):], validate=True)
            except ValueError:
                return v
        if isinstance(v, list):
            return [back(x) for x in v]
        return v

    return {k: back(v) for k, v in attrs.items()}


class ScaleCoordinate(NamedTuple):
    """A dimension scale as a coordinate: its index variable and xarray index, built once
    per read and shared by every array of that read that uses the scale."""

    variable: xr.IndexVariable
    index: Any  # xarray's Index (a PandasIndex)


def scale_coordinate(name: str, values: np.ndarray, attrs: dict[str, Any]) -> ScaleCoordinate:
    """A scale's coordinate. Numbers (the usual time base) get their pandas index over the
    values as read, not a copy of them: 3x faster than through ``xr.Coordinates``, which
    matters when a signal of 100 shots brings 100 time bases. Anything else (float16,
    text) goes through xarray's own casting."""
    values = np.asarray(values)
    if values.ndim == 1 and values.dtype.kind in "iuf" and values.dtype != np.float16:
        from xarray.indexes import PandasIndex

        index = PandasIndex(pd.Index(values, copy=False), name, coord_dtype=values.dtype)
        variable = index.create_variables({name: xr.Variable((name,), values, attrs)})[name]
        return ScaleCoordinate(variable, index)  # type: ignore[arg-type]
    built = xr.Coordinates({name: xr.IndexVariable((name,), values, attrs)})
    return ScaleCoordinate(built.variables[name], built.xindexes[name])  # type: ignore[arg-type]


def with_coords(data: Any, dims: list[str], coords: dict[str, ScaleCoordinate], attrs: dict[str, Any]) -> xr.DataArray:
    """A DataArray whose coordinates are prebuilt, shared by the arrays of one read.

    ``DataArray(data, dims, coords, attrs)`` validates, builds a pandas index and deep-copies
    the coordinate's values for every array: 20x slower than this for a shot of 70
    signals. Here each array gets its own shallow copy of the coordinate variable (its own
    attributes; the values are an index, read-only, and shared) and the index built once,
    through the DataArray constructor's ``fastpath`` (xarray's own ``_replace`` does the
    same). A scale whose length is not its axis' goes the long way, so xarray refuses it
    as before.
    """
    shape = np.shape(data)
    if len(dims) != len(shape) or any(
        c.variable.shape[0] != shape[dims.index(name)] for name, c in coords.items()
    ):
        return xr.DataArray(data, dims=dims, coords={n: c.variable for n, c in coords.items()}, attrs=attrs)
    variable = xr.Variable(dims, data, attrs)
    return xr.DataArray(
        variable,
        coords={name: c.variable.copy(deep=False) for name, c in coords.items()},
        indexes={name: c.index for name, c in coords.items()},
        fastpath=True,
    )


def scan_grid(shape: tuple[int, ...], itemsize: int, chunks: tuple[int, ...] | None) -> tuple[int, ...]:
    """The blocks a scan reads: whole chunks, as many together as make up to about
    :data:`SCAN_BLOCK_BYTES` (the last axis grown first, then the one before...), or
    blocks of whole rows of about that size. One read per chunk cost a file of
    10,000-chunk datasets of one element each 11 s a scan through h5py, nearly all
    of it Python's per-read overhead; a chunk larger than the size is read alone."""
    if chunks:
        block = list(chunks)
        for axis in reversed(range(len(block))):
            others = math.prod(block[:axis] + block[axis + 1:]) * itemsize
            fits = max(1, SCAN_BLOCK_BYTES // max(1, others * block[axis]))  # chunks along this axis
            whole = -(-shape[axis] // block[axis])
            block[axis] *= min(fits, whole)
            if min(fits, whole) < whole:  # this axis is not whole: the axes before it stay one chunk
                break
        return tuple(block)
    if not shape:
        return ()
    row = max(1, math.prod(shape[1:]) * itemsize)
    return (max(1, min(shape[0], SCAN_BLOCK_BYTES // row)),) + tuple(shape[1:])


SPARSE_SCAN_BLOCKS = 4096
"""Above this many blocks in an array's scan, only the blocks holding a stored chunk are
read (:func:`scan_selections`)."""


def scan_selections(shape: tuple[int, ...], grid: tuple[int, ...],
                    stored: Callable[[], Iterable[tuple[int, ...]]]) -> Iterator[Selection]:
    """A scan's units of one array: every block of ``grid``, or, when there are more than
    :data:`SPARSE_SCAN_BLOCKS` of them, the blocks that hold a stored chunk (``stored()``:
    the origins of the chunks or objects stored, in elements), in order. The rest is the
    fill value a reader makes up, not data it reads: an array declared with 2**40
    elements and one chunk written was 500,000 blocks of fill and a minute a scan."""
    if not shape or 0 in shape or math.prod(-(-n // g) for n, g in zip(shape, grid)) <= SPARSE_SCAN_BLOCKS:
        yield from selections(shape, grid)
        return
    for block in sorted({tuple(o // g for o, g in zip(origin, grid)) for origin in stored()}):
        yield tuple(slice(b * g, min(n, (b + 1) * g)) for b, g, n in zip(block, grid, shape))


def selections(shape: tuple[int, ...], grid: tuple[int, ...]) -> Iterator[Selection]:
    if not shape:
        yield ()
        return
    if 0 in shape:
        return
    for region in iter_blocks(shape, grid):
        yield tuple(slice(a, b) for a, b in region)


Archive.shot = _refusing_unknown(Archive.shot, "shot")  # type: ignore[method-assign]
Archive.signal = _refusing_unknown(Archive.signal, "signal")  # type: ignore[method-assign]
Archive.signal_packed = _refusing_unknown(Archive.signal_packed, "signal")  # type: ignore[method-assign]

__all__ = ["Archive", "ArchiveArray", "ArchiveBackendArray", "NotAnArchiveError", "SCAN_BLOCK_BYTES", "ScaleCoordinate", "Selection", "bytes_back", "lazy_data", "pack_signal", "packed_dataset", "plain_attrs", "scale_coordinate", "scan_grid", "scan_selections", "selections", "shot_tree", "tree_of", "unknown_name", "with_coords"]
