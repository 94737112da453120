"""Walk an HDF5 source into plain frozen dataclasses.

:func:`read_inventory` walks the whole hierarchy once (groups, datasets, attributes,
links, dimension scales, filters, chunking) and returns an :class:`Inventory` that
planning works from without touching the file again. The file is opened by
:mod:`layoutkit.hdf5.files` and its attributes read by :mod:`layoutkit.hdf5.attrs`.
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import h5py
import hdf5plugin  # noqa: F401  (registers third-party HDF5 filters: zstd, lz4, bitshuffle, blosc...)
import numpy as np

from layoutkit.errors import (
    CorruptSourceError,
)
from layoutkit.hdf5.attrs import attr_text, convert_attrs, decoded_name, read_attrs
from layoutkit.hdf5.chunk_index import MAX_CHUNKS_FOR_H5PY, chunk_count, entries_in_bucket
from layoutkit.hdf5.files import first_line, open_h5, open_source
from layoutkit.hdf5.filters import filter_name
from layoutkit.hdf5.walkers import Walkers
from layoutkit.storage import ObjectSource

NETCDF_DIM_ONLY_PREFIX = "This is a netCDF dimension but not a netCDF variable"

@dataclass(frozen=True)
class FilterInfo:
    """One stage of a dataset's HDF5 filter pipeline."""

    id: int
    name: str
    options: tuple[int, ...]
    available: bool


@dataclass(frozen=True)
class ArrayInfo:
    """Everything planning needs to know about one HDF5 dataset.

    ``kind`` is one of ``numeric``, ``bool``, ``string``, ``bytes``, ``compound``,
    ``enum``, ``opaque``, ``reference``, ``vlen``; ``dims`` holds one dimension name per
    axis (scale names, or ``phony_dim_N``).
    """

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    kind: str
    layout: str
    chunks: tuple[int, ...] | None
    filters: tuple[FilterInfo, ...]
    fill_value: Any
    attrs: dict[str, Any]
    dims: tuple[str, ...]
    dim_scales: tuple[tuple[str, ...], ...]
    is_scale: bool
    storage_bytes: int
    enum_mapping: dict[str, int] | None = None
    external: bool = False
    dim_only: bool = False
    null_space: bool = False
    offset: int | None = None  # file offset of contiguous raw data (None: never written)
    maxshape: tuple[int | None, ...] | None = None  # None on an axis: unlimited (None: as shape)
    # a chunked dataset's index when it has few chunks (one B-tree leaf): (origin, offset,
    # size, filter mask) of each allocated chunk, read with its storage size; None: not
    # recorded (many chunks), readers ask the file
    chunk_entries: tuple[tuple[tuple[int, ...], int, int, int], ...] | None = None
    address: int | None = None  # the object's address in the source file (None: not walked)

    @property
    def extendible(self) -> bool:
        """Whether an axis may grow (netCDF's unlimited dimensions): HDF5 then needs chunks."""
        return self.maxshape is not None and tuple(self.maxshape) != self.shape

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class GroupInfo:
    path: str
    attrs: dict[str, Any]


@dataclass(frozen=True)
class LinkInfo:
    """A link that is not the first hard link to its object."""

    path: str
    kind: str  # "hard" | "soft" | "external"
    target: str
    target_file: str | None = None


@dataclass(frozen=True)
class Inventory:
    """The walked hierarchy of one HDF5 source."""

    path: str
    userblock_size: int
    is_netcdf4: bool
    groups: tuple[GroupInfo, ...]
    arrays: tuple[ArrayInfo, ...]
    links: tuple[LinkInfo, ...]
    attr_notes: tuple[str, ...] = field(default=())

    def array(self, path: str) -> ArrayInfo:
        for a in self.arrays:
            if a.path == path:
                return a
        raise KeyError(path)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)


# ---------------------------------------------------------------------------------
# attributes


# ---------------------------------------------------------------------------------
# datasets


