"""Walk an HDF5 source into plain frozen dataclasses.

:func:`open_source` checks that a path is a readable HDF5 file and says plainly what is
wrong when it is not; :func:`read_inventory` walks the whole hierarchy once (groups,
datasets, attributes, links, dimension scales, filters, chunking) and returns an
:class:`Inventory` that planning works from without touching the file again.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import hdf5plugin  # noqa: F401  (registers third-party HDF5 filters: zstd, lz4, bitshuffle, blosc...)
import numpy as np

from layoutkit.errors import (
    CorruptSourceError,
    LayoutkitError,
    NotHDF5Error,
    SourceIsDirectoryError,
    SourceNotFoundError,
)
from layoutkit.hdf5.chunk_index import MAX_CHUNKS_FOR_H5PY, chunk_count, entries_in_bucket
from layoutkit.hdf5.filters import filter_name
from layoutkit.hdf5.walkers import Walkers
from layoutkit.storage import ObjectSource, describe_store_error

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
NETCDF3_MAGICS = (b"CDF\x01", b"CDF\x02", b"CDF\x05")

# Attributes that HDF5 and netCDF-4 use for their own bookkeeping. Their meaning is
# carried by structure (dimension names, coordinate arrays, fill values), not copied.
DIMENSION_SCALE_ATTRS = frozenset({"CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST"})
NETCDF4_INTERNAL_ATTRS = frozenset(
    {"_Netcdf4Dimid", "_Netcdf4Coordinates", "_nc3_strict", "_NCProperties", "_IsNetcdf4"}
)
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


def _find_signature(read: Any, size: int) -> int | None:
    """Return the offset of the HDF5 signature (0, 512, 1024, ...) or None;
    ``read(offset, n)`` reads the file's bytes."""
    offset = 0
    while offset + 8 <= size:
        if read(offset, 8) == HDF5_SIGNATURE:
            return offset
        offset = 512 if offset == 0 else offset * 2
    return None


def _check_object_source(source: ObjectSource) -> ObjectSource:
    try:
        size = source.size()
    except FileNotFoundError:
        raise SourceNotFoundError(f"Source {source.url!r} does not exist.") from None
    except LayoutkitError:  # already one sentence (storage options that set up no store)
        raise
    except Exception as exc:  # obstore's errors: say what the store answered
        raise CorruptSourceError(f"Source {describe_store_error(source.url, exc)}") from None
    if source.read_range(0, min(4, size))[:4] in NETCDF3_MAGICS:
        raise NotHDF5Error(f"Source {source.url!r} is a netCDF-3 classic file, not HDF5 or netCDF-4.")
    if _find_signature(source.read_range, size) is None:
        raise NotHDF5Error(f"Source {source.url!r} is not an HDF5 file (no HDF5 signature found).")
    return source


def check_source(path: str | os.PathLike) -> Path:
    """Check that ``path`` names a readable HDF5 file.

    Raises
    ------
    SourceNotFoundError, SourceIsDirectoryError, NotHDF5Error, CorruptSourceError
    """
    if isinstance(path, ObjectSource):
        return _check_object_source(path)  # type: ignore[return-value]
    p = Path(path)
    if not p.exists() and re.match(r"^[a-z][a-z0-9+.-]*:/", str(path)):  # "s3://b/k", or "s3:/b/k" once a Path
        url = re.sub(r"^([a-z][a-z0-9+.-]*):/+", r"\1://", str(path))
        raise SourceNotFoundError(
            f"Source {url!r} is a URL given as a local path; pass it as text, e.g. "
            "layoutkit.storage.as_source(url, storage_options), to read it from its bucket."
        )
    if not p.exists():
        raise SourceNotFoundError(f"Source {str(p)!r} does not exist.")
    if p.is_dir():
        raise SourceIsDirectoryError(f"Source {str(p)!r} is a directory, not an HDF5 file.")
    try:
        with open(p, "rb") as fh:
            head = fh.read(8)
    except PermissionError:
        raise CorruptSourceError(f"Source {str(p)!r} cannot be read (permission denied).") from None
    if head[:4] in NETCDF3_MAGICS:
        raise NotHDF5Error(
            f"Source {str(p)!r} is a netCDF-3 classic file, not HDF5 or netCDF-4; "
            "convert it first with: nccopy -k nc4 IN OUT."
        )
    with open(p, "rb") as fh:
        found = _find_signature(lambda offset, n: (fh.seek(offset), fh.read(n))[1], p.stat().st_size)
    if found is None:
        raise NotHDF5Error(f"Source {str(p)!r} is not an HDF5 file (no HDF5 signature found).")
    return p


