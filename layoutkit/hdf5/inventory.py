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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h5py
import hdf5plugin  # noqa: F401  (registers third-party HDF5 filters: zstd, lz4, bitshuffle, blosc...)
import numpy as np

from layoutkit.errors import (
    CorruptSourceError,
)
from layoutkit.hdf5.attrs import attr_text, convert_attrs, read_attrs, reference_text
from layoutkit.hdf5.chunk_index import (
    MAX_CHUNKS_FOR_H5PY,
    chunk_count,
    direct_chunk,
    entries_in_bucket,
    index_disagreement,
    index_problem,
    sparse_candidate,
    sparse_storage,
)
from layoutkit.hdf5.files import external_prefix, first_line, open_h5, open_source
from layoutkit.hdf5.filters import filter_name
from layoutkit.hdf5.libhdf5 import DONT_FILTER_PARTIAL_CHUNKS, chunk_opts
from layoutkit.hdf5.model import (
    ArrayInfo,
    DatatypeInfo,
    FilterInfo,
    GroupInfo,
    Inventory,
    LinkInfo,
    MappedBlock,
    measured_members,
    member_values,
)
from layoutkit.hdf5.walk import PARALLEL_MIN_DATASETS, LinkWalk
from layoutkit.storage import ObjectSource, SourceLike

NETCDF_DIM_ONLY_PREFIX = "This is a netCDF dimension but not a netCDF variable"

def classify_dtype(dtype: np.dtype) -> str:
    """Name the kind of an h5py dtype (see :class:`ArrayInfo`)."""
    if h5py.check_enum_dtype(dtype) is not None:
        return "enum"
    ref = h5py.check_ref_dtype(dtype)
    if ref is h5py.RegionReference:
        return "region-reference"
    if ref is not None:
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