def classify_dtype(dtype: np.dtype) -> str:
    """Name the kind of an h5py dtype (see :class:`ArrayInfo`)."""
    if h5py.check_enum_dtype(dtype) is not None:
        return "enum"
    if h5py.check_ref_dtype(dtype) is not None:
        return "reference"
    string_info = h5py.check_string_dtype(dtype)
    if string_info is not None:
        # variable-length strings (utf-8 or ascii) become text; fixed-length stay bytes
        return "string" if string_info.length is None or dtype.kind == "U" else "fixed-bytes"
    if h5py.check_vlen_dtype(dtype) is not None:
        return "vlen"
    if dtype.names:
        return "compound"
    if dtype.kind == "b":
        return "bool"
    if dtype.kind == "V":
        return "opaque"
    if dtype.kind in "iufcmM":  # datetime64/timedelta64: h5py's tagged opaque types
        return "numeric"
    if dtype.kind == "S":
        return "fixed-bytes"
    return "other"


_LAYOUTS = {
    h5py.h5d.COMPACT: "compact",
    h5py.h5d.CONTIGUOUS: "contiguous",
    h5py.h5d.CHUNKED: "chunked",
    h5py.h5d.VIRTUAL: "virtual",
}


def _filters(plist: h5py.h5p.PropDCID) -> tuple[FilterInfo, ...]:
    out = []
    for i in range(plist.get_nfilters()):
        fid, _flags, opts, name = plist.get_filter(i)
        out.append(FilterInfo(fid, filter_name(fid, name), tuple(int(o) for o in opts), bool(h5py.h5z.filter_avail(fid))))
    return tuple(out)


def _fill_value(ds: h5py.Dataset) -> Any:
    try:
        return ds.fillvalue
    except (OSError, TypeError, ValueError, RuntimeError):  # "fill value is undefined"
        return None


def _is_external(plist: h5py.h5p.PropDCID) -> bool:
    try:
        return plist.get_external_count() > 0
    except (AttributeError, OSError):
        return False


# ---------------------------------------------------------------------------------
# the walk


def read_inventory(path: str | os.PathLike, workers: int = 1) -> Inventory:
    """Walk an HDF5 file once and describe it.

    Parameters
    ----------
    path
        The HDF5 (or netCDF-4) file.
    workers
        Processes that read dataset properties and attributes. HDF5 serialises every
        call in a process, and a shot archive has tens of thousands of datasets (about
        a millisecond each), so files with many datasets are shared out to spawned
        processes that each open the file themselves.

    Returns
    -------
    Inventory
        Groups, arrays (with dimension names), links and notes, in a stable order
        (depth-first, names sorted as h5py lists them).

    Raises
    ------
    SourceNotFoundError, NotHDF5Error, CorruptSourceError
    """
    if isinstance(path, ObjectSource):
        workers = 1  # spawned walkers would each fetch the metadata again
    with open_source(path) as f:
        fileobj = getattr(f, "_fileobj", None)  # in a bucket: keep more blocks while walking
        try:
            with fileobj.walking() if fileobj is not None else contextlib.nullcontext():
                return _walk(f, str(path), workers)
        except (OSError, RuntimeError, KeyError, ValueError) as exc:  # h5py's words for damaged metadata
            raise CorruptSourceError(
                f"Source {str(path)!r} is damaged and its structure cannot be read "
                f"({first_line(exc)})."
            ) from None


@dataclass
class _Record:
    """What the walk keeps of a dataset: everything, so the dataset can be closed at once
    (an open HDF5 dataset costs tens of kB; archives have tens of thousands)."""

    path: str
    info: dict[str, Any]
    attrs: dict[str, Any]
    is_scale: bool
    dim_only: bool
    shape: tuple[int, ...]
    attached: tuple[tuple[int, ...], ...]  # object addresses of the scales on each axis


