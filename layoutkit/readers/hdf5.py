"""The reader of HDF5 files: a source, or a ``reorder`` output (paged, in any order),
through h5py over a :class:`~layoutkit.storage.counting.CountingFile`."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from functools import cached_property, partial
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import xarray as xr

from layoutkit.errors import InvalidOptionError, UnsupportedFeatureError
from layoutkit.formats import element_dims
from layoutkit.hdf5.attrs import attr_to_json, reference_path, region_as_text
from layoutkit.hdf5.chunk_index import index_problem
from layoutkit.hdf5.files import close_at_exit, external_values, open_checked
from layoutkit.hdf5.inventory import NETCDF_DIM_ONLY_PREFIX
from layoutkit.hdf5.library_read import dataset_values
from layoutkit.hdf5.model import long_double, typed_values
from layoutkit.hdf5.raw import chunk_entries, decode_chunked, raw_decoders, stored_ranges
from layoutkit.readers.base import (
    Archive,
    NotAnArchiveError,
    Selection,
    bytes_back,
    lazy_data,
    scale_coordinate,
    scan_grid,
    scan_selections,
    selections,
    with_coords,
)
from layoutkit.storage import ObjectSource, RangeFile
from layoutkit.storage.counting import CountingFile, LatencyModel
from layoutkit.storage.sources import (
    PAGED_READER_BLOCK_BYTES,
    READER_BLOCK_BYTES,
    READER_CACHE_BLOCKS,
    READER_READAHEAD,
    LocalObject,
)
from layoutkit.templates import DEFAULT_TEMPLATE

# HDF5 bookkeeping attributes a reader does not show as data attributes
_HIDDEN_ATTRS = frozenset({"DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid", "_Netcdf4Coordinates", "_nc3_strict"})
_HIDDEN_SCALE_ATTRS = frozenset({"CLASS", "NAME"})

DEFAULT_PAGE_BUFFER = 64 * 1024**2
"""A page buffer of 4 pages of 8 MiB, the size ``verify`` and ``advise`` measure paged files
with. Not a reader's default: where requests cost (a bucket, a simulated latency) the
reader's own blocks turn h5py's hundreds of small reads into a few GETs, and smaller ones
than the whole pages HDF5's buffer reads (:data:`~layoutkit.storage.sources.PAGED_READER_BLOCK_BYTES`:
one shot of a by-shot file at 50,000 shots, 0.73 s of GETs against 1.19 s of pages); on a
local disk HDF5's buffer only copies whole pages out of the OS's cache (the same shot: 48 MiB
copied, 43 ms, against 6 ms without, as at 1,000 shots)."""


class HDF5Archive(Archive):
    """An HDF5 file (a source or a ``reorder`` output) read through h5py.

    Parameters
    ----------
    page_buffer
        Bytes of HDF5 page buffer (``page_buf_size``); only for files written with
        paged aggregation (HDF5 refuses it for others). None or 0: none; a paged file in
        a bucket or under a simulated latency is read in the reader's own blocks, kept
        (:data:`DEFAULT_PAGE_BUFFER` says why that is the default).
    """

    format = "hdf5"

    def __init__(
        self,
        path: Path,
        template: str = DEFAULT_TEMPLATE,
        model: LatencyModel | None = None,
        page_buffer: int | None = 0,
        sleep: Any = None,
    ) -> None:
        super().__init__(path, template)
        # with simulated latency, a local file is read as one in a bucket is (blocks, rounds of GETs) and
        # charged for those GETs: h5py's own reads (thousands of a few bytes each) are not what a bucket costs
        source = LocalObject(str(path)) if model is not None and not isinstance(path, ObjectSource) else path
        self._model, self._sleep = model, sleep or time.sleep
        self._file: RangeFile | CountingFile
        if isinstance(source, ObjectSource):  # every GET is a request (h5py's reads come from its blocks)
            self._file = open_checked(source, on_get=self._charge, block_bytes=READER_BLOCK_BYTES,
                                      keep=READER_CACHE_BLOCKS)
        else:
            counting = CountingFile(path)
            counting.counter = self.counter
            self._file = counting
        self._local = None if isinstance(path, ObjectSource) else os.fspath(path)
        self._by_name: h5py.File | None = None  # opened by :meth:`_dataset` for virtual datasets
        self._virtual: dict[str, bool] = {}  # path -> whether a virtual dataset (:meth:`_dataset`)
        self._external_storage: dict[str, bool] = {}  # path -> whether its raw data are in other files
        self._scale_paths: dict[Any, str] = {}  # header address -> path
        self._dimension_only: dict[Any, bool] = {}  # header address -> a netCDF dimension without values
        self._chunks: dict[str, tuple[int, ...] | None] = {}  # path -> its chunks, seen by variable()
        self._coords: dict[str, Any] | None = None  # during a read: scale path -> its coordinate
        self._read_attrs: dict[str, dict[str, Any]] = {}  # during a read: path -> attributes read ahead
        self._raw: dict[str, tuple[Any, Any, Any]] = {}  # during a read: path -> what decodes it here
        self._values: dict[str, np.ndarray] = {}  # during a batch: path -> values decoded here
        self._threads: Any = None
        try:
            self.f = close_at_exit(h5py.File(self._file, "r", **({"page_buf_size": page_buffer} if page_buffer else {})))
        except OSError as exc:
            self._file.close()
            if page_buffer and not isinstance(source, ObjectSource) and not is_paged(path):
                raise InvalidOptionError(
                    f"{path} was not written with paged aggregation, so it cannot have a page buffer."
                ) from None
            raise NotAnArchiveError(f"{path} cannot be opened as HDF5: {exc}.") from None
        self.page_buffer = page_buffer or 0
        fcpl = self.f.id.get_create_plist()
        strategy = fcpl.get_file_space_strategy()[0]
        self._storage = "hdf5-paged" if strategy == h5py.h5f.FSPACE_STRATEGY_PAGE else "hdf5"
        if isinstance(self._file, RangeFile):  # in a bucket
            if self._storage == "hdf5-paged" and self.f.userblock_size == 0 and page_buffer:
                self._file.follow_pages(fcpl.get_file_space_page_size())  # HDF5's buffer reads pages: one a GET
            elif self._storage == "hdf5-paged" and self.layout != self._storage:
                # reorder's file: its metadata in its first pages, where a name lookup reads a
                # little of several (PAGED_READER_BLOCK_BYTES); another paged file (h5repack -S
                # PAGE) keeps each page's metadata beside its data, read in whole blocks as
                # the readers users have read it: one signal of every shot of such a file
                # took 77 GETs in blocks of 1 MiB, where h5py over s3fs's blocks of 8 MiB took 67
                self._file.use_blocks(PAGED_READER_BLOCK_BYTES)
            self._file.readahead = READER_READAHEAD

    @cached_property
    def layout(self) -> str:  # type: ignore[override]
        """The layout ``reorder`` recorded in the root's attributes, else the storage's.
        Read when asked: in a bucket the root's attributes may be a page (a GET) that
        reading a shot or a signal never needs; a paged file in a bucket asks it at
        opening (reorder's file and another's are read in blocks of different sizes).
        In reorder's files the root's attributes lie in the first block, fetched anyway."""
        return _recorded_layout(self.f.attrs.get("layoutkit")) or self._storage

    def _charge(self, *sizes: int) -> None:
        """A round of GETs (sent together): each counted, the round waited for once."""
        for nbytes in sizes:
            self.counter.add(nbytes, self._model.cost(nbytes) if self._model else 0.0)
        delay = self._model.round_trip(sizes) if self._model else 0.0
        if delay:
            self._sleep(delay)

    def close(self) -> None:
        try:
            self.f.close()
            if self._by_name is not None:
                self._by_name.close()
        finally:
            self._file.close()
            if self._threads is not None:
                self._threads.shutdown(wait=False)

    def children(self, group: str) -> list[str]:
        g = self.f.get(group)
        return list(g.keys()) if isinstance(g, h5py.Group) else []

    def exists(self, path: str) -> bool:
        return path in self.f

    def arrays(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        out: dict[str, tuple[tuple[int, ...], np.dtype]] = {}

        def visit(name: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset):
                out["/" + name] = (tuple(obj.shape or ()), obj.dtype)

        self.f.visititems(visit)
        return out

    def _dataset(self, path: str) -> h5py.Dataset:
        """The dataset at ``path``; a virtual one from the file opened by its name. HDF5
        opens the files a virtual dataset maps with the access properties of the file
        that holds it: through the counting file object, every mapped file was this file
        again, no mapped dataset was found in it, and every value read as the fill
        value. Its reads are HDF5's own, not counted."""
        ds = self.f[path]
        virtual = self._virtual.get(path)
        if virtual is None:
            virtual = self._virtual[path] = ds.is_virtual
        if not virtual:
            return ds
        if self._by_name is None:
            if self._local is None:
                raise UnsupportedFeatureError(path, "a virtual dataset (the files it maps are not read from a bucket)")
            self._by_name = h5py.File(self._local, "r")
        return self._by_name[path]

    def dimension_only(self, path: str) -> bool:
        name = self.f[path].attrs.get("NAME")
        return isinstance(name, bytes) and name.startswith(NETCDF_DIM_ONLY_PREFIX.encode())

    def _external(self, path: str, ds: h5py.Dataset) -> bool:
        """Whether the dataset keeps its raw data in other files (external raw storage):
        its values are then read by HDF5 from those files (:func:`~layoutkit.hdf5.files.external_values`),
        not through the counting file; those reads are HDF5's own, not counted."""
        found = self._external_storage.get(path)
        if found is None:
            found = self._external_storage[path] = ds.id.get_create_plist().get_external_count() > 0
        return found

    def get(self, path: str, selection: Selection = ()) -> np.ndarray:
        ds = self._dataset(path)
        if self._external(path, ds):
            with external_values(self.f, path, self._local) as values:
                return _values(values, selection)
        return _values(ds, selection)

    def blocks(self) -> list[tuple[str, Selection]]:
        out: list[tuple[str, Selection]] = []

        def visit(name: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset) and obj.shape is not None:
                shape = tuple(obj.shape)
                grid = scan_grid(shape, obj.dtype.itemsize, obj.chunks)
                out.extend(("/" + name, sel) for sel in (
                    scan_selections(shape, grid, partial(_chunk_origins, obj.id)) if obj.chunks
                    else selections(shape, grid)))

        self.f.visititems(visit)
        return out

    def _variables(self, paths: Iterable[str]) -> list[xr.DataArray]:
        """In a bucket: the blocks that hold the datasets' data and their dimension
        scales' are fetched together, in concurrent GETs, before h5py reads them (it
        would wait for each block it misses in turn), :data:`PREFETCH_BYTES` of blocks
        at a time. Every read: a time base shared by several of the datasets is read,
        with its attributes, once (a shot's 70 signals are on a few)."""
        self._coords, self._read_attrs, self._raw = {}, {}, {}
        try:
            if not isinstance(self._file, RangeFile):
                return super()._variables(paths)
            return self._prefetching(paths, self._file)
        finally:
            self._coords, self._read_attrs, self._raw = None, {}, {}

    def _prefetching(self, paths: Iterable[str], file: RangeFile) -> list[xr.DataArray]:
        out: list[xr.DataArray] = []
        batch: list[str] = []
        ranges: list[tuple[int, int]] = []
        raw: dict[str, tuple[Any, Any, Any]] = {}
        blocks: set[int] = set()  # of the batch's data
        seen: set[Any] = set()
        walked = file.blocks_fetched
        most = max(1, PREFETCH_BYTES // file.block_bytes)
        for path in paths:
            own = self._stored_ranges(path, seen)
            own_raw, self._raw = self._raw, {}
            own_blocks = file.blocks_of(own)
            # a batch ends at PREFETCH_BYTES of data, or before the blocks its metadata came
            # from (often the data's blocks too, in a file that is not paged) would be let go
            with_own = len(blocks | own_blocks)
            if batch and (with_own > most or file.blocks_fetched - walked + with_own > file.blocks_kept):
                out.extend(self._read_batch(batch, ranges, raw, file))
                batch, ranges, raw, blocks = [], [], {}, set()
                walked = file.blocks_fetched
            batch.append(path)
            ranges += own
            raw.update(own_raw)
            blocks |= own_blocks
        if batch:
            out.extend(self._read_batch(batch, ranges, raw, file))
        return out

    def _read_batch(self, batch: list[str], ranges: list[tuple[int, int]],
                    raw: dict[str, tuple[Any, Any, Any]], file: RangeFile) -> list[xr.DataArray]:
        """The batch's variables: its blocks fetched together (``ranges``), then the
        chunked datasets and time bases whose filters layoutkit decodes (``raw``: path ->
        dataset, chunk index, decoders) decoded here, several at once on :meth:`_pool`'s
        threads (h5py decodes one chunk at a time under its lock); the rest through h5py."""

        def decode(job: tuple[Any, Any, Any]) -> np.ndarray:
            return decode_chunked(*job, file.pread)

        with file.prefetched(ranges):
            if raw:
                self._values = dict(zip(raw, self._pool().map(decode, raw.values())))
            try:
                return [self.variable(p) for p in batch]
            finally:
                self._values = {}

    def _pool(self) -> Any:
        if self._threads is None:
            from concurrent.futures import ThreadPoolExecutor

            self._threads = ThreadPoolExecutor(os.cpu_count() or 2, thread_name_prefix="layoutkit-decode")
        return self._threads

    def _stored_ranges(self, path: str, seen: set[int]) -> list[tuple[int, int]]:
        """Where the dataset at ``path`` and its dimension scales not in ``seen`` (object
        addresses, added to) keep their data. Where the scales are, and the attributes,
        are read now too: metadata, read before the data is fetched, not after."""
        ds = self.f[path]
        ranges = self._data_ranges(path, ds)
        self._read_attrs[path] = self._attrs(ds, h5py.h5ds.is_scale(ds.id))
        for axis in range(ds.ndim):
            for scale in ds.dims[axis].values():
                addr = _address(scale)
                if addr not in seen:
                    seen.add(addr)
                    where = self._scale_path(path, scale)
                    self._read_attrs[where] = self._attrs(scale, True)
                    ranges += self._data_ranges(where, scale)
        return ranges

    def _data_ranges(self, key: str, ds: h5py.Dataset) -> list[tuple[int, int]]:
        """Where ``ds`` keeps its data; kept under ``key`` to be decoded here when
        layoutkit decodes its chunks (:func:`~layoutkit.hdf5.raw.raw_decoders`)."""
        decoders = raw_decoders(ds)
        if decoders is None:
            return stored_ranges(ds, self._file)
        entries = chunk_entries(ds, self._file)
        if index_problem(tuple(ds.shape), tuple(ds.chunks), entries) is not None:
            return [(offset, size) for offset, size, _ in entries.values() if size]  # HDF5 reads it
        self._raw[key] = (ds, entries, decoders)
        return [(offset, size) for offset, size, _ in entries.values() if size]

    def lazy_variables(self, paths: Iterable[str]) -> list[xr.DataArray]:
        self._coords, self._read_attrs = {}, {}  # each scale read once, as in _variables
        try:
            return [self.variable(p, lazy=True) for p in paths]
        finally:
            self._coords, self._read_attrs = None, {}

    def variable(self, path: str, lazy: bool = False) -> xr.DataArray:
        ds = self._dataset(path)
        self._chunks[path] = tuple(ds.chunks) if ds.chunks else None  # stored_chunks, without a second lookup
        data = self._values.pop(path, None) if self._values else None
        if data is None and lazy and ds.dtype.kind != "O" and h5py.check_string_dtype(ds.dtype) is None:
            sub = ds.dtype.subdtype  # an array type: its numbers, the element's axes last (as h5py reads it)
            data = (lazy_data(self, path, tuple(ds.shape), ds.dtype) if sub is None  # text as the reader reads it
                    else lazy_data(self, path, (*ds.shape, *sub[1]), sub[0]))
        if data is None:  # (sequences as get gives them: of text, in their type's byte order, a scalar's in a 0-d array)
            data = (self.get(path) if self._external(path, ds) or h5py.check_vlen_dtype(ds.dtype) is not None
                    else _references(ds, ()) if h5py.check_ref_dtype(ds.dtype) else np.asarray(_text(ds)[()]))
        dims, coords = [], {}
        for axis, dim in enumerate(ds.dims):
            scales = dim.values()
            if scales and self._is_dimension_only(scales[0]):  # a netCDF dimension with no variable: a name, no values
                dims.append(self._scale_path(path, scales[0]).rsplit("/", 1)[-1])
            elif scales:
                scale = scales[0]
                where = self._scale_path(path, scale)
                name = where.rsplit("/", 1)[-1]
                coord = self._coords.get(where) if self._coords is not None else None
                if coord is None or coord.variable.dims != (name,):
                    attrs = self._read_attrs.pop(where, None)
                    values = self._values.pop(where, None) if self._values else None
                    if values is None:
                        values = self.get(where) if self._external(where, scale) else np.asarray(scale[()])
                    coord = scale_coordinate(name, values,
                                             self._attrs(scale, True) if attrs is None else attrs)
                    if self._coords is not None:
                        self._coords[where] = coord
                coords[name] = coord
                dims.append(name)
            else:
                dims.append(f"dim_{axis}")
        if ds.dtype.subdtype is not None:  # an array type's elements: last axes, named as in every layout
            dims.extend(element_dims(path.rsplit("/", 1)[-1], len(ds.dtype.subdtype[1])))
        attrs = self._read_attrs.pop(path, None)
        return with_coords(data, dims, coords, self._attrs(ds, h5py.h5ds.is_scale(ds.id)) if attrs is None else attrs)

    def _scale_path(self, path: str, scale: h5py.Dataset) -> str:
        """Where a dimension scale of the dataset at ``path`` lives.

        h5py's ``scale.name`` (H5Iget_name) searches the whole file for an object reached
        through a reference: thousands of metadata reads on a shot archive. The scale's
        NAME attribute is its name as h5py and netCDF-4 write it; it is looked up in the
        dataset's group, its ancestors and their subgroups, nearest first, and accepted
        only where the object found is the scale itself.
        """
        addr = _address(scale)
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
                    if isinstance(obj, h5py.Dataset) and _address(obj) == addr:
                        found = candidate
                        break
                if not group:
                    break
                group = group.rsplit("/", 1)[0]
        self._scale_paths[addr] = found or scale.name  # the search of last resort
        return self._scale_paths[addr]

    def _is_dimension_only(self, scale: h5py.Dataset) -> bool:
        """:func:`_dimension_only`, asked once per scale (a time base shared by a shot's signals)."""
        addr = _address(scale)
        if addr not in self._dimension_only:
            self._dimension_only[addr] = _dimension_only(scale)
        return self._dimension_only[addr]

    def stored_chunks(self, path: str) -> tuple[int, ...] | None:
        if path in self._chunks:
            return self._chunks[path]
        ds = self.f.get(path)
        return tuple(ds.chunks) if isinstance(ds, h5py.Dataset) and ds.chunks else None

    def group_attrs(self, path: str) -> dict[str, Any]:
        g = self.f.get(path)
        return self._attrs(g, False) if isinstance(g, h5py.Group) else {}

    def _attrs(self, obj: Any, is_scale: bool) -> dict[str, Any]:
        hidden = _HIDDEN_ATTRS | (_HIDDEN_SCALE_ATTRS if is_scale else frozenset())
        held = {k: obj.attrs[k] for k in obj.attrs if k not in hidden}
        return bytes_back({k: v if _long_doubles(v) else attr_to_json(v, self.f) for k, v in held.items()})

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


PREFETCH_BYTES = 256 * 1024**2
"""At most this much data (whole blocks) fetched ahead by one batch of a read in a bucket."""


def _values(ds: h5py.Dataset, selection: Selection) -> np.ndarray:
    """The values of ``ds`` in ``selection`` as :meth:`HDF5Archive.get` gives them."""
    if ds.shape is None:
        return np.empty(0, ds.dtype)
    if h5py.check_ref_dtype(ds.dtype) is not None:
        return _references(ds, selection)
    ds = _text(ds)
    if ds.dtype.subdtype is not None and len(selection) > ds.ndim:  # into an array type's elements
        outer = tuple(selection[: ds.ndim])
        values = np.asarray(ds[outer] if outer else ds[()])[(..., *selection[ds.ndim:])]
        return typed_values(values, ds.dtype)
    # (strings in sequences and array types as text, a scalar's sequence in a 0-d array, a compound's references as paths)
    return dataset_values(ds, selection)


def _address(obj: Any) -> Any:
    """Where an object's header is: what tells two links to one object apart from two
    objects. (``h5o.get_info`` tells too, but it also sizes the object's metadata, which
    reads a chunked dataset's whole index: blocks a read never needed, in a bucket.)"""
    return h5py.h5g.get_objinfo(obj.id, b".").objno


def _dimension_only(scale: h5py.Dataset) -> bool:
    """Whether a dimension scale is a netCDF dimension without a variable (its NAME says so)."""
    raw = scale.attrs.get("NAME")
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "")
    return text.startswith(NETCDF_DIM_ONLY_PREFIX)