STORAGE_LAYOUTS = {
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


_PADDING = {h5py.h5t.STR_NULLTERM: "nullterm", h5py.h5t.STR_SPACEPAD: "spacepad"}


def string_padding(tid: Any) -> str | None:
    """A fixed-length string type's padding when HDF5 converts it on reading ("nullterm",
    "spacepad"); None for NUL padding (what h5py writes and reads: bytes as stored) and
    for any other type."""
    if not isinstance(tid, h5py.h5t.TypeStringID) or tid.is_variable_str():
        return None
    return _PADDING.get(tid.get_strpad())


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


def read_inventory(path: SourceLike, workers: int = 1) -> Inventory:
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


def _record(ds: h5py.Dataset, path: str, f: h5py.File, notes: list[str], is_netcdf4: bool,
            pread: Callable[[int, int], bytes] | None = None) -> _Record:
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
    tid = dsid.get_type()
    info = dict(
        path=path,
        shape=shape,
        dtype=dtype,
        kind=classify_dtype(dtype),
        layout=STORAGE_LAYOUTS.get(layout, "other"),
        chunks=tuple(ds_chunks) if ds_chunks else None,
        filters=_filters(plist),
        fill_value=_fill_value(ds),
        is_scale=is_scale,
        **_storage(ds, f, layout, ds_shape, ds_chunks, dtype.itemsize, pread),
        enum_mapping=h5py.check_enum_dtype(dtype),
        external=_is_external(plist),
        null_space=ds_shape is None,
        offset=dsid.get_offset() if layout == h5py.h5d.CONTIGUOUS else None,
        maxshape=tuple(maxshape) if maxshape is not None and ds_shape is not None else None,
        strpad=string_padding(tid) if dtype.kind == "S" else None,
    )
    if layout == h5py.h5d.VIRTUAL:
        info["unmapped"] = _unmapped(ds, f)
        info["mapped"] = _mapped_blocks(ds, f) if info["unmapped"] is None else None
    elif info["external"]:
        info["unmapped"] = _external_missing(plist, f)
    if dtype.base.names and (members := measured_members(dtype.base)):  # (an array type's elements')
        # (a null dataspace holds no value to measure: each at its least)
        info["text_widths"] = _text_widths(ds, members) if ds_shape is not None else tuple((m, 1) for m in members)
    if tid.committed():  # resolved to a path once the walk is done (:func:`_inventory`)
        info["type_path"] = h5py.h5o.get_info(tid).addr
    if layout == h5py.h5d.CHUNKED and info["filters"] and chunk_opts(plist) & DONT_FILTER_PARTIAL_CHUNKS:
        info["raw_fallback"] = "its partial edge chunks are stored unfiltered"
    if info.get("raw_fallback"):
        notes.append(f"{path}: read through HDF5's own read, not as raw chunks ({info['raw_fallback']})")
    dim_only = is_scale and attr_text(ds, "NAME").startswith(NETCDF_DIM_ONLY_PREFIX)
    attrs = convert_attrs(read_attrs(ds, f, notes, is_scale, plist), f, is_netcdf4)
    return _Record(path, info, attrs, is_scale, dim_only, shape, tuple(attached))


TEXT_WIDTH_ROWS = 1 << 16
"""Rows of a compound read at a time to measure its variable-length string members."""


def _text_widths(ds: h5py.Dataset, members: list[str]) -> tuple[tuple[str, int], ...] | None:
    """The longest value (UTF-8 bytes, or a sequence's values' bytes; at least 1) of each
    variable-length string or sequence member of a compound, read over the whole dataset
    (the Zarr layouts store such a member at that fixed length); None where HDF5 cannot
    read it (its planning refuses it then)."""
    widths = dict.fromkeys(members, 1)
    tops = list(dict.fromkeys(m.split("/")[0] for m in members))  # the top-level members that hold them
    rows = ds if ds.dtype.subdtype is not None else ds.fields(tops)  # an array type of compounds: read whole
    try:
        if not ds.shape:
            blocks: Any = [rows[()]]
        else:
            blocks = (rows[i:i + TEXT_WIDTH_ROWS] for i in range(0, ds.shape[0], TEXT_WIDTH_ROWS))
        for block in blocks:
            block = np.asarray(block)
            for name in members:
                wrapped = block.dtype.names and name.split("/")[0] in block.dtype.names
                values = member_values(block, name) if wrapped else block
                for v in np.asarray(values).reshape(-1):
                    if isinstance(v, h5py.Reference):  # a reference member: the path it points at, a region's text
                        v = reference_text(ds.file, v)
                    n = v.nbytes if isinstance(v, np.ndarray) else len(v.encode("utf-8") if isinstance(v, str) else v or b"")
                    widths[name] = max(widths[name], n)
    except (OSError, RuntimeError, ValueError, TypeError):
        return None
    return tuple(widths.items())


def _unmapped(ds: h5py.Dataset, f: h5py.File) -> str | None:
    """The mapped files of a virtual dataset that HDF5 would not find, named (it reads
    their regions as the fill value, without a word): a relative name is looked for
    under ``HDF5_VDS_PREFIX``, beside the file, and from the working directory, as HDF5
    looks. A file in a bucket has none to be found."""
    if getattr(f, "_fileobj", None) is not None:
        return "the files it maps are not read from a bucket"
    here = os.path.dirname(os.path.abspath(f.filename))
    missing = []
    for source in ds.virtual_sources():
        name = source.file_name
        if name == "." or "%" in name:  # this file; a printf-style name (HDF5 expands it, not checked here)
            continue
        if _mapped_file(name, here) is None:
            missing.append(name)
    if not missing:
        return None
    names = sorted(set(missing))
    return f"its mapped file{'s' if len(names) > 1 else ''} {', '.join(names)} {'are' if len(names) > 1 else 'is'} missing"


def _mapped_file(name: str, here: str) -> str | None:
    """Where HDF5 finds a virtual dataset's mapped file ``name`` (an absolute path), or
    None: a relative name under ``HDF5_VDS_PREFIX``, beside the file (``here``), then from
    the working directory."""
    prefix = os.environ.get("HDF5_VDS_PREFIX", "")
    places = [name] if os.path.isabs(name) else [os.path.join(p, name) for p in (prefix, here) if p] + [name]
    return next((os.path.abspath(p) for p in places if os.path.exists(p)), None)


MAPPED_FILES_OPENED = 256
"""A virtual dataset of more mapped files than this is not walked for its mappings (each
is a file opened): it is read through HDF5, written as chunks."""


def _mapped_blocks(ds: h5py.Dataset, f: h5py.File) -> tuple[MappedBlock, ...] | None:
    """The mappings of a virtual dataset when each places a whole dataset of another file
    as one block (:class:`MappedBlock`), found where HDF5 finds them (:func:`_unmapped`);
    None for any other mapping (a selection of the source, a strided or unlimited block,
    this file, a printf-style name)."""
    here = os.path.dirname(os.path.abspath(f.filename))
    opened: dict[str, h5py.File] = {}
    try:
        out = []
        for m in ds.virtual_sources():
            box = _one_block(m.vspace)
            name = m.file_name
            if box is None or m.src_space.get_select_type() != h5py.h5s.SEL_ALL or name == "." or "%" in name:
                return None
            found = _mapped_file(name, here)
            if found is None or (found not in opened and len(opened) >= MAPPED_FILES_OPENED):
                return None
            mapped = (opened.get(found) or opened.setdefault(found, h5py.File(found, "r"))).get(m.dset_name)
            if not isinstance(mapped, h5py.Dataset) or tuple(mapped.shape or ()) != box[1]:
                return None
            dcpl = mapped.id.get_create_plist()
            out.append(MappedBlock(found, m.dset_name, box[0], box[1], STORAGE_LAYOUTS.get(dcpl.get_layout(), "other"),
                                   tuple(mapped.chunks) if mapped.chunks else None, _filters(dcpl), mapped.dtype.str))
        return tuple(out)
    except (OSError, RuntimeError, ValueError, KeyError):
        return None
    finally:
        for g in opened.values():
            g.close()


def _one_block(space: Any) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """A selection that is one block: its corner and shape; None for any other."""
    if space.get_select_type() != h5py.h5s.SEL_HYPERSLABS or not space.is_regular_hyperslab():
        return None
    start, stride, count, block = space.get_regular_hyperslab()
    if all(c == 1 for c in count):
        shape = block
    elif all(b == 1 for b in block) and all(s == 1 for s in stride):
        shape = count
    else:
        return None
    if any(n >= 2**63 for n in shape):  # unlimited
        return None
    return tuple(int(s) for s in start), tuple(int(n) for n in shape)


def _external_missing(plist: h5py.h5p.PropDCID, f: h5py.File) -> str | None:
    """The files of a dataset's external raw storage that are not where
    :func:`~layoutkit.hdf5.files.external_prefix` says HDF5 is to find them, named (HDF5
    would fail the read); None: each is found."""
    prefix = external_prefix(f)
    if prefix is None:
        return "its files are not read from a bucket"
    names = sorted({os.fsdecode(plist.get_external(i)[0]) for i in range(plist.get_external_count())})
    missing = [n for n in names if not os.path.isfile(os.path.join(prefix, n))]
    if not missing:
        return None
    return f"its file{'s' if len(missing) > 1 else ''} {', '.join(missing)} {'are' if len(missing) > 1 else 'is'} missing"


def _storage(ds: h5py.Dataset, f: h5py.File, layout: int, shape: tuple[int, ...] | None,
             chunks: tuple[int, ...] | None, itemsize: int,
             pread: Callable[[int, int], bytes] | None = None) -> dict[str, Any]:
    """Bytes the dataset stores (``storage_bytes``), and the index of a chunked dataset
    of at most :data:`~layoutkit.hdf5.chunk_index.MAX_CHUNKS_FOR_H5PY` chunks
    (``chunk_entries``), with ``pread`` (a walker process's read of the file) also held
    against HDF5's reads of its chunks (``index_checked``: the raw reader's self-check,
    done where the dataset is open already and no thread of the copy waits on h5py's
    lock for it). HDF5 walks a chunked dataset's index for its storage size, one
    node at a time; for few chunks the walk here also keeps what it finds, so that the
    readers of the copy need not ask h5py again (in a bucket that was most of a shot
    archive's convert: every thread waiting on h5py's lock for one index after another).
    In a bucket a many-chunk index is read level by level instead. A dataset declared
    far larger than it is written also gets the regions its data lie in
    (``stored_regions``, :func:`~layoutkit.hdf5.chunk_index.sparse_storage`)."""
    big = bool(shape) and sparse_candidate(tuple(shape or ()), itemsize)
    fileobj = getattr(f, "_fileobj", None)
    entries = entries_in_bucket(ds, fileobj) if fileobj is not None else None
    if entries is not None:
        out: dict[str, Any] = {"storage_bytes": sum(size for _, size, _ in entries.values())}
        return out | (sparse_storage(ds, list(entries)) if big else {})
    if layout == h5py.h5d.CHUNKED and shape and chunks and chunk_count(shape, chunks) <= MAX_CHUNKS_FOR_H5PY:
        found: list[tuple[tuple[int, ...], int, int, int]] = []
        try:
            ds.id.chunk_iter(lambda c: found.append((tuple(c.chunk_offset), c.byte_offset, c.size, c.filter_mask)))
        except AttributeError:  # HDF5 older than 1.14: no chunk_iter
            pass
        else:
            storage = sum(size for _, _, size, _ in found)
            if (problem := index_problem(shape, chunks, (origin for origin, _, _, _ in found))) is not None:
                return {"storage_bytes": storage, "raw_fallback": f"HDF5's chunk index is inconsistent: {problem}"}
            out = {"storage_bytes": storage, "chunk_entries": tuple(found)}
            if pread is not None:
                entries = {origin: (offset, size, mask) for origin, offset, size, mask in found}
                problem, _ = index_disagreement(tuple(shape), tuple(chunks), entries,
                                                lambda origin: direct_chunk(ds, origin), pread)
                out["index_checked"] = problem or ""
            return out | (sparse_storage(ds, [o for o, _, _, _ in found]) if big else {})
    return {"storage_bytes": int(ds.id.get_storage_size())} | (sparse_storage(ds) if big else {})


def _attached(dsid: h5py.h5d.DatasetID, axis: int) -> tuple[int, ...]:
    """Object addresses of the scales attached to one axis. (``ds.dims[axis].values()``
    makes a Dataset of each and asks each for its name: 3x slower.)"""
    found: list[int] = []
    h5py.h5ds.iterate(dsid, axis, lambda scale: found.append(h5py.h5o.get_info(scale).addr))
    return tuple(found)


def _records(source: str, paths: list[str], is_netcdf4: bool) -> list[tuple[_Record, list[str]]]:
    """Records of ``paths``, in order, each with the notes reading it made; read in this
    process (a walker's whole job)."""
    out = []
    fd = os.open(source, os.O_RDONLY)  # the self-check's reads of stored chunks (:func:`_storage`)

    def pread(size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)

    try:
        with open_h5(source) as f:
            for p in paths:
                notes: list[str] = []
                out.append((_record(f[p], p, f, notes, is_netcdf4, pread), notes))
    finally:
        os.close(fd)
    return out


def _records_of(walk: LinkWalk, source_path: str, is_netcdf4: bool) -> list[_Record]:
    """Every dataset's record, in walk order: in the walkers when there are many."""
    if walk.walkers is not None and len(walk.dataset_paths) >= PARALLEL_MIN_DATASETS:
        read = walk.walkers.map(_records, str(source_path), walk.dataset_paths, is_netcdf4)
        walk.notes.extend(n for _, ns in read for n in ns)
        return [r for r, _ in read]
    return [_record(walk.f[p], p, walk.f, walk.notes, is_netcdf4) for p in walk.dataset_paths]


def _inventory(walk: LinkWalk, source_path: str, records: list[_Record], is_netcdf4: bool) -> Inventory:
    # canonical paths of hard-linked objects: the first path the walk reached
    dims = _dimension_names(records, walk.seen)
    address = {path: addr for addr, path in walk.seen.items()}
    arrays = []
    for rec in records:
        names, scales = dims[rec.path]
        typed = {"type_path": walk.seen.get(rec.info["type_path"])} if "type_path" in rec.info else {}
        arrays.append(ArrayInfo(**(rec.info | typed), attrs=rec.attrs, dims=names, dim_scales=scales,
                                dim_only=is_netcdf4 and rec.dim_only, address=address.get(rec.path)))
    groups = [GroupInfo(g.path, convert_attrs(walk.raw_attrs[g.path], walk.f, is_netcdf4)) for g in walk.groups]
    datatypes = [DatatypeInfo(path, walk.f[path].dtype, convert_attrs(walk.raw_attrs[path], walk.f, is_netcdf4), addr)
                 for path, addr in walk.datatypes]
    return Inventory(
        path=str(source_path),
        userblock_size=int(walk.f.userblock_size),
        is_netcdf4=is_netcdf4,
        groups=tuple(groups),
        arrays=tuple(arrays),
        links=tuple(walk.links),
        attr_notes=tuple(walk.notes),
        datatypes=tuple(datatypes),
    )


def _walk(f: h5py.File, source_path: str, workers: int = 1) -> Inventory:
    walk = LinkWalk(f, workers)
    try:
        walk.visit(f, "/")
        is_netcdf4 = any(walk.netcdf_hints)
        records = _records_of(walk, source_path, is_netcdf4)
    finally:
        if walk.walkers is not None:
            walk.walkers.close()
    return _inventory(walk, source_path, records, is_netcdf4)


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


__all__ = ["NETCDF_DIM_ONLY_PREFIX", "PARALLEL_MIN_DATASETS", "STORAGE_LAYOUTS", "ArrayInfo", "FilterInfo", "GroupInfo",
           "Inventory", "LinkInfo", "classify_dtype", "read_inventory"]