class _FileOverObject(h5py.File):
    """An HDF5 file in a bucket, read through its block-cached file object, which closes
    with it: h5py never closes a file object it was given, so the object's shared blocks
    were let go only when h5py dropped its reference, not when the file closed."""

    def __init__(self, source: ObjectSource, **kwargs: Any) -> None:
        fileobj = source.open_file()
        try:
            super().__init__(fileobj, "r", **kwargs)
        except BaseException:
            fileobj.close()
            raise
        self._fileobj = fileobj

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._fileobj.close()


def open_h5(source: str | os.PathLike | ObjectSource, **kwargs: Any) -> h5py.File:
    """Open an HDF5 file read-only, local or in a bucket, without :func:`check_source`.
    Keyword arguments go to :class:`h5py.File` (e.g. ``page_buf_size``)."""
    if isinstance(source, ObjectSource):  # metadata through a block-cached file object
        return _FileOverObject(source, **kwargs)
    return h5py.File(source, "r", **kwargs)


def open_source(path: str | os.PathLike, **kwargs: Any) -> h5py.File:
    """Open an HDF5 source read-only after :func:`check_source`.

    Keyword arguments go to :class:`h5py.File` (e.g. ``page_buf_size``).
    """
    p = check_source(path)
    try:
        return open_h5(p, **kwargs)
    except OSError as exc:
        raise CorruptSourceError(
            f"Source {str(p)!r} has an HDF5 signature but cannot be opened "
            f"(truncated or damaged: {first_line(exc)})."
        ) from None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, for one-sentence errors."""
    text = str(exc).strip().splitlines()
    return text[0].rstrip(".") if text else type(exc).__name__


# ---------------------------------------------------------------------------------
# attributes


def attr_to_json(value: Any, file: h5py.File | None = None) -> Any:
    """Convert an HDF5 attribute value to a JSON-ready Python value.

    Numbers and arrays become numbers and lists, bytes become text (base64 with a
    ``base64:`` prefix when not UTF-8), object references become the referenced path,
    compound values become dicts, empty attributes become ``None``.
    """
    if isinstance(value, h5py.Empty):
        # netCDF writes an empty text attribute as a null-space string
        return "" if value.dtype.kind in "SU" else None
    if isinstance(value, (h5py.Reference, h5py.RegionReference)):
        if not value or file is None:
            return None
        try:
            return file[value].name
        except (KeyError, ValueError, OSError):
            return None
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(value).decode()
    if isinstance(value, np.ndarray):
        if value.dtype.names:
            if value.ndim == 0:
                return attr_to_json(value[()], file)
            return [attr_to_json(v, file) for v in value]
        if value.dtype.kind in "SOUV":
            return [attr_to_json(v, file) for v in value.reshape(-1)] if value.ndim else attr_to_json(value[()], file)
        return _json_numbers(value.tolist())
    if isinstance(value, np.void) and value.dtype.names:
        return {k: attr_to_json(value[k], file) for k in value.dtype.names}
    if isinstance(value, np.void):
        return "base64:" + base64.b64encode(value.tobytes()).decode()
    if isinstance(value, np.generic):
        return _json_numbers(value.item())
    if isinstance(value, (list, tuple)):
        return [attr_to_json(v, file) for v in value]
    return value


def _json_numbers(v: Any) -> Any:
    if isinstance(v, list):
        return [_json_numbers(x) for x in v]
    if isinstance(v, complex):
        return [v.real, v.imag]
    if isinstance(v, bytes):
        return attr_to_json(v)
    return v


# An attribute's type in the file (H5Tencode) -> its NumPy dtype, the memory type h5py
# reads it as, and whether it is a string: h5py works these out again for every attribute.
_ATTR_TYPES: dict[bytes, tuple[np.dtype, Any, Any]] = {}
_ATTR_TYPES_MAX = 4096


def attribute_value(oid: Any, name: str | bytes) -> Any:
    """``obj.attrs[name]``, exactly as h5py's AttributeManager reads it, with what h5py
    works out from the attribute's type (its NumPy dtype, the memory type, whether it is
    a string) looked up once per distinct type. Converting the type again for every
    attribute was a third of reading them: a shot archive has 5-7 per dataset, of a
    handful of types."""
    return attribute(oid, name)[0]


def attribute(oid: Any, name: str | bytes) -> tuple[Any, np.dtype]:
    """``(obj.attrs[name], obj.attrs.get_id(name).dtype)``, the attribute opened once:
    see :func:`attribute_value`."""
    attr = h5py.h5a.open(oid, name.encode("utf8") if isinstance(name, str) else name)
    shape = attr.shape
    if shape is None:  # an empty dataspace
        dtype = attr.dtype
        return h5py.Empty(dtype), dtype
    tid = attr.get_type()
    try:
        key: bytes | None = tid.encode()
    except (TypeError, ValueError, RuntimeError):  # a type HDF5 cannot serialise
        key = None
    known = _ATTR_TYPES.get(key) if key is not None else None
    if known is None:
        dtype = tid.dtype
        known = (dtype, h5py.h5t.py_create(dtype), h5py.h5t.check_string_dtype(dtype))
        if key is not None:
            if len(_ATTR_TYPES) >= _ATTR_TYPES_MAX:
                _ATTR_TYPES.clear()
            _ATTR_TYPES[key] = known
    attr_dtype, htype, string_info = known
    dtype = attr_dtype
    if dtype.subdtype is not None:  # NumPy has no top-level array type: h5py's shape
        subdtype, subshape = dtype.subdtype
        shape, dtype = shape + subshape, subdtype
    arr = np.zeros(shape, dtype=dtype, order="C")
    attr.read(arr, mtype=htype)
    if string_info and string_info.length is None:  # variable-length strings become str
        arr = np.array([b.decode("utf-8", "surrogateescape") for b in arr.flat], dtype=dtype).reshape(arr.shape)
    if arr.ndim == 0:
        return arr[()], attr_dtype
    return arr, attr_dtype


def attribute_names(oid: Any, plist: Any = None) -> list[str | bytes]:
    """An object's attribute names, in the order h5py's AttributeManager lists them
    (creation order where the object tracks it, else by name), as text where they are
    UTF-8. ``plist``: the object's creation property list, when the caller holds it
    (h5py copies it out of the file again for every listing)."""
    if isinstance(oid, h5py.h5f.FileID):  # the root group's, as h5py's File.attrs lists them
        oid = h5py.h5o.open(oid, b"/")
    cpl = plist if plist is not None else oid.get_create_plist()
    tracked = cpl.get_attr_creation_order() & h5py.h5p.CRT_ORDER_TRACKED
    names: list[str | bytes] = []
    h5py.h5a.iterate(oid, lambda name, *_: names.append(_decoded(name)),
                     index_type=h5py.h5.INDEX_CRT_ORDER if tracked else h5py.h5.INDEX_NAME)
    return names


def read_attrs(obj: h5py.HLObject, file: h5py.File, notes: list[str], is_scale: bool | None = None,
               plist: Any = None) -> dict[str, Any]:
    """An object's attributes as h5py reads them, without the netCDF-4 and dimension-scale
    bookkeeping; unreadable ones are left out and noted in ``notes``. ``is_scale``:
    whether the object is a dimension scale, and ``plist``: its creation property list,
    when the caller knows them."""
    out: dict[str, Any] = {}
    for name in attribute_names(obj.id, plist):
        if name in NETCDF4_INTERNAL_ATTRS:
            continue
        if name in DIMENSION_SCALE_ATTRS and _is_scale_bookkeeping(obj, name, is_scale):
            continue
        try:
            raw = attribute_value(obj.id, name)
        except (OSError, TypeError, ValueError) as exc:
            notes.append(f"{obj.name}@{name}: unreadable attribute ({first_line(exc)})")
            continue
        out[name] = raw
    return out


def _is_scale_bookkeeping(obj: h5py.HLObject, name: str, is_scale: bool | None = None) -> bool:
    if name in ("DIMENSION_LIST", "REFERENCE_LIST"):
        return True
    if not isinstance(obj, h5py.Dataset):
        return False
    return bool(h5py.h5ds.is_scale(obj.id)) if is_scale is None else is_scale


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
    dim_only = is_scale and _attr_text(ds, "NAME").startswith(NETCDF_DIM_ONLY_PREFIX)
    attrs = _convert_attrs(read_attrs(ds, f, notes, is_scale, plist), f, is_netcdf4)
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


def _decoded(name: bytes) -> str | bytes:
    """A link name as h5py gives it: text when it is UTF-8, else the bytes."""
    try:
        return name.decode("utf8")
    except UnicodeDecodeError:
        return name


def _walk(f: h5py.File, source_path: str, workers: int = 1) -> Inventory:
    notes: list[str] = []
    groups: list[GroupInfo] = []
    dataset_paths: list[str] = []
    links: list[LinkInfo] = []
    seen: dict[int, str] = {}
    raw_attrs: dict[str, dict[str, Any]] = {}
    netcdf_hints = ["_NCProperties" in f.attrs]
    walkers = Walkers(workers) if workers > 1 else None

    def visit(group: h5py.Group, group_path: str) -> None:
        # paths are tracked here: h5py's .name asks HDF5 to search for one (slow)
        raw_attrs[group_path] = read_attrs(group, f, notes)
        groups.append(GroupInfo(group_path, {}))
        for raw_name, kind in _links(group):
            name = _decoded(raw_name)
            if kind == h5py.h5l.TYPE_HARD and isinstance(name, str):
                hard(group, raw_name, group_path.rstrip("/") + "/" + name)
            else:
                other(group, name, group_path)

    def hard(group: h5py.Group, raw_name: bytes, child_path: str) -> None:
        """A hard link: its address from the link (asked here, per link), its kind from
        the identifier HDF5 opens; a second link to a seen object opens nothing. Opening
        every object through h5py took 6x as long (2.4 s for 24,387 objects). Memory,
        measured with HDF5 2.0 on the 500-shot sample (47,350 datasets): ``h5o.get_info``
        by name peaked at 726 MiB (each call holds ~7 kB until the file closes), and
        reading every link's address up front in :func:`_links` at 652 MiB; this walk
        peaks at 226 MiB (the walk before either change: 265 MiB)."""
        addr = group.id.links.get_info(raw_name).u
        if addr in seen:
            links.append(LinkInfo(child_path, "hard", seen[addr]))
            return
        try:
            oid = h5py.h5o.open(group.id, raw_name)
        except (KeyError, OSError) as exc:
            notes.append(f"{child_path}: unreadable object ({first_line(exc)})")
            return
        seen[addr] = child_path
        if isinstance(oid, h5py.h5g.GroupID):
            visit(h5py.Group(oid), child_path)
        elif isinstance(oid, h5py.h5d.DatasetID):
            if len(dataset_paths) < 50:
                if h5py.h5a.exists(oid, b"_Netcdf4Dimid") or h5py.h5a.exists(oid, b"_Netcdf4Coordinates"):
                    netcdf_hints.append(True)
            dataset_paths.append(child_path)
            if walkers is not None and len(dataset_paths) == PARALLEL_MIN_DATASETS:
                walkers.start()
        else:  # committed datatype
            notes.append(f"{child_path}: committed datatype (recorded, not an array)")

    def other(group: h5py.Group, name: Any, group_path: str) -> None:
        """A soft, external or user-defined link, or a name that is not UTF-8, as h5py
        sees it."""
        child_path = group_path.rstrip("/") + "/" + name
        link = group.get(name, getlink=True)
        if isinstance(link, h5py.SoftLink):
            links.append(LinkInfo(child_path, "soft", link.path))
            return
        if isinstance(link, h5py.ExternalLink):
            links.append(LinkInfo(child_path, "external", link.path, link.filename))
            return
        try:
            obj = group[name]
        except (KeyError, OSError) as exc:
            notes.append(f"{child_path}: unreadable object ({first_line(exc)})")
            return
        addr = h5py.h5o.get_info(obj.id).addr
        if addr in seen:
            links.append(LinkInfo(child_path, "hard", seen[addr]))
            return
        seen[addr] = child_path
        if isinstance(obj, h5py.Group):
            visit(obj, child_path)
        elif isinstance(obj, h5py.Dataset):
            if len(dataset_paths) < 50 and ("_Netcdf4Dimid" in obj.attrs or "_Netcdf4Coordinates" in obj.attrs):
                netcdf_hints.append(True)
            dataset_paths.append(child_path)
        else:  # committed datatype
            notes.append(f"{child_path}: committed datatype (recorded, not an array)")

    try:
        visit(f, "/")
        is_netcdf4 = any(netcdf_hints)
        if walkers is not None and len(dataset_paths) >= PARALLEL_MIN_DATASETS:
            read = walkers.map(_records, str(source_path), dataset_paths, is_netcdf4)
            records, more_notes = [r for r, _ in read], [n for _, ns in read for n in ns]
        else:
            records = [_record(f[p], p, f, notes, is_netcdf4) for p in dataset_paths]
            more_notes = []
    finally:
        if walkers is not None:
            walkers.close()
    notes.extend(more_notes)
    # canonical paths of hard-linked objects: the first path the walk reached
    dims = _dimension_names(records, seen)
    address = {path: addr for addr, path in seen.items()}
    arrays = []
    for rec in records:
        names, scales = dims[rec.path]
        arrays.append(
            ArrayInfo(
                **rec.info,
                attrs=rec.attrs,
                dims=names,
                dim_scales=scales,
                dim_only=is_netcdf4 and rec.dim_only,
                address=address.get(rec.path),
            )
        )
    groups = [GroupInfo(g.path, _convert_attrs(raw_attrs[g.path], f, is_netcdf4)) for g in groups]
    return Inventory(
        path=str(source_path),
        userblock_size=int(f.userblock_size),
        is_netcdf4=is_netcdf4,
        groups=tuple(groups),
        arrays=tuple(arrays),
        links=tuple(links),
        attr_notes=tuple(notes),
    )


def _convert_attrs(raw: dict[str, Any], f: h5py.File, is_netcdf4: bool) -> dict[str, Any]:
    out = {k: attr_to_json(v, f) for k, v in raw.items()}
    if is_netcdf4:
        # netCDF attributes are 1-D arrays and a 1-element one is a scalar in its data
        # model (ncdump, netCDF4-python and h5netcdf all show it so)
        out = {k: v[0] if isinstance(v, list) and len(v) == 1 else v for k, v in out.items()}
    return out


def _attr_text(obj: h5py.HLObject, name: str) -> str:
    v = obj.attrs.get(name)
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, np.ndarray) and v.size == 1:
        v = v.reshape(-1)[0]
        return v.decode(errors="replace") if isinstance(v, bytes) else str(v)
    return "" if v is None else str(v)


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