def _references(ds: h5py.Dataset, selection: Any) -> np.ndarray:
    """References as the Zarr layouts store them (the type rules): an object reference as
    the path it points at, a region reference as its path and selection's text; unset
    ones as the empty string."""
    f = ds.file
    text = region_as_text if h5py.check_ref_dtype(ds.dtype) is h5py.RegionReference else reference_path
    refs = np.asarray(ds[selection] if selection else ds[()], dtype=object)
    return np.vectorize(lambda r: text(f, r), otypes=[object])(refs) if refs.size else refs


def _text(ds: h5py.Dataset) -> Any:
    # variable-length strings as text, as Zarr stores give them (h5py gives bytes)
    info = h5py.check_string_dtype(ds.dtype)
    return ds.asstr() if info is not None and ds.dtype.kind == "O" else ds


def _long_doubles(value: Any) -> bool:
    """Whether an attribute's value is of long doubles: given as h5py reads them (JSON
    would take their text, :data:`~layoutkit.formats.LONG_DOUBLE_ATTRS_ATTR`)."""
    return isinstance(value, (np.ndarray, np.generic)) and long_double(value.dtype)


def is_paged(path: str | os.PathLike) -> bool:
    """True when an HDF5 file was written with the PAGE file space strategy."""
    with h5py.File(path, "r") as f:
        return f.id.get_create_plist().get_file_space_strategy()[0] == h5py.h5f.FSPACE_STRATEGY_PAGE


def _chunk_origins(dsid: Any) -> list[tuple[int, ...]]:
    """Where each chunk HDF5 has allocated for a chunked dataset starts."""
    origins: list[tuple[int, ...]] = []
    dsid.chunk_iter(lambda info: origins.append(tuple(info.chunk_offset)))
    return origins


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


__all__ = ["DEFAULT_PAGE_BUFFER", "HDF5Archive", "is_paged"]