def _record(ds: h5py.Dataset, path: str, f: h5py.File, notes: list[str], is_netcdf4: bool) -> _Record:
    dsid = ds.id
    plist = dsid.get_create_plist()
    layout = plist.get_layout()
    is_scale = bool(h5py.h5ds.is_scale(dsid))
    ds_shape, dtype, ds_chunks = ds.shape, ds.dtype, ds.chunks  # each a call into HDF5: asked once
    shape = tuple(int(n) for n in ds_shape) if ds_shape is not None else (0,)
    attached: list[tuple[int, ...]] = []
    if not is_scale and h5py.h5a.exists(dsid, b"DIMENSION_LIST"):
        for axis in range(len(shape) if ds_shape is not None else 0):
            try:
                attached.append(_attached(dsid, axis))
            except (OSError, RuntimeError, ValueError, KeyError):
                attached.append(())
    maxshape = ds.maxshape
    info = dict(
        path=path,
        shape=shape,
        dtype=dtype,
        kind=classify_dtype(dtype),
        layout=_LAYOUTS.get(layout, "other"),
        chunks=tuple(ds_chunks) if ds_chunks else None,
        filters=_filters(plist),
        fill_value=_fill_value(ds),
        is_scale=is_scale,
        **_storage(ds, f, layout, ds_shape, ds_chunks),
        enum_mapping=h5py.check_enum_dtype(dtype),
        external=_is_external(plist),
        null_space=ds_shape is None,
        offset=dsid.get_offset() if layout == h5py.h5d.CONTIGUOUS else None,
        maxshape=tuple(maxshape) if maxshape is not None and ds_shape is not None else None,
    )
    dim_only = is_scale and attr_text(ds, "NAME").startswith(NETCDF_DIM_ONLY_PREFIX)
    attrs = convert_attrs(read_attrs(ds, f, notes, is_scale, plist), f, is_netcdf4)
    return _Record(path, info, attrs, is_scale, dim_only, shape, tuple(attached))


def _storage(ds: h5py.Dataset, f: h5py.File, layout: int, shape: tuple[int, ...] | None,
             chunks: tuple[int, ...] | None) -> dict[str, Any]:
    """Bytes the dataset stores (``storage_bytes``), and the index of a chunked dataset
    of at most :data:`~layoutkit.hdf5.chunk_index.MAX_CHUNKS_FOR_H5PY` chunks
    (``chunk_entries``). HDF5 walks a chunked dataset's index for its storage size, one
    node at a time; for few chunks the walk here also keeps what it finds, so that the
    readers of the copy need not ask h5py again (in a bucket that was most of a shot
    archive's convert: every thread waiting on h5py's lock for one index after another).
    In a bucket a many-chunk index is read level by level instead."""
    fileobj = getattr(f, "_fileobj", None)
    entries = entries_in_bucket(ds, fileobj) if fileobj is not None else None
    if entries is not None:
        return {"storage_bytes": sum(size for _, size, _ in entries.values())}
    if layout == h5py.h5d.CHUNKED and shape and chunks and chunk_count(shape, chunks) <= MAX_CHUNKS_FOR_H5PY:
        found: list[tuple[tuple[int, ...], int, int, int]] = []
        try:
            ds.id.chunk_iter(lambda c: found.append((tuple(c.chunk_offset), c.byte_offset, c.size, c.filter_mask)))
        except AttributeError:  # HDF5 older than 1.14: no chunk_iter
            pass
        else:
            return {"storage_bytes": sum(size for _, _, size, _ in found), "chunk_entries": tuple(found)}
    return {"storage_bytes": int(ds.id.get_storage_size())}


def _attached(dsid: h5py.h5d.DatasetID, axis: int) -> tuple[int, ...]:
    """Object addresses of the scales attached to one axis. (``ds.dims[axis].values()``
    makes a Dataset of each and asks each for its name: 3x slower.)"""
    found: list[int] = []
    h5py.h5ds.iterate(dsid, axis, lambda scale: found.append(h5py.h5o.get_info(scale).addr))
    return tuple(found)


PARALLEL_MIN_DATASETS = 3000


def _records(source: str, paths: list[str], is_netcdf4: bool) -> list[tuple[_Record, list[str]]]:
    """Records of ``paths``, in order, each with the notes reading it made; read in this
    process (a walker's whole job)."""
    out = []
    with open_h5(source) as f:
        for p in paths:
            notes: list[str] = []
            out.append((_record(f[p], p, f, notes, is_netcdf4), notes))
    return out


def _links(group: h5py.Group) -> list[tuple[bytes, int]]:
    """A group's links, ``(name, link type)``, in the order h5py lists them."""
    gid = group.id
    return [(name, gid.links.get_info(name).type) for name in gid]


