"""One reader for every layout layoutkit reads or writes.

``layoutkit.open(path)`` returns an :class:`Archive` over an HDF5 source, a ``reorder``
output (paged HDF5 in any order) or a Zarr store from ``convert``. Whatever the layout,
it offers the same view of a shot archive (``shots``, ``signals``, ``read``, ``shot``,
``signal``) and of arrays in general (``arrays``, ``get``, ``blocks``), so that the
read patterns of ``layoutkit verify`` run the same code on every variant.

Every read goes through :mod:`layoutkit.verify.storage`: a :class:`CountingFile` under
h5py, a :class:`CountingStore` under zarr. Requests and bytes are always counted;
latency and bandwidth are simulated when a :class:`LatencyModel` is given.

Layouts are a registry: a Zarr store says which layout it holds in its root attribute
``layoutkit_layout`` (``{"name": ..., "version": ...}``); a store without it is the
mirror of the HDF5 hierarchy that ``convert`` writes (``shot-major``).
"""

from __future__ import annotations

import base64
import json
import math
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar, NamedTuple

import h5py
import numpy as np
import pandas as pd
import xarray as xr
import zarr

from layoutkit.errors import InvalidOptionError, LayoutkitError, SourceNotFoundError
from layoutkit.inventory import NETCDF_DIM_ONLY_PREFIX, attr_to_json
from layoutkit.plan import DEFAULT_TEMPLATE, compile_template, iter_blocks, match_template, natural_key
from layoutkit.storage import ObjectSource, is_url, store_at
from layoutkit.verify.storage import Counter, CountingFile, CountingStore, LatencyModel
from layoutkit.writers.zarr_shot_packed import INDEX_ATTR as SHOT_INDEX_ATTR
from layoutkit.writers.zarr_shot_packed import LAYOUT_VERSION as SHOT_PACKED_VERSION
from layoutkit.writers.zarr_shot_packed import PACKED_ARRAY, index_names, index_rows
from layoutkit.writers.zarr_signal import DATA, LAYOUT_VERSION, SERIES_ATTR, SIGNALS_GROUP
from layoutkit.zarr_direct import DirectRead, plan_direct_read

Selection = tuple[slice | int, ...]
SCAN_BLOCK_BYTES = 16 * 1024**2  # contiguous datasets are scanned in blocks of this size
# partial reads zarr makes at once, by the chunks they touch (fetched and decoded): a
# signal of 100 shots from shot-packed Zarr is 200 such reads, 0.6 MiB each, and 8 threads
# doing that at once held 0.8 GB
ZARR_BATCH_BYTES = 32 * 1024**2
AHEAD_DECODED_BYTES = 64 * 1024**2
"""``iter_shots`` decodes a shot ahead (while the caller builds the current one) when its
arrays hold at most this; a larger shot is only fetched ahead. Beyond the next shot, a
further one is started only while the shots on their way hold less than this."""
AHEAD_SHOTS = 3
"""How many shots ``iter_shots`` keeps on their way. One shot's GET waits for the latency
and the transfer (18 ms for 4 MB at 10 ms), longer than building a shot of 70 signals
(12 ms): with one ahead, reading 8 shots from a bucket waited on the requests in turn
(0.22-0.24 s); with three, 0.19 s (two: 0.21 s; four: 0.20 s)."""
LAYOUT_ATTR = "layoutkit_layout"
SIDECAR = "layoutkit.json"
# HDF5 bookkeeping attributes a reader does not show as data attributes
_HIDDEN_ATTRS = frozenset({"DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid", "_Netcdf4Coordinates", "_nc3_strict"})
_HIDDEN_SCALE_ATTRS = frozenset({"CLASS", "NAME"})
_HIDDEN_ZARR_ATTRS = frozenset({"_ARRAY_DIMENSIONS", "hdf5_enum", "hdf5_reference", "hdf5_null_dataspace",
                                "layoutkit_shot_packed"})


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

    # -- what a layout implements --------------------------------------------------

    def _children(self, group: str) -> list[str]:
        """Names of the members of a group ([] when it does not exist)."""
        raise NotImplementedError

    def _exists(self, path: str) -> bool:
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

    def _variable(self, path: str) -> xr.DataArray:
        """The array at ``path`` with its dimension scales as coordinates."""
        raise NotImplementedError

    def _group_attrs(self, path: str) -> dict[str, Any]:
        """The attributes of the group at ``path`` ({} when there is none)."""
        return {}

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
                if i + 1 < len(self._parts) or self._exists(path):
                    yield from walk(i + 1, path, {**bound, key: name} if key else bound)
                return
            for name in sorted(self._children(prefix or "/"), key=natural_key):
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
        path = self.path_of(str(shot), signal)
        if not self._exists(path):
            raise KeyError(f"shot {shot} has no signal {signal!r} ({path} is not in {self.path})")
        return self._variable(path).rename(signal)

    def shot(self, shot: str | int) -> xr.DataTree:
        """Every signal of one shot: a DataTree with one node per signal (signals keep
        their own time bases, so they are not forced onto shared dimensions) and the
        shot group's attributes."""
        shot = str(shot)
        found = [(sig, self._variable(path)) for _, sig, path in self._expand({"shot": shot})]
        return _shot_tree(shot, found, self._group_attrs(self.shot_path(shot)))

    def signal(self, signal: str) -> dict[str, xr.DataArray]:
        """One signal for every shot that has it: shot -> DataArray."""
        return {shot: self._variable(path).rename(signal) for shot, _, path in self._expand({"signal": signal})}

    def iter_shots(self, shots: Iterable[str | int]) -> Iterator[tuple[str, xr.DataTree]]:
        """Several shots, one after another: ``(shot, shot tree)`` as :meth:`shot` gives it.

        A layout that can fetches the next shot's objects while the caller works on the
        current one (shot-packed Zarr: one request's wait hidden per shot), holding at most
        one shot's stored bytes ahead."""
        for shot in shots:
            yield str(shot), self.shot(shot)


def _shot_tree(shot: str, signals: list[tuple[str, xr.DataArray]], attrs: dict[str, Any]) -> xr.DataTree:
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


def _plain_attrs(attrs: dict[str, Any], hidden: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k not in hidden}