class _Walk:
    """One walk of a file's hierarchy: groups and their attributes, links, and the paths
    of its datasets (whose records are read afterwards, here or in walker processes)."""

    def __init__(self, f: h5py.File, workers: int) -> None:
        self.f = f
        self.notes: list[str] = []
        self.groups: list[GroupInfo] = []
        self.dataset_paths: list[str] = []
        self.links: list[LinkInfo] = []
        self.seen: dict[int, str] = {}  # object address -> the first path the walk reached it by
        self.raw_attrs: dict[str, dict[str, Any]] = {}
        self.netcdf_hints = ["_NCProperties" in f.attrs]
        self.walkers = Walkers(workers) if workers > 1 else None

    def visit(self, group: h5py.Group, group_path: str) -> None:
        # paths are tracked here: h5py's .name asks HDF5 to search for one (slow)
        self.raw_attrs[group_path] = read_attrs(group, self.f, self.notes)
        self.groups.append(GroupInfo(group_path, {}))
        for raw_name, kind in _links(group):
            name = decoded_name(raw_name)
            if kind == h5py.h5l.TYPE_HARD and isinstance(name, str):
                self.hard(group, raw_name, group_path.rstrip("/") + "/" + name)
            else:
                self.other(group, name, group_path)

    def hard(self, group: h5py.Group, raw_name: bytes, child_path: str) -> None:
        """A hard link: its address from the link (asked here, per link), its kind from
        the identifier HDF5 opens; a second link to a seen object opens nothing. Opening
        every object through h5py took 6x as long (2.4 s for 24,387 objects). Memory,
        measured with HDF5 2.0 on the 500-shot sample (47,350 datasets): ``h5o.get_info``
        by name peaked at 726 MiB (each call holds ~7 kB until the file closes), and
        reading every link's address up front in :func:`_links` at 652 MiB; this walk
        peaks at 226 MiB (the walk before either change: 265 MiB)."""
        addr = group.id.links.get_info(raw_name).u
        if addr in self.seen:
            self.links.append(LinkInfo(child_path, "hard", self.seen[addr]))
            return
        try:
            oid = h5py.h5o.open(group.id, raw_name)
        except (KeyError, OSError) as exc:
            self.notes.append(f"{child_path}: unreadable object ({first_line(exc)})")
            return
        self.seen[addr] = child_path
        if isinstance(oid, h5py.h5g.GroupID):
            self.visit(h5py.Group(oid), child_path)
        elif isinstance(oid, h5py.h5d.DatasetID):
            if len(self.dataset_paths) < 50:
                if h5py.h5a.exists(oid, b"_Netcdf4Dimid") or h5py.h5a.exists(oid, b"_Netcdf4Coordinates"):
                    self.netcdf_hints.append(True)
            self.add_dataset(child_path)
        else:  # committed datatype
            self.notes.append(f"{child_path}: committed datatype (recorded, not an array)")

    def other(self, group: h5py.Group, name: Any, group_path: str) -> None:
        """A soft, external or user-defined link, or a name that is not UTF-8, as h5py
        sees it."""
        child_path = group_path.rstrip("/") + "/" + name
        link = group.get(name, getlink=True)
        if isinstance(link, h5py.SoftLink):
            self.links.append(LinkInfo(child_path, "soft", link.path))
            return
        if isinstance(link, h5py.ExternalLink):
            self.links.append(LinkInfo(child_path, "external", link.path, link.filename))
            return
        try:
            obj = group[name]
        except (KeyError, OSError) as exc:
            self.notes.append(f"{child_path}: unreadable object ({first_line(exc)})")
            return
        addr = h5py.h5o.get_info(obj.id).addr
        if addr in self.seen:
            self.links.append(LinkInfo(child_path, "hard", self.seen[addr]))
            return
        self.seen[addr] = child_path
        if isinstance(obj, h5py.Group):
            self.visit(obj, child_path)
        elif isinstance(obj, h5py.Dataset):
            if len(self.dataset_paths) < 50 and ("_Netcdf4Dimid" in obj.attrs or "_Netcdf4Coordinates" in obj.attrs):
                self.netcdf_hints.append(True)
            self.add_dataset(child_path)
        else:  # committed datatype
            self.notes.append(f"{child_path}: committed datatype (recorded, not an array)")

    def add_dataset(self, path: str) -> None:
        self.dataset_paths.append(path)
        if self.walkers is not None and len(self.dataset_paths) == PARALLEL_MIN_DATASETS:
            self.walkers.start()  # their start overlaps the rest of the walk

    def records(self, source_path: str, is_netcdf4: bool) -> list[_Record]:
        """Every dataset's record, in walk order: in the walkers when there are many."""
        if self.walkers is not None and len(self.dataset_paths) >= PARALLEL_MIN_DATASETS:
            read = self.walkers.map(_records, str(source_path), self.dataset_paths, is_netcdf4)
            self.notes.extend(n for _, ns in read for n in ns)
            return [r for r, _ in read]
        return [_record(self.f[p], p, self.f, self.notes, is_netcdf4) for p in self.dataset_paths]

    def inventory(self, source_path: str, records: list[_Record], is_netcdf4: bool) -> Inventory:
        # canonical paths of hard-linked objects: the first path the walk reached
        dims = _dimension_names(records, self.seen)
        address = {path: addr for addr, path in self.seen.items()}
        arrays = []
        for rec in records:
            names, scales = dims[rec.path]
            arrays.append(ArrayInfo(**rec.info, attrs=rec.attrs, dims=names, dim_scales=scales,
                                    dim_only=is_netcdf4 and rec.dim_only, address=address.get(rec.path)))
        groups = [GroupInfo(g.path, convert_attrs(self.raw_attrs[g.path], self.f, is_netcdf4)) for g in self.groups]
        return Inventory(
            path=str(source_path),
            userblock_size=int(self.f.userblock_size),
            is_netcdf4=is_netcdf4,
            groups=tuple(groups),
            arrays=tuple(arrays),
            links=tuple(self.links),
            attr_notes=tuple(self.notes),
        )


def _walk(f: h5py.File, source_path: str, workers: int = 1) -> Inventory:
    walk = _Walk(f, workers)
    try:
        walk.visit(f, "/")
        is_netcdf4 = any(walk.netcdf_hints)
        records = walk.records(source_path, is_netcdf4)
    finally:
        if walk.walkers is not None:
            walk.walkers.close()
    return walk.inventory(source_path, records, is_netcdf4)


def _dimension_names(
    records: list[_Record], canonical: dict[int, str]
) -> dict[str, tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]]:
    """Name every axis of every dataset.

    An axis with an attached dimension scale takes the scale's name (its basename, as
    netCDF-4 and h5netcdf do); a dimension scale names its own first axis. Axes
    without a scale get ``phony_dim_N`` numbered per group, as h5netcdf's
    ``phony_dims="sort"`` does. Within one group a name always means one length:
    a clash gets a ``_N`` suffix so xarray can open the group.
    """
    out: dict[str, tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]] = {}
    by_group: dict[str, list[_Record]] = defaultdict(list)
    for rec in records:
        by_group[rec.path.rsplit("/", 1)[0] or "/"].append(rec)
    # xarray's DataTree needs a name to mean one length in a group and all its
    # ancestors, so phony names are numbered across the file and clashes are checked
    # against what the ancestors already define.
    visible: dict[str, dict[str, int]] = {}
    counter = 0

    def inherited(group_path: str) -> dict[str, int]:
        parts = [p for p in group_path.split("/") if p]
        for depth in range(len(parts) - 1, -1, -1):
            ancestor = "/" + "/".join(parts[:depth])
            if ancestor in visible:
                return visible[ancestor]
        return {}

    for group_path in sorted(by_group, key=lambda g: (g.count("/") if g != "/" else 0, g)):
        members = by_group[group_path]
        group_sizes = dict(inherited(group_path))
        phony: dict[int, list[str]] = defaultdict(list)
        for rec in sorted(members, key=lambda r: r.path):
            path, shape, is_scale, dim_only = rec.path, rec.shape, rec.is_scale, rec.dim_only
            names: list[str] = []
            scales: list[tuple[str, ...]] = []
            used_sizes: dict[int, int] = defaultdict(int)
            for axis, size in enumerate(shape):
                addrs = rec.attached[axis] if axis < len(rec.attached) else ()
                attached = tuple(canonical[a] for a in addrs if a in canonical)
                scales.append(attached)
                if is_scale and axis == 0:
                    name = path.rsplit("/", 1)[-1]
                elif attached:
                    name = attached[0].rsplit("/", 1)[-1]
                else:
                    k = used_sizes[size]
                    used_sizes[size] += 1
                    if k < len(phony[size]):
                        name = phony[size][k]
                    else:
                        name = f"phony_dim_{counter}"
                        counter += 1
                        phony[size].append(name)
                base, n = name, 1
                while (name in group_sizes and group_sizes[name] != size) or name in names:
                    name = f"{base}_{n}"
                    n += 1
                if not dim_only:  # a netCDF dimension without a variable binds no length
                    group_sizes[name] = size
                names.append(name)
            out[path] = (tuple(names), tuple(scales))
        visible[group_path] = group_sizes
    return out