def _bytes_back(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes as a reader gets them: the bytes that were not UTF-8 (stored as text
    ``base64:...``, README "Attributes") back as bytes, e.g. Latin-1 units ``b"\\xb5m"``."""

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


class _Coordinate(NamedTuple):
    """A dimension scale as a coordinate: its index variable and xarray index, built once
    per read and shared by every array of that read that uses the scale."""

    variable: xr.IndexVariable
    index: Any  # xarray's Index (a PandasIndex)


def _coordinate(name: str, values: np.ndarray, attrs: dict[str, Any]) -> _Coordinate:
    """A scale's coordinate. Numbers (the usual time base) get their pandas index over the
    values as read, not a copy of them: 3x faster than through ``xr.Coordinates``, which
    matters when a signal of 100 shots brings 100 time bases. Anything else (float16,
    text) goes through xarray's own casting."""
    values = np.asarray(values)
    if values.ndim == 1 and values.dtype.kind in "iuf" and values.dtype != np.float16:
        from xarray.indexes import PandasIndex

        index = PandasIndex(pd.Index(values, copy=False), name, coord_dtype=values.dtype)
        variable = index.create_variables({name: xr.Variable((name,), values, attrs)})[name]
        return _Coordinate(variable, index)  # type: ignore[arg-type]
    built = xr.Coordinates({name: xr.IndexVariable((name,), values, attrs)})
    return _Coordinate(built.variables[name], built.xindexes[name])  # type: ignore[arg-type]


def _with_coords(data: Any, dims: list[str], coords: dict[str, _Coordinate], attrs: dict[str, Any]) -> xr.DataArray:
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
    """The blocks a scan reads: the chunks, or blocks of whole rows of about 16 MiB."""
    if chunks:
        return chunks
    if not shape:
        return ()
    row = max(1, math.prod(shape[1:]) * itemsize)
    return (max(1, min(shape[0], SCAN_BLOCK_BYTES // row)),) + tuple(shape[1:])


def _selections(shape: tuple[int, ...], grid: tuple[int, ...]) -> Iterator[Selection]:
    if not shape:
        yield ()
        return
    if 0 in shape:
        return
    for region in iter_blocks(shape, grid):
        yield tuple(slice(a, b) for a, b in region)


# -- HDF5 -----------------------------------------------------------------------------


class HDF5Archive(Archive):
    """An HDF5 file (a source or a ``reorder`` output) read through h5py.

    Parameters
    ----------
    page_buffer
        Bytes of HDF5 page buffer (``page_buf_size``); only for files written with
        paged aggregation (HDF5 refuses it for others).
    """

    format = "hdf5"

    def __init__(
        self,
        path: Path,
        template: str = DEFAULT_TEMPLATE,
        model: LatencyModel | None = None,
        page_buffer: int = 0,
        sleep: Any = None,
    ) -> None:
        super().__init__(path, template)
        if isinstance(path, ObjectSource):  # every GET is a request (h5py's reads come from its blocks)
            self._file = path.open_file(on_get=self._charge)
            self._model, self._sleep = model, sleep or time.sleep
        else:
            self._file = CountingFile(path, model, **({"sleep": sleep} if sleep else {}))
            self._file.counter = self.counter
        self.page_buffer = page_buffer
        self._scale_paths: dict[int, str] = {}
        try:
            self.f = h5py.File(self._file, "r", **({"page_buf_size": page_buffer} if page_buffer else {}))
        except OSError as exc:
            self._file.close()
            if page_buffer and not isinstance(path, ObjectSource) and not is_paged(path):
                raise InvalidOptionError(
                    f"{path} was not written with paged aggregation, so it cannot have a page buffer."
                ) from None
            raise NotAnArchiveError(f"{path} cannot be opened as HDF5: {exc}.") from None
        strategy = self.f.id.get_create_plist().get_file_space_strategy()[0]
        self.layout = "hdf5-paged" if strategy == h5py.h5f.FSPACE_STRATEGY_PAGE else "hdf5"
        recorded = _recorded_layout(self.f.attrs.get("layoutkit"))
        if recorded:
            self.layout = recorded

    def _charge(self, nbytes: int) -> None:
        delay = self._model.cost(nbytes) if self._model else 0.0
        self.counter.add(nbytes, delay)
        if delay:
            self._sleep(delay)

    def close(self) -> None:
        try:
            self.f.close()
        finally:
            self._file.close()

    def _children(self, group: str) -> list[str]:
        g = self.f.get(group)
        return list(g.keys()) if isinstance(g, h5py.Group) else []

    def _exists(self, path: str) -> bool:
        return path in self.f

    def arrays(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        out: dict[str, tuple[tuple[int, ...], np.dtype]] = {}

        def visit(name: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset):
                out["/" + name] = (tuple(obj.shape or ()), obj.dtype)

        self.f.visititems(visit)
        return out

    def dimension_only(self, path: str) -> bool:
        name = self.f[path].attrs.get("NAME")
        return isinstance(name, bytes) and name.startswith(NETCDF_DIM_ONLY_PREFIX.encode())

    def get(self, path: str, selection: Selection = ()) -> np.ndarray:
        ds = self.f[path]
        if ds.shape is None:
            return np.empty(0, ds.dtype)
        ds = _text(ds)
        return np.asarray(ds[selection] if selection else ds[()])

    def blocks(self) -> list[tuple[str, Selection]]:
        out: list[tuple[str, Selection]] = []

        def visit(name: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset) and obj.shape is not None:
                grid = scan_grid(tuple(obj.shape), obj.dtype.itemsize, obj.chunks)
                out.extend(("/" + name, sel) for sel in _selections(tuple(obj.shape), grid))

        self.f.visititems(visit)
        return out

    def _variable(self, path: str) -> xr.DataArray:
        ds = self.f[path]
        data = np.asarray(_text(ds)[()])
        dims, coords = [], {}
        for axis, dim in enumerate(ds.dims):
            scales = dim.values()
            if scales:
                scale = scales[0]
                name = self._scale_path(path, scale).rsplit("/", 1)[-1]
                coords[name] = _coordinate(name, np.asarray(scale[()]), self._attrs(scale, True))
                dims.append(name)
            else:
                dims.append(f"dim_{axis}")
        return _with_coords(data, dims, coords, self._attrs(ds, h5py.h5ds.is_scale(ds.id)))

    def _scale_path(self, path: str, scale: h5py.Dataset) -> str:
        """Where a dimension scale of the dataset at ``path`` lives.

        h5py's ``scale.name`` (H5Iget_name) searches the whole file for an object reached
        through a reference: thousands of metadata reads on a shot archive. The scale's
        NAME attribute is its name as h5py and netCDF-4 write it; it is looked up in the
        dataset's group, its ancestors and their subgroups, nearest first, and accepted
        only where the object found is the scale itself.
        """
        addr = h5py.h5o.get_info(scale.id).addr
        if addr in self._scale_paths:
            return self._scale_paths[addr]
        raw = scale.attrs.get("NAME")
        name = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "")
        found = None
        if name and "/" not in name and not name.startswith("This is a netCDF dimension"):
            own = group = path.rsplit("/", 1)[0]
            while found is None:
                # the dataset's own group, then each ancestor and its other subgroups
                # (link lookups by name; objects are opened only on a name match)
                below = [] if group == own else [k for k in self.f[group or "/"] if f"{group}/{k}" != own]
                for candidate in [f"{group}/{name}"] + [f"{group}/{k}/{name}" for k in below]:
                    try:
                        obj = self.f.get(candidate)
                    except (KeyError, TypeError, ValueError):  # a path through a dataset
                        continue
                    if isinstance(obj, h5py.Dataset) and h5py.h5o.get_info(obj.id).addr == addr:
                        found = candidate
                        break
                if not group:
                    break
                group = group.rsplit("/", 1)[0]
        self._scale_paths[addr] = found or scale.name  # the search of last resort
        return self._scale_paths[addr]

    def _group_attrs(self, path: str) -> dict[str, Any]:
        g = self.f.get(path)
        return self._attrs(g, False) if isinstance(g, h5py.Group) else {}

    def _attrs(self, obj: Any, is_scale: bool) -> dict[str, Any]:
        hidden = _HIDDEN_ATTRS | (_HIDDEN_SCALE_ATTRS if is_scale else frozenset())
        return _bytes_back({k: attr_to_json(obj.attrs[k], self.f) for k in obj.attrs if k not in hidden})

    def page_buffer_stats(self) -> dict[str, float] | None:
        if not self.page_buffer:
            return None
        stats = self.f.id.get_page_buffering_stats()
        meta, raw = stats.meta, stats.raw
        return {
            "meta_hit_rate": meta.hits / meta.accesses if meta.accesses else 0.0,
            "raw_hit_rate": raw.hits / raw.accesses if raw.accesses else 0.0,
            "meta_accesses": meta.accesses,
            "meta_hits": meta.hits,
            "raw_accesses": raw.accesses,
            "raw_hits": raw.hits,
            "evictions": meta.evictions + raw.evictions,
            "bypasses": meta.bypasses + raw.bypasses,
        }


def _text(ds: h5py.Dataset) -> Any:
    # variable-length strings as text, as Zarr stores give them (h5py gives bytes)
    info = h5py.check_string_dtype(ds.dtype)
    return ds.asstr() if info is not None and ds.dtype.kind == "O" else ds


def is_paged(path: str | os.PathLike) -> bool:
    """True when an HDF5 file was written with the PAGE file space strategy."""
    with h5py.File(path, "r") as f:
        return f.id.get_create_plist().get_file_space_strategy()[0] == h5py.h5f.FSPACE_STRATEGY_PAGE


def _recorded_layout(raw: Any) -> str | None:
    """``hdf5-paged-shot`` etc. from the provenance attribute ``layoutkit``, if any."""
    if raw is None:
        return None
    try:
        doc = json.loads(raw.decode() if isinstance(raw, bytes) else str(raw))
        recipe = doc.get("recipe", doc)
        by = recipe.get("by") or recipe.get("order")
    except (ValueError, AttributeError):
        return None
    if doc.get("command") == "reorder" and by:
        return f"hdf5-paged-{by}"
    return None


# -- Zarr -----------------------------------------------------------------------------


class ZarrArchive(Archive):
    """A Zarr store from ``convert`` (the mirror of the HDF5 hierarchy: shot-major).

    Metadata comes from the consolidated copy when there is one, so listing and opening
    arrays cost no requests beyond the root document.
    """

    format = "zarr"
    layout = "shot-major"

    def __init__(
        self,
        path: Path,
        template: str = DEFAULT_TEMPLATE,
        model: LatencyModel | None = None,
        sleep: Any = None,
        root: zarr.Group | None = None,
    ) -> None:
        super().__init__(path, template)
        if root is None:
            self.store, self.root = _open_counted(path, model, self.counter, sleep)
        elif isinstance(root.store, CountingStore):
            # opened by open_archive to read the layout: parsing consolidated metadata
            # costs seconds for ten thousand arrays, so it is not done twice
            self.store, self.root = root.store, root
            self.counter = self.store.counter
        else:  # a root the caller opened its own way (e.g. without consolidated metadata)
            self.store, self.root = _counting_store(path, model, self.counter, sleep, base=root.store), root
        self._nodes = self._list_nodes()
        self._scales: dict[str, list[list[str]]] | None = None
        self._chunk_plans: dict[str, DirectRead | None] = {}
        self._local = threading.local()  # per thread: the objects fetched ahead for its next read

    def _list_nodes(self) -> dict[str, Any]:
        """Every node below the root: path -> metadata."""
        if isinstance(self.root, _LazyRoot):
            return {"/" + k: v for k, v in self.root.nodes.items()}
        meta = self.root.metadata.consolidated_metadata
        if meta is not None:
            flat = meta.flattened_metadata
        else:
            flat = {name: node.metadata for name, node in self.root.members(max_depth=None)}
        return {"/" + k.strip("/"): v for k, v in flat.items()}

    def _children(self, group: str) -> list[str]:
        prefix = "/" if group in ("", "/") else group.rstrip("/") + "/"
        return [p[len(prefix) :] for p in self._nodes if p.startswith(prefix) and "/" not in p[len(prefix) :]]

    def _exists(self, path: str) -> bool:
        return path in self._nodes

    def _group_attrs(self, path: str) -> dict[str, Any]:
        meta = self._nodes.get(path)
        if meta is None or hasattr(meta, "shape"):
            return {}
        return _bytes_back(_plain_attrs(dict(meta.attributes), _HIDDEN_ZARR_ATTRS))

    def _array(self, path: str) -> zarr.Array:
        node = self.root[path.strip("/")]
        if not isinstance(node, zarr.Array):
            raise KeyError(f"{path} is a group in {self.path}, not an array")
        return node

    def arrays(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        out = {}
        for p, m in self._nodes.items():
            if getattr(m, "node_type", None) == "array" or hasattr(m, "shape"):
                out[p] = (tuple(m.shape), _zarr_dtype(m))
        return out

    def get(self, path: str, selection: Selection = ()) -> np.ndarray:
        a = self._array(path)
        return np.asarray(a[selection] if selection else a[...])

    def blocks(self) -> list[tuple[str, Selection]]:
        out: list[tuple[str, Selection]] = []
        for p in sorted(self.arrays()):
            a = self._array(p)
            grid = a.shards or a.chunks
            out.extend((p, sel) for sel in _selections(tuple(a.shape), tuple(grid)))
        return out

    def _scale_paths(self, path: str) -> list[list[str]]:
        """The dimension scales of each axis, as ``convert`` recorded them in its sidecar;
        else found by dimension name in the array's group or an ancestor's subgroups."""
        if self._scales is None:
            try:
                self._scales = json.loads(_store_text(self.store, SIDECAR)).get("dimension_scales", {})
            except (OSError, ValueError, TypeError):  # in Icechunk, the sidecar rides in the provenance
                from layoutkit.storage.icechunk_repo import sidecar_in

                self._scales = sidecar_in(self.root.attrs.get("layoutkit")).get("dimension_scales", {})
        if path in self._scales:
            return self._scales[path]
        a = self._array(path)
        names = a.metadata.dimension_names if a.metadata.zarr_format == 3 else a.attrs.get("_ARRAY_DIMENSIONS")
        return [self._find_scale(path, n) if n and not n.startswith("phony_dim_") else [] for n in names or ()]

    def _find_scale(self, path: str, name: str) -> list[str]:
        group = path.rsplit("/", 1)[0]
        while group:
            for candidate in [f"{group}/{name}"] + [f"{group}/{c}/{name}" for c in sorted(self._children(group))]:
                if candidate != path and candidate in self._nodes and hasattr(self._nodes[candidate], "shape"):
                    return [candidate]
            group = group.rsplit("/", 1)[0]
        return []

    def _read_many(self, reads: list[tuple[str, Any]]) -> list[np.ndarray]:
        """Several ``(array path, selection)`` reads at once: zarr fetches all their chunks
        concurrently, so reading a shot's signals costs about one round trip, not one per
        array (and another per time base)."""
        return list(self._iter_many(reads))

    def _iter_many(self, reads: list[tuple[str, Any]]) -> Iterator[np.ndarray]:
        """:meth:`_read_many`, its arrays handed over one at a time, in order: every object
        is fetched at once, but a fetched object is decoded only when its array's turn comes,
        and its bytes are let go then. A caller that keeps a part of each array holds one
        decoded array at a time, not all of them."""
        import asyncio

        from zarr.core.sync import sync

        # whole arrays stored as one chunk or one shard with plain codecs (most signals,
        # time bases and packed shots): one GET each, decoded here on the caller's thread
        # (zarr_direct), without building a zarr array per read
        plans, keys = self._direct_keys(reads)
        fetched = self._take_fetched(keys)
        raw, done = fetched.result() if fetched is not None else (self._fetch(keys) if keys else [], {})
        first, at = {}, 0
        for i, plan in plans.items():
            first[i], at = at, at + len(plan.keys)

        def decoded(i: int) -> np.ndarray | None:  # None: zarr reads it (fills it)
            if i in done:  # decoded ahead, while the caller worked on its last read
                return done.pop(i)
            n = len(plans[i].keys)
            got = plans[i].decode(raw[first[i] : first[i] + n])
            raw[first[i] : first[i] + n] = [None] * n
            return got

        # a read that may yet fall to zarr (nothing stored, or a fill value only zarr
        # gives) is decoded now, to know; the others when their turn comes
        early = {i: decoded(i) for i, plan in plans.items()
                 if i not in done and not plan.decodes(raw[first[i] : first[i] + len(plan.keys)])}
        rest = [i for i in range(len(reads)) if i not in plans or (i in early and early[i] is None)]
        arrays = {i: self._array(reads[i][0]) for i in rest}  # outside the event loop: zarr opens with sync()

        async def read_rest(batch: list[int]) -> list[Any]:
            return await asyncio.gather(*(
                arrays[i]._async_array.getitem(reads[i][1] if reads[i][1] not in ((), None) else Ellipsis)
                for i in batch
            ))  # fmt: skip

        by_zarr = {}
        for batch in _batches(rest, [_working_bytes(arrays[i], reads[i][1]) for i in rest], ZARR_BATCH_BYTES):
            by_zarr.update(zip(batch, sync(read_rest(batch))))
        for i in range(len(reads)):
            if i in by_zarr:
                yield np.asarray(by_zarr.pop(i))
            elif i in early:
                yield early.pop(i)
            else:
                got = decoded(i)
                if got is None:  # pragma: no cover - a fetched object is never None here
                    raise AssertionError(f"{reads[i][0]}: decoding gave no array")
                yield got

    def _direct_keys(self, reads: list[tuple[str, Any]]) -> tuple[dict[int, DirectRead], list[str]]:
        """The reads that go direct (by their place in ``reads``) and the objects they
        fetch, in order."""
        plans = {i: plan for i, (p, sel) in enumerate(reads) if (plan := self._direct(p, sel))}
        return plans, [f"{reads[i][0].strip('/')}/{k}" for i in plans for k in plans[i].keys]

    def _fetch(self, keys: list[str]) -> list[np.ndarray | None]:
        """Objects' bytes, fetched at once (None: not stored); the arrays are the
        buffers' own bytes, not copies."""
        import asyncio

        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        prototype = default_buffer_prototype()

        async def read_one(key: str) -> np.ndarray | None:
            buf = await self.store.get(key, prototype)
            return None if buf is None else buf.as_numpy_array()

        async def read_all() -> list[Any]:
            return await asyncio.gather(*(read_one(key) for key in keys))

        return sync(read_all())

    def _fetch_ahead(self, reads: list[tuple[str, Any]]) -> _Ahead | None:
        """Start fetching the objects of ``reads`` in the background, and decoding them
        when the arrays hold at most :data:`AHEAD_DECODED_BYTES`. Set as the calling
        thread's ``_local.fetched``, the result serves its next :meth:`_iter_many` if it
        fetches exactly these objects (anything else fetches as usual)."""
        plans, keys = self._direct_keys(reads)
        if not keys:
            return None
        nbytes = sum(math.prod(p.shape) * p.dtype.itemsize for p in plans.values())
        decode = nbytes <= AHEAD_DECODED_BYTES

        def fetch() -> tuple[list[Any], dict[int, np.ndarray]]:
            raw, done, at = self._fetch(keys), {}, 0
            for i, plan in plans.items():
                part = raw[at : at + len(plan.keys)]
                if decode and plan.decodes(part):  # the decoding releases the GIL: it overlaps the caller's work
                    done[i] = plan.decode(part)
                    raw[at : at + len(plan.keys)] = [None] * len(plan.keys)
                at += len(plan.keys)
            return raw, done

        return _Ahead(tuple(keys), _ahead_pool().submit(fetch), nbytes)

    def _take_fetched(self, keys: list[str]) -> Future | None:
        ahead = getattr(self._local, "fetched", None)
        self._local.fetched = None
        return ahead.future if ahead is not None and ahead.keys == tuple(keys) else None

    def _direct(self, path: str, selection: Any) -> DirectRead | None:
        """The direct-read plan of a whole-array read (worked out once per array), or None."""
        if path not in self._chunk_plans:
            node, plan = self._nodes.get(path), None
            if isinstance(node, _ArrayDoc):
                try:
                    plan = plan_direct_read(node.doc, tuple(node.shape), node.native_dtype)
                except (TypeError, ValueError):  # a data type zarr's parser refuses: zarr reads it
                    pass
            self._chunk_plans[path] = plan
        plan = self._chunk_plans[path]
        return plan if plan is not None and _whole(selection, plan.shape) else None

    def _attrs_of(self, path: str) -> dict[str, Any]:
        node = self._nodes.get(path)
        return dict(node.attributes) if isinstance(node, _ArrayDoc) else dict(self._array(path).attrs)

    def _axes(self, paths: list[str]) -> tuple[dict[str, list[list[str]]], list[str]]:
        """Each array's first scale per axis, and every array to read for them: the
        arrays, then their scales, each once."""
        axes = {}
        for p in paths:
            node = self._nodes.get(p)
            ndim = len(node.shape) if isinstance(node, _ArrayDoc) else self._array(p).ndim
            axes[p] = [s[:1] for s in (self._scale_paths(p) or [[]] * ndim)]
        return axes, list(dict.fromkeys([*paths, *(s[0] for p in paths for s in axes[p] if s)]))

    def _shot_reads(self, shot: str) -> list[tuple[str, Any]]:
        """The reads :meth:`shot` starts with: what :meth:`iter_shots` fetches ahead."""
        return [(n, ()) for n in self._axes([path for _, _, path in self._expand({"shot": shot})])[1]]

    def iter_shots(self, shots: Iterable[str | int]) -> Iterator[tuple[str, xr.DataTree]]:
        """As :meth:`Archive.iter_shots`: while one shot is decoded and built, the objects
        of the next ones are on their way (their GETs start before this shot is read): up
        to :data:`AHEAD_SHOTS`, the next one always, a further one while those on their
        way hold less than :data:`AHEAD_DECODED_BYTES` of arrays. Arrays that zarr reads
        (not whole objects) are not fetched ahead."""
        shots = [str(s) for s in shots]
        ahead: dict[int, _Ahead | None] = {}  # shot index -> its objects on their way
        coming = 1  # the next shot to fetch ahead
        for i, shot in enumerate(shots):
            coming = max(coming, i + 1)
            while coming < min(i + 1 + AHEAD_SHOTS, len(shots)):
                if coming > i + 1 and sum(a.nbytes for a in ahead.values() if a is not None) >= AHEAD_DECODED_BYTES:
                    break
                ahead[coming] = self._fetch_ahead(self._shot_reads(shots[coming]))
                coming += 1
            self._local.fetched = ahead.pop(i, None)
            try:
                tree = self.shot(shot)
            finally:
                self._local.fetched = None
            yield shot, tree

    def _variables(self, paths: list[str]) -> list[xr.DataArray]:
        """Several arrays with their dimension scales as coordinates, read together
        (each scale once, however many arrays it serves)."""
        axes, needed = self._axes(paths)
        values = dict(zip(needed, self._read_many([(n, ()) for n in needed])))
        index: dict[str, _Coordinate] = {}  # scale path -> its coordinate, built once
        out = []
        for p in paths:
            dims, coords = [], {}
            for axis, scales in enumerate(axes[p]):
                if scales:
                    name = scales[0].rsplit("/", 1)[-1]
                    if scales[0] not in index:
                        attrs = _bytes_back(_plain_attrs(self._attrs_of(scales[0]), _HIDDEN_ZARR_ATTRS))
                        index[scales[0]] = _coordinate(name, values[scales[0]], attrs)
                    coords[name] = index[scales[0]]
                    dims.append(name)
                else:
                    dims.append(f"dim_{axis}")
            attrs = _bytes_back(_plain_attrs(self._attrs_of(p), _HIDDEN_ZARR_ATTRS))
            out.append(_with_coords(values[p], dims, coords, attrs))
        return out

    def _variable(self, path: str) -> xr.DataArray:
        return self._variables([path])[0]

    def shot(self, shot: str | int) -> xr.DataTree:
        """Every signal of one shot (as :meth:`Archive.shot`), fetched concurrently."""
        shot = str(shot)
        found = [(sig, path) for _, sig, path in self._expand({"shot": shot})]
        arrays = self._variables([path for _, path in found])
        return _shot_tree(shot, [(sig, a) for (sig, _), a in zip(found, arrays)], self._group_attrs(self.shot_path(shot)))

    def signal(self, signal: str) -> dict[str, xr.DataArray]:
        """One signal of every shot (as :meth:`Archive.signal`), fetched concurrently."""
        found = [(shot, path) for shot, _, path in self._expand({"signal": signal})]
        arrays = self._variables([path for _, path in found])
        return {shot: a.rename(signal) for (shot, _), a in zip(found, arrays)}


def _working_bytes(array: zarr.Array, selection: Any) -> int:
    """What zarr fetches and decodes to read ``selection``: the chunks (a shard's inner
    chunks) it touches, each counted twice (stored and decoded)."""
    shape, chunks = tuple(array.shape), tuple(array.chunks)
    sel = selection if isinstance(selection, tuple) else () if selection in (None, Ellipsis) else (selection,)
    touched = 1
    for axis, (n, c) in enumerate(zip(shape, chunks)):
        s = sel[axis] if axis < len(sel) else slice(None)
        if isinstance(s, (int, np.integer)):
            touched *= 1
        elif isinstance(s, slice) and s.step in (None, 1) and c:
            lo, hi, _ = s.indices(n)
            touched *= max(1, -(-hi // c) - lo // c) if hi > lo else 0
        else:
            touched *= -(-n // c) if c else 1
    return 2 * touched * math.prod(chunks) * max(1, np.dtype(array.dtype).itemsize)


_AHEAD_POOL: ThreadPoolExecutor | None = None


class _Ahead(NamedTuple):
    """A shot's objects on their way: the keys, what fetches (and decodes) them, and the
    bytes of the arrays they hold."""

    keys: tuple[str, ...]
    future: Future
    nbytes: int


def _ahead_pool() -> ThreadPoolExecutor:
    """The threads that wait for objects fetched ahead (the fetching itself runs on zarr's
    event loop); made on first use."""
    global _AHEAD_POOL
    if _AHEAD_POOL is None:
        _AHEAD_POOL = ThreadPoolExecutor(8, thread_name_prefix="layoutkit-ahead")
    return _AHEAD_POOL


def _forget_ahead_pool() -> None:
    # a forked child inherits the pool but not its threads: work sent to it would never run
    global _AHEAD_POOL
    _AHEAD_POOL = None


os.register_at_fork(after_in_child=_forget_ahead_pool)


def _batches(items: list[int], sizes: list[int], budget: int) -> Iterator[list[int]]:
    """``items`` in order, in runs whose ``sizes`` add up to at most ``budget`` (an item
    larger than that alone)."""
    batch: list[int] = []
    held = 0
    for item, size in zip(items, sizes):
        if batch and held + size > budget:
            yield batch
            batch, held = [], 0
        batch.append(item)
        held += size
    if batch:
        yield batch


def _whole(selection: Any, shape: tuple[int, ...]) -> bool:
    """Whether a selection is the whole array (``()``, ``...``, or full slices)."""
    if selection is None or selection is Ellipsis or selection == ():
        return True
    if not isinstance(selection, tuple) or len(selection) > len(shape):
        return False
    return all(isinstance(s, slice) and s.step in (None, 1) and s.indices(n)[:2] == (0, n)
               for s, n in zip(selection, shape))


def _store_text(store: Any, key: str) -> str:
    """A small document of a store (a local folder or a bucket), as text."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    buf = sync(store.get(key, default_buffer_prototype()))
    if buf is None:
        raise OSError(f"{key} is not in the store")
    return buf.to_bytes().decode()


def _counting_store(
    path: Path | str, model: LatencyModel | None, counter: Counter, sleep: Any, base: Any = None
) -> CountingStore:
    """``base`` (zarr's ObjectStore over a bucket prefix), or the local folder ``path``,
    wrapped so that every request is counted (and charged, with a latency model)."""
    base = base if base is not None else zarr.storage.LocalStore(path, read_only=True)
    return CountingStore(base, model, counter, **({"sleep": sleep} if sleep else {}))


@dataclass(frozen=True)
class _GroupDoc:
    """A group's entry in consolidated metadata, as JSON (no ``shape``: not an array)."""

    attributes: dict[str, Any]
    node_type: str = "group"


@dataclass(frozen=True)
class _ArrayDoc:
    """An array's entry in consolidated metadata, as JSON; parsed by zarr only when the
    array is opened."""

    shape: tuple[int, ...]
    attributes: dict[str, Any]
    doc: dict[str, Any]
    node_type: str = "array"

    @property
    def native_dtype(self) -> np.dtype:
        data_type = self.doc.get("data_type")
        if isinstance(data_type, str) and data_type in _SIMPLE_DTYPES:
            return _SIMPLE_DTYPES[data_type]
        from zarr.core.dtype import get_data_type_from_json

        return np.dtype(get_data_type_from_json(data_type, zarr_format=3).to_native_dtype())


_SIMPLE_DTYPES = {
    name: np.dtype(name)
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64", "complex64", "complex128")
}  # fmt: skip


class _LazyRoot:
    """The root of a Zarr v3 store with consolidated metadata, read as JSON.

    ``zarr.open_group`` parses every array's metadata in the consolidated document into
    zarr objects (codecs, chunk grid, fill value) before it returns: 2.8 s for 23,636
    arrays, measured. This root reads the same one document (one request) and parses an
    array only when it is opened, so ``layoutkit.open`` of a big store costs the JSON
    and nothing more. It offers what the archives use of a ``zarr.Group``: ``store``,
    ``attrs``, ``metadata.zarr_format``, item access to arrays and groups, and the raw
    ``nodes``.
    """

    def __init__(self, store: CountingStore, doc: dict[str, Any]) -> None:
        self.store = store
        self.attrs: dict[str, Any] = doc.get("attributes") or {}
        self.metadata = SimpleNamespace(zarr_format=3, consolidated_metadata=None)
        entries = (doc.get("consolidated_metadata") or {}).get("metadata") or {}
        self.nodes: dict[str, _GroupDoc | _ArrayDoc] = {}
        for name, entry in entries.items():
            attrs = entry.get("attributes") or {}
            if entry.get("node_type") == "array":
                self.nodes[name.strip("/")] = _ArrayDoc(tuple(entry["shape"]), attrs, entry)
            else:
                self.nodes[name.strip("/")] = _GroupDoc(attrs)
        self._opened: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getitem__(self, path: str) -> Any:
        from zarr.core.array import AsyncArray
        from zarr.core.group import AsyncGroup, GroupMetadata
        from zarr.storage import StorePath

        path = path.strip("/")
        with self._lock:
            if path not in self._opened:
                node = self.nodes[path]  # KeyError, as zarr's Group raises
                where = StorePath(self.store, path)
                if isinstance(node, _ArrayDoc):
                    self._opened[path] = zarr.Array(AsyncArray(node.doc, where))
                else:
                    meta = GroupMetadata(attributes=node.attributes, zarr_format=3)
                    self._opened[path] = zarr.Group(AsyncGroup(meta, where))
            return self._opened[path]


def _open_counted(
    path: Path | str, model: LatencyModel | None, counter: Counter, sleep: Any, base: Any = None,
    zarr_format: int | None = None, document: Any = None,
) -> tuple[CountingStore, Any]:
    """The root group of a store, read through a CountingStore: a :class:`_LazyRoot` when
    it is Zarr v3 with consolidated metadata, else zarr's own group. ``document``: the
    root ``zarr.json`` (a buffer) when the caller fetched it already."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    store = _counting_store(path, model, counter, sleep, base)
    # naming the format saves the requests for the other format's documents
    if zarr_format is None:
        zarr_format = 3 if (Path(path) / "zarr.json").exists() else 2
    if zarr_format == 3:
        buf = document if document is not None else sync(store.get("zarr.json", default_buffer_prototype()))
        doc = json.loads(buf.to_bytes()) if buf is not None else None
        if isinstance(doc, dict) and doc.get("node_type") == "group" and doc.get("consolidated_metadata"):
            return store, _LazyRoot(store, doc)
    return store, zarr.open_group(store, mode="r", zarr_format=zarr_format)


def _zarr_dtype(meta: Any) -> np.dtype:
    if isinstance(meta, _ArrayDoc):
        return meta.native_dtype
    dt = getattr(meta, "data_type", None) or getattr(meta, "dtype", None)
    try:
        return np.dtype(dt.to_native_dtype() if hasattr(dt, "to_native_dtype") else dt)
    except TypeError:
        return np.dtype(object)


def _tree_of(paths: Iterator[str]) -> dict[str, set[str]]:
    """Group -> member names of the hierarchy that holds ``paths``."""
    tree: dict[str, set[str]] = {}
    for path in paths:
        while path.count("/") > 0 and path != "/":
            parent, _, name = path.rpartition("/")
            tree.setdefault(parent or "/", set()).add(name)
            path = parent
    return tree


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


class SignalMajorArchive(ZarrArchive):
    """A signal-major Zarr store from ``convert --order signal``: every shot of a
    signal packed in one array (:mod:`layoutkit.writers.zarr_signal` has the layout).

    The per-shot index comes with the metadata (the series groups' attributes), so
    finding a shot costs no request: ``signal`` reads each packed array once and slices
    it per shot, ``shot`` reads one slice of each signal's array (a partial shard read).
    Source paths (``/shots/<SHOT>/signals/<SIGNAL>``, or a scale's) work in ``get``
    as well as the stored arrays' paths; arrays the packing does not carry are mirrored
    at their source paths and read as in a shot-major store.
    """

    layout = "signal-major"

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
        rows = {}
        for part in doc.get("parts", ()):
            data = f"{group}/{DATA}{part['suffix']}"
            common = _plain_attrs(dict(self._nodes[data].attributes), _HIDDEN_ZARR_ATTRS)
            dims = tuple(tuple(axis) for axis in part["dims"])
            for shot, start, length in zip(part["shots"], part["starts"], part["lengths"]):
                attrs = {**common, **part.get("shot_attrs", {}).get(shot, {})}
                rows[shot] = _Row(data, int(start), int(length), attrs, dims)
        same_as = {shot: other for other, shots in doc.get("same_as", {}).items() for shot in shots}
        return _Series(group, rows, same_as)

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

    def _scale_source(self, shot: str, ref: str) -> str:
        return ref if ref.startswith("/") else f"{self.shot_path(shot)}/{ref}"

    def _is_stored_array(self, path: str) -> bool:
        return hasattr(self._nodes.get(path), "shape")

    def _virtual_tree(self) -> dict[str, set[str]]:
        """Group -> member names of the source hierarchy the packed rows stand for."""
        if self._tree is None:
            self._tree = _tree_of(f"{self.shot_path(shot)}/{rel}" for rel, series in self._series.items()
                                  for shot in {*series.rows, *series.same_as})
        return self._tree

    def _children(self, group: str) -> list[str]:
        key = "/" if group in ("", "/") else group.rstrip("/")
        return sorted(set(super()._children(group)) | self._virtual_tree().get(key, set()))

    def _exists(self, path: str) -> bool:
        return path in self._nodes or self._locate(path) is not None or path in self._virtual_tree()

    @cached_property
    def _mirrored_signals(self) -> dict[str, tuple[str, str]]:
        """The signals stored at their own paths: path -> (shot, signal). A store opened
        for reading does not change, so this and the listings below are worked out once."""
        stored = [p for p in self._nodes if self._is_stored_array(p)]
        return match_template(stored, self.template)

    @cached_property
    def _listing(self) -> tuple[list[str], list[str]]:
        shots = {shot for s in self._signal_series.values() for shot in s.rows}
        signals = {name for name, s in self._signal_series.items() if s.rows}
        shots |= {shot for shot, _ in self._mirrored_signals.values()}
        signals |= {sig for _, sig in self._mirrored_signals.values()}
        return sorted(shots, key=natural_key), sorted(signals, key=natural_key)

    @property
    def shots(self) -> list[str]:
        return list(self._listing[0])

    @property
    def signals(self) -> list[str]:
        return list(self._listing[1])

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

    def _variables(self, paths: list[str]) -> list[xr.DataArray]:
        """Several source datasets with their coordinates; each packed array is read
        once for all of them, and so is each scale's. The datasets' rows and their
        scales' rows are fetched together (one round of requests, not two: a signal read
        in a bucket waited for its data, then for its time bases)."""
        located = {p: self._locate(p) for p in paths}
        packed = [p for p in paths if located[p] is not None]
        scales: dict[str, str] = {}  # the first scale of each axis
        for p in packed:
            shot = self._prefix.match(p).group("shot")
            for axis in located[p].dims:
                if axis:
                    scales.setdefault(self._scale_source(shot, axis[0]), "")
        for p in paths:
            if p not in located or located[p] is None:
                for axis in self._scale_paths(p):
                    if axis:
                        scales.setdefault(axis[0], "")
        scale_rows = {s: row for s in scales if (row := self._locate(s)) is not None}
        values = self._read_rows([located[p] for p in packed] + list(scale_rows.values()))
        datas = dict(zip(packed, values))
        coords = {s: (v, dict(row.attrs)) for (s, row), v in zip(scale_rows.items(), values[len(packed):])}
        for s in scales:  # a scale stored at its own path, as a shot-major store holds it
            if s not in coords:
                coords[s] = (super().get(s), _plain_attrs(dict(self._nodes[s].attributes), _HIDDEN_ZARR_ATTRS))
        index: dict[str, _Coordinate] = {}  # scale -> its coordinate, built once
        out = []
        for p in paths:
            row = located[p]
            if row is None:  # mirrored: as a shot-major store holds it
                data = super().get(p)
                attrs = _plain_attrs(dict(self._nodes[p].attributes), _HIDDEN_ZARR_ATTRS)
                axes = [axis[:1] for axis in self._scale_paths(p)]
            else:
                data, attrs = datas[p], row.attrs
                shot = self._prefix.match(p).group("shot")
                axes = [[self._scale_source(shot, axis[0])] if axis else [] for axis in row.dims]
            dims, coord = [], {}
            for axis in range(data.ndim):
                scale = axes[axis][0] if axis < len(axes) and axes[axis] else None
                if scale is None:
                    dims.append(f"dim_{axis}")
                    continue
                name = scale.rsplit("/", 1)[-1]
                if scale not in index:
                    values, scale_attrs = coords[scale]
                    index[scale] = _coordinate(name, values, _bytes_back(scale_attrs))
                coord[name] = index[scale]
                dims.append(name)
            out.append(_with_coords(data, dims, coord, _bytes_back(dict(attrs))))
        return out

    def _has_array(self, path: str) -> bool:
        """Whether a dataset of the source is at ``path`` (located in a packed array, or
        stored at its path). Unlike :meth:`_exists`, it never needs the tree of groups,
        which is built on first use (50 ms for 7,000 signals)."""
        return self._locate(path) is not None or self._is_stored_array(path)

    def _variable(self, path: str) -> xr.DataArray:
        if not self._has_array(path):
            raise KeyError(f"{path} is not an array in {self.path}")
        return self._variables([path])[0]

    def _shot_reads(self, shot: str) -> list[tuple[str, Any]]:
        # a shot is a slice of each signal's series, which zarr reads: nothing to fetch whole
        return []

    def _shot_paths(self, shot: str) -> tuple[list[str], list[str]]:
        """A shot's signals and their paths."""
        names = [sig for sig in self.signals if self._has_array(self.path_of(shot, sig))]
        return names, [self.path_of(shot, sig) for sig in names]

    def shot(self, shot: str | int) -> xr.DataTree:
        shot = str(shot)
        names, paths = self._shot_paths(shot)
        arrays = self._variables(paths)
        return _shot_tree(shot, list(zip(names, arrays)), self._group_attrs(self.shot_path(shot)))

    def signal(self, signal: str) -> dict[str, xr.DataArray]:
        series = self._signal_series.get(signal)
        shots = set(series.rows) if series else set()
        shots |= {shot for shot, sig in self._mirrored_signals.values() if sig == signal}
        ordered = sorted(shots, key=natural_key)
        arrays = self._variables([self.path_of(shot, signal) for shot in ordered])
        return {shot: a.rename(signal) for shot, a in zip(ordered, arrays)}


WHOLE_READ_BYTES = 4 * 1024**2  # a shot's packed array this small is read whole: one GET, not two


VIEW_SHARE = 0.9  # rows that use this much of a decoded packed array are views of it, not copies


def _values(raw: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Packed bytes as the dataset's values (a copy: aligned, and the caller's to keep)."""
    return raw.copy().view(dtype).reshape(shape)


def _view(raw: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Packed bytes as the dataset's values without a copy when they are aligned for the
    dtype (a copy otherwise, as :func:`_values`)."""
    if raw.ctypes.data % dtype.alignment:
        return _values(raw, dtype, shape)
    return raw.view(dtype).reshape(shape)


@dataclass(frozen=True)
class _Segment:
    """Where one shot's dataset lies in its shot's packed array (its bytes, flattened)."""

    data: str  # the packed array
    start: int  # first byte
    length: int  # bytes
    attrs: dict[str, Any]
    dims: tuple[tuple[str, ...], ...]  # per axis, the scales (relative to the shot, or absolute)
    shape: tuple[int, ...]
    fill_value: Any
    dtype: np.dtype


class _ShotIndex(Mapping):
    """Shot -> path relative to the shot -> :class:`_Segment`, from the shot groups'
    index attributes and the root layout attribute's tables; a shot's entries are parsed
    when it is first read, so opening a store of thousands of shots does not parse them
    all (0.05 s for 7,000, measured)."""

    def __init__(self, docs: dict[str, tuple[str, dict[str, Any]]], layout: dict[str, Any]) -> None:
        self._docs = docs  # shot -> (its group, its index attribute)
        self._layout = layout  # the root's layout attribute: the tables of version 2
        self._parsed: dict[str, dict[str, _Segment]] = {}

    def __getitem__(self, shot: str) -> dict[str, _Segment]:
        if shot not in self._parsed:
            group, doc = self._docs[shot]
            data = f"{group}/{PACKED_ARRAY}"
            segments = {}
            for rel, start, dtype, shape, fill, attrs, scales in index_rows(doc, self._layout):
                dt = np.dtype(dtype)
                segments[rel] = _Segment(data, int(start), math.prod(shape) * dt.itemsize, dict(attrs),
                                         tuple(tuple(axis) for axis in scales), tuple(shape), fill, dt)
            self._parsed[shot] = segments
        return self._parsed[shot]

    def __iter__(self) -> Iterator[str]:
        return iter(self._docs)

    def __len__(self) -> int:
        return len(self._docs)

    def members(self) -> Iterator[tuple[str, str]]:
        """(shot, path relative to the shot) of every packed dataset, without parsing."""
        return ((shot, rel) for shot, (_, doc) in self._docs.items() for rel in index_names(doc))


class ShotPackedArchive(SignalMajorArchive):
    """A shot-packed Zarr store from ``convert --order shot-packed``: the bytes of each
    shot's numeric datasets packed into one array (:mod:`layoutkit.writers.zarr_shot_packed`
    has the layout).

    The index is the shot groups' attributes, which come with the consolidated metadata,
    so ``shot`` reads the shot's packed array once (one shard) and a single signal is the
    small shard, or a ranged read inside a large one. Source paths work in ``get``; datasets the
    packing does not carry are mirrored at their paths and read as in a shot-major store.
    """

    layout = "shot-packed"

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # the parameters of ZarrArchive
        ZarrArchive.__init__(self, *args, **kwargs)
        meta = self.root.attrs.get(LAYOUT_ATTR) or {}
        if int(meta.get("version", 0)) > SHOT_PACKED_VERSION:
            raise NotAnArchiveError(
                f"{self.path} holds version {meta.get('version')} of the shot-packed layout; this layoutkit "
                f"reads version {SHOT_PACKED_VERSION} and older."
            )
        self._set_template(meta.get("template", self.template))
        self._full, self._prefix = compile_template(self.template)
        self._series, self._signal_series = {}, {}
        docs = {}
        for group, node in self._nodes.items():
            doc = None if hasattr(node, "shape") else node.attributes.get(SHOT_INDEX_ATTR)
            m = self._prefix.match(group + "/") if doc else None
            if doc and m is not None:
                docs[m.group("shot")] = (group, doc)
        self._segments = _ShotIndex(docs, meta)  # shot -> path relative to the shot -> segment
        self._tree = None

    def _locate(self, path: str) -> _Segment | None:  # type: ignore[override]
        m = self._prefix.match(path)
        if m is None:
            return None
        return self._segments.get(m.group("shot"), {}).get(path[m.end():])

    def _virtual_tree(self) -> dict[str, set[str]]:
        if self._tree is None:
            self._tree = _tree_of(f"{self.shot_path(shot)}/{rel}" for shot, rel in self._segments.members())
        return self._tree

    def _children(self, group: str) -> list[str]:
        return [c for c in super()._children(group) if c != PACKED_ARRAY]

    @cached_property
    def _listing(self) -> tuple[list[str], list[str]]:
        shots = {shot for shot, _ in self._mirrored_signals.values()}
        signals = {sig for _, sig in self._mirrored_signals.values()}
        if self.template.index("{signal}") > self.template.index("{shot}"):
            # the signal is in the path relative to the shot: each relative path is matched
            # once, not once per shot (9,470 paths of 100 shots took 18 ms of every open)
            by_rel: dict[str, str | None] = {}
            for shot, rel in self._segments.members():
                if rel not in by_rel:
                    m = self._full.match(f"{self.shot_path(shot)}/{rel}")
                    by_rel[rel] = m.group("signal") if m else None
                if by_rel[rel] is not None:
                    shots.add(shot)
            signals |= {sig for sig in by_rel.values() if sig is not None}
        else:
            paths = [f"{self.shot_path(shot)}/{rel}" for shot, rel in self._segments.members()]
            packed = match_template(paths, self.template)
            shots |= {shot for shot, _ in packed.values()}
            signals |= {sig for _, sig in packed.values()}
        return sorted(shots, key=natural_key), sorted(signals, key=natural_key)

    def arrays(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """The source's datasets: the mirrored ones and the packed ones, by source path."""
        packed = {seg.data for members in self._segments.values() for seg in members.values()}
        out = {p: v for p, v in super().arrays().items() if p not in packed}
        for shot, members in self._segments.items():
            for rel, seg in members.items():
                out[f"{self.shot_path(shot)}/{rel}"] = (seg.shape, seg.dtype)
        return out

    def blocks(self) -> list[tuple[str, Selection]]:
        """Every stored array's shards or chunks (the packed arrays by their own paths)."""
        out: list[tuple[str, Selection]] = []
        for p in sorted(p for p in self._nodes if self._is_stored_array(p)):
            a = self._array(p)
            out.extend((p, sel) for sel in _selections(tuple(a.shape), tuple(a.shards or a.chunks)))
        return out

    def get(self, path: str, selection: Selection = ()) -> np.ndarray:
        if self._is_stored_array(path):
            return ZarrArchive.get(self, path, selection)
        seg = self._locate(path)
        if seg is None:
            raise KeyError(f"{path} is not in {self.path}")
        a = self._array(seg.data)
        row = math.prod(seg.shape[1:]) * seg.dtype.itemsize
        first = selection[0] if selection else slice(None)
        if isinstance(first, slice) and first.indices(seg.shape[0])[2] == 1:
            lo, hi, _ = first.indices(seg.shape[0])
            hi = max(lo, hi)
            raw = np.asarray(a[seg.start + lo * row : seg.start + hi * row])
            return _values(raw, seg.dtype, (hi - lo, *seg.shape[1:]))[(slice(None), *selection[1:])]
        return _values(np.asarray(a[seg.start : seg.start + seg.length]), seg.dtype, seg.shape)[selection]

    def _read_rows(self, rows: list[_Segment]) -> list[np.ndarray]:  # type: ignore[override]
        """The values of several datasets, all read at once: a packed array whole (one GET
        of its shard) when it is small or they need half of it, else each dataset's own
        range (the shard index, then the range)."""
        ahead = getattr(self._local, "ahead", {})
        if all((r.data, r.start, r.length) in ahead for r in rows):
            return [ahead[(r.data, r.start, r.length)] for r in rows]
        users = self._spans(rows)
        out: list[Any] = [None] * len(rows)
        # a span's rows are copied out as it arrives, and the span let go: one decoded
        # packed array held at a time, not a signal's hundreds of shots (8 threads reading
        # signals of 100 shots held 0.8 GB). Rows that take most of their span (a whole
        # shot) are views of it instead, where aligned: the span is all theirs anyway.
        blocks = self._iter_many([(p, (slice(lo, hi),)) for p, lo, hi in users])
        for (_, lo, hi), block, wanted in zip(users, blocks, users.values()):
            keep = sum(rows[n].length for n in wanted) >= VIEW_SHARE * (hi - lo)
            for n in wanted:
                r = rows[n]
                part = block[r.start - lo : r.start - lo + r.length]
                out[n] = _view(part, r.dtype, r.shape) if keep else _values(part, r.dtype, r.shape)
        return out

    def _spans(self, rows: list[_Segment]) -> dict[tuple[str, int, int], list[int]]:
        """What reading ``rows`` fetches: span ``(packed array, first byte, end)`` -> the
        rows cut from it. A packed array is read whole when small or half needed."""
        wanted: dict[str, int] = {}
        for r in rows:
            wanted[r.data] = wanted.get(r.data, 0) + r.length
        sizes = {data: self._nodes[data].shape[0] for data in wanted}
        whole = {data for data, size in sizes.items() if size <= WHOLE_READ_BYTES or 2 * wanted[data] >= size}
        users: dict[tuple[str, int, int], list[int]] = {}
        for n, r in enumerate(rows):
            span = (r.data, 0, sizes[r.data]) if r.data in whole else (r.data, r.start, r.start + r.length)
            users.setdefault(span, []).append(n)
        return users

    def _rows_of(self, paths: list[str]) -> dict[tuple[str, int, int], _Segment]:
        """The packed rows that datasets need: their own and their time bases'."""
        rows = {}
        for p in paths:
            seg = self._locate(p)
            if seg is None:
                continue
            rows[(seg.data, seg.start, seg.length)] = seg
            shot = self._prefix.match(p).group("shot")
            for axis in seg.dims:
                if axis and (scale := self._locate(self._scale_source(shot, axis[0]))) is not None:
                    rows[(scale.data, scale.start, scale.length)] = scale
        return rows

    def _shot_reads(self, shot: str) -> list[tuple[str, Any]]:
        """The shot's packed array (or the ranges of it its datasets need)."""
        rows = list(self._rows_of(self._shot_paths(shot)[1]).values())
        return [(p, (slice(lo, hi),)) for p, lo, hi in self._spans(rows)]

    def _variables(self, paths: list[str]) -> list[xr.DataArray]:
        """As signal-major's, but the datasets and their time bases, which share the
        shot's packed arrays, are read together: each packed array once."""
        rows = self._rows_of(paths)
        self._local.ahead = dict(zip(rows, self._read_rows(list(rows.values()))))
        try:
            return super()._variables(paths)
        finally:
            self._local.ahead = {}

    def signal(self, signal: str) -> dict[str, xr.DataArray]:
        shots = [shot for shot in self.shots if self._exists(self.path_of(shot, signal))]
        arrays = self._variables([self.path_of(shot, signal) for shot in shots])
        return {shot: a.rename(signal) for shot, a in zip(shots, arrays)}


# -- the registry and the entry point -------------------------------------------------

ZARR_LAYOUTS: dict[str, type[ZarrArchive]] = {
    "shot-major": ZarrArchive, "signal-major": SignalMajorArchive, "shot-packed": ShotPackedArchive,
}


def open_archive(
    path: str | os.PathLike,
    *,
    template: str = DEFAULT_TEMPLATE,
    model: LatencyModel | None = None,
    page_buffer: int = 0,
    sleep: Any = None,
    storage_options: dict[str, str] | None = None,
) -> Archive:
    """Open any layout layoutkit knows as an :class:`Archive`.

    Parameters
    ----------
    path
        An HDF5 file (source or ``reorder`` output) or a Zarr store directory.
    template
        Where signals live, e.g. ``/shots/{shot}/signals/{signal}``.
    model
        Simulated object-store latency and bandwidth (None: no delay; reads are
        counted either way in ``archive.counter``).
    page_buffer
        HDF5 page buffer bytes, for paged HDF5 files.
    sleep
        Replaces the wait (tests record instead of sleeping).
    storage_options
        For a URL (``s3://bucket/key``): endpoint, credentials... (``--storage-option``).
        Its requests are real, and counted as GETs of the store.

    Raises
    ------
    NotAnArchiveError
        When the path does not exist or is neither HDF5 nor Zarr.
    """
    if is_url(str(path)):
        return _open_url(str(path), template, model, page_buffer, sleep, storage_options or {})
    p = Path(path)
    if not p.exists():
        raise SourceNotFoundError(f"{p} does not exist.")
    if p.is_dir():
        if not ((p / "zarr.json").exists() or (p / ".zgroup").exists()):
            raise NotAnArchiveError(f"{p} is a directory but not a Zarr store (no zarr.json or .zgroup).")
        try:
            _, root = _open_counted(p, model, Counter(), sleep)
        except (ValueError, KeyError, OSError) as exc:
            raise NotAnArchiveError(f"{p} is not a readable Zarr store: {exc}.") from None
        layout = root.attrs.get(LAYOUT_ATTR, {}) or {}
        name = layout.get("name", "shot-major") if isinstance(layout, dict) else "shot-major"
        if name not in ZARR_LAYOUTS:
            raise NotAnArchiveError(
                f"{p} holds the Zarr layout {name!r}, which this layoutkit cannot read "
                f"(it knows {', '.join(sorted(ZARR_LAYOUTS))})."
            )
        return ZARR_LAYOUTS[name](p, template, model, sleep, root=root)
    if not h5py.is_hdf5(p):
        raise NotAnArchiveError(f"{p} is not an HDF5 file or a Zarr store.")
    return HDF5Archive(p, template, model, page_buffer, sleep)


def zarr_format_at(store: Any, formats: tuple[int, ...] = (3, 2)) -> int | None:
    """3 or 2 when an obstore store (rooted at a Zarr store) has a root document of one
    of ``formats``, else None."""
    import obstore

    for name, fmt in (("zarr.json", 3), (".zgroup", 2)):
        if fmt not in formats:
            continue
        try:
            obstore.head(store, name)
            return fmt
        except FileNotFoundError:
            continue
    return None


def _open_url(url: str, template: str, model: LatencyModel | None, page_buffer: int, sleep: Any,
              storage_options: dict[str, str]) -> Archive:
    """A Zarr store or an HDF5 file in a bucket, or a version of an Icechunk repository,
    read with real requests."""
    from layoutkit.inventory import check_source
    from layoutkit.storage.icechunk_repo import is_icechunk, readonly_store

    if is_icechunk(url):
        try:
            base = readonly_store(url, storage_options)
        except LayoutkitError as exc:
            raise NotAnArchiveError(str(exc)) from None
        return _zarr_archive(url, base, 3, template, model, sleep)
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    counter = Counter()
    try:
        prefixed = store_at(url, storage_options)
        base = zarr.storage.ObjectStore(prefixed, read_only=True)
        # one GET tells a v3 store and brings its root document (a HEAD first cost a round trip more)
        document = sync(_counting_store(url, model, counter, sleep, base).get("zarr.json", default_buffer_prototype()))
        fmt = 3 if document is not None else zarr_format_at(prefixed, formats=(2,))
    except FileNotFoundError:
        fmt = None
    except LayoutkitError:  # one sentence already (storage options that set up no store)
        raise
    except Exception as exc:  # obstore's own errors: name what the store said
        from layoutkit.storage import describe_store_error

        raise NotAnArchiveError(describe_store_error(url, exc)) from None
    if fmt is None:  # an object, not a store: HDF5 (or refused in one sentence)
        source = check_source(ObjectSource(url, tuple(sorted(storage_options.items()))))
        return HDF5Archive(source, template, model, page_buffer, sleep)  # type: ignore[arg-type]
    return _zarr_archive(url, base, fmt, template, model, sleep, counter, document)


def _zarr_archive(url: str, base: Any, fmt: int, template: str, model: LatencyModel | None, sleep: Any,
                  counter: Counter | None = None, document: Any = None) -> Archive:
    """The archive of the layout a Zarr store (over the zarr store ``base``) records;
    ``document``: its root ``zarr.json`` when already fetched (counted in ``counter``)."""
    try:
        _, root = _open_counted(url, model, counter or Counter(), sleep, base=base, zarr_format=fmt, document=document)
    except (ValueError, KeyError, OSError) as exc:
        raise NotAnArchiveError(f"{url} is not a readable Zarr store: {exc}.") from None
    layout = root.attrs.get(LAYOUT_ATTR, {}) or {}
    name = layout.get("name", "shot-major") if isinstance(layout, dict) else "shot-major"
    if name not in ZARR_LAYOUTS:
        raise NotAnArchiveError(f"{url} holds the Zarr layout {name!r}, which this layoutkit cannot read.")
    return ZARR_LAYOUTS[name](url, template, model, sleep, root=root)  # type: ignore[arg-type]


__all__ = [
    "Archive",
    "HDF5Archive",
    "NotAnArchiveError",
    "ShotPackedArchive",
    "SignalMajorArchive",
    "ZarrArchive",
    "ZARR_LAYOUTS",
    "is_paged",
    "open_archive",
]
