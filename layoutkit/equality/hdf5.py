"""Equality of an HDF5 variant (a ``reorder`` output, or any copy such as h5repack's) with its source.

Objects are compared by path: the same groups, datasets, attributes (with their HDF5
types), dimension scales attached to the same axes, and the same values, chunk by chunk.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from layoutkit.equality.expected import ReferenceReader, proof_blocks
from layoutkit.equality.zarr_ import without_provenance
from layoutkit.hdf5.attrs import reference_path
from layoutkit.hdf5.chunk_index import sparse_storage
from layoutkit.hdf5.files import Members, external_values, first_line, open_h5
from layoutkit.hdf5.inventory import ArrayInfo, Inventory
from layoutkit.hdf5.library_read import dataset_values
from layoutkit.hdf5.model import holds_reference
from layoutkit.hdf5.values import Mismatch, equal_values
from layoutkit.storage import AnySource


def _raw_attrs(obj: Any) -> dict[str, Any]:
    import h5py

    out = {}
    is_scale = isinstance(obj, h5py.Dataset) and h5py.h5ds.is_scale(obj.id)
    for name in obj.attrs:
        if name in ("DIMENSION_LIST", "REFERENCE_LIST") or (is_scale and name == "NAME"):
            continue
        dtype = obj.attrs.get_id(name).dtype
        if h5py.check_ref_dtype(dtype) is h5py.RegionReference:  # as the selections they describe
            out[name] = (dtype, np.asarray(json.dumps(_regions(obj.file, obj.attrs[name]))))
            continue
        if h5py.check_ref_dtype(dtype) is not None:  # compared as what they point at, elsewhere
            continue
        if holds_reference(dtype):  # inside a compound or an array type: as what each points at
            out[name] = (dtype, np.asarray(json.dumps(_pointed(obj.attrs[name], obj.file), default=repr)))
            continue
        out[name] = (dtype, obj.attrs[name])
    return out


def _pointed(value: Any, f: Any) -> Any:
    """An attribute's value holding references inside compounds or array elements, as
    JSON-ready data with each reference what it points at (read by HDF5 here): an
    object's path, a region's selection (:func:`_regions`), None for an unset one."""
    import h5py

    if isinstance(value, h5py.RegionReference):
        return _regions(f, [value])[0]
    if isinstance(value, h5py.Reference):
        try:
            return f[value].name if value else None
        except (KeyError, ValueError, OSError):
            return None
    if isinstance(value, np.void) and value.dtype.names:
        return {n: _pointed(value[n], f) for n in value.dtype.names}
    if isinstance(value, np.ndarray):
        return _pointed(value[()], f) if value.ndim == 0 else [_pointed(v, f) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def _regions(f: Any, refs: Any) -> list[Any]:
    """Region references as what they select, read by HDF5 here (not by the converters'
    reading): the dataset's path, the kind of selection and its points or boxes."""
    import h5py

    out: list[Any] = []
    for ref in np.asarray(refs, dtype=object).reshape(-1):
        try:
            space = h5py.h5r.get_region(ref, f.id) if ref else None
            name = f[ref].name if space is not None else None
        except (KeyError, ValueError, OSError):  # its dataset is gone: as unset (the type rules)
            space = None
        if space is None:
            out.append(None)
            continue
        kind = space.get_select_type()
        coords = (space.get_select_elem_pointlist().tolist() if kind == h5py.h5s.SEL_POINTS
                  else space.get_select_hyper_blocklist().tolist() if kind == h5py.h5s.SEL_HYPERSLABS else None)
        out.append([name, int(kind), coords])
    return out


def _of_committed_type(ds: Any, f: Any, path: str) -> bool:
    """Whether ``ds``'s type is the committed datatype at ``path`` in ``f``."""
    import h5py

    tid = ds.id.get_type()
    kept = f.get(path)
    return (tid.committed() and isinstance(kept, h5py.Datatype)
            and h5py.h5o.get_info(tid).addr == h5py.h5o.get_info(kept.id).addr)


def _same_raw(a: Any, b: Any) -> bool:
    import h5py

    if isinstance(a, h5py.Empty) or isinstance(b, h5py.Empty):
        return isinstance(a, h5py.Empty) and isinstance(b, h5py.Empty) and a.dtype == b.dtype
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(equal_values(a.reshape(-1), b.reshape(-1)).all()) if a.size else True


# long: one walk over both files, groups then datasets, each compared where the walk meets it.
def compare_hdf5(
    source: AnySource,
    variant: str | Path,
    merged: dict[str, str] | None = None,
    inventory: Inventory | None = None,
    skipped: frozenset[str] = frozenset(),
) -> list[Mismatch]:
    """Compare an HDF5 variant written by ``reorder`` with its source (a file, or a set
of files as their combined ``inventory`` has it: :mod:`layoutkit.hdf5.combined`).

    Every group, dataset (values, exact dtype, shape, fill value), attribute (exact
    type) and dimension scale attachment must match. ``merged`` maps a deduplicated
    scale to the copy kept: its path must hold equal data, and a dataset attached to the
    duplicate must be attached to the kept copy. ``skipped``: datasets the variant left
    out on purpose (``reorder --skip-unsupported``), neither compared nor missing.
    """
    import h5py

    from layoutkit.hdf5.combined import walk_sources  # combines with layoutkit.equality's values

    inventory = inventory or walk_sources(source)
    merged = merged or {}
    name = str(variant)
    found: list[Mismatch] = []

    def miss(path: str, what: str, detail: str) -> None:
        found.append(Mismatch(name, path, what, detail))

    with Members(source) as fs, open_h5(variant) as fv:
        for g in inventory.groups:
            if g.path not in fv:
                miss(g.path, "missing", "group not in the variant")
                continue
            _compare_raw_attrs(g.path, *without_provenance(g.path, _raw_attrs(fs(g.member)[g.path]),
                                                           _raw_attrs(fv[g.path])), miss)
        for t in inventory.datatypes:
            got = fv.get(t.path)
            if not isinstance(got, h5py.Datatype):
                miss(t.path, "missing", "committed datatype not in the variant")
                continue
            if got.dtype != fs(t.member)[t.path].dtype:
                miss(t.path, "dtype", f"{got.dtype}, expected {t.dtype}")
            _compare_raw_attrs(t.path, _raw_attrs(fs(t.member)[t.path]), _raw_attrs(got), miss)
        infos = {a.path: a for a in inventory.arrays}
        with ReferenceReader(source, infos) as rs:
            for info in inventory.arrays:
                path = info.path
                if path in skipped:
                    continue
                if path not in fv or not isinstance(fv[path], h5py.Dataset):
                    miss(path, "missing", "dataset not in the variant")
                    continue
                ds_s, ds_v = fs(info.origin.member)[path], fv[path]
                dtype, shape = (info.dtype if info.unpack else ds_s.dtype), (info.shape if info.segments else ds_s.shape)
                if dtype != ds_v.dtype:
                    miss(path, "dtype", f"{ds_v.dtype}, expected {dtype}")
                    continue
                if shape != ds_v.shape:
                    miss(path, "shape", f"{ds_v.shape}, expected {shape}")
                    continue
                if info.type_path is not None and not _of_committed_type(ds_v, fv, info.type_path):
                    miss(path, "dtype", f"not of the committed datatype {info.type_path}")
                if path in merged:
                    continue  # compared through the kept copy (hash-equal by construction)
                fill_s, fill_v = (info.fill_value if info.unpack else _fill(ds_s)), _fill(ds_v)
                if fill_s is not None and (fill_v is None or not _same_raw(fill_s, fill_v)):
                    miss(path, "fill_value", f"{fill_v!r}, expected {fill_s!r}")
                _compare_raw_attrs(path, _expected_attrs(info, ds_s), _raw_attrs(ds_v), miss)
                if bool(h5py.h5ds.is_scale(ds_s.id)) != bool(h5py.h5ds.is_scale(ds_v.id)):
                    miss(path, "dims", "dimension-scale status differs")
                for axis, scales in enumerate(() if info.null_space else info.dim_scales):
                    want = sorted(merged.get(s, s) for s in scales if s not in skipped)
                    got = sorted(_address(v) for v in ds_v.dims[axis].values())
                    want_c = sorted(_address(fv[w]) for w in want if w in fv)
                    if got != want_c:
                        miss(path, "dims", f"axis {axis} has scales {got}, expected {want}")
                if ds_s.shape is None:
                    continue
                block = ds_v.chunks or ds_s.chunks or (tuple(ds_s.shape) if ds_s.shape else ())
                where = rs.stored_regions(path)
                theirs = None if where is None else sparse_storage(ds_v).get("stored_regions")
                external_v = ds_v.id.get_create_plist().get_external_count() > 0  # its values read from its files
                with external_values(fv, path) if external_v else contextlib.nullcontext(ds_v) as values_v:
                    for region, expected in rs.read_each(path, proof_blocks(path, info.shape, block, where, theirs)):
                        sel = tuple(slice(a, b) for a, b in region) if region else ()
                        expected_v = np.asarray(expected)
                        try:
                            got_v = _variant_values(values_v, sel, info)
                        except (OSError, ValueError, RuntimeError) as exc:  # a chunk that does not decode
                            miss(path, "values", f"cannot be read at {region}: {first_line(exc)}")
                            break
                        if info.kind == "region-reference":
                            if _regions(ds_s.file, ds_s[sel] if sel else ds_s[()]) != _regions(fv, got_v):
                                miss(path, "values", f"the region references in {region} select other regions")
                                break
                            continue
                        eq = equal_values(expected_v, got_v)
                        if not np.all(eq):
                            bad = np.argwhere(~eq)[0] if np.ndim(eq) else ()
                            miss(path, "values", f"first difference at index {tuple(int(i) + a for i, (a, _) in zip(bad, region))}")
                            break
    return found


def _variant_values(ds: Any, sel: tuple[slice, ...], info: ArrayInfo) -> np.ndarray:
    """A variant's values in ``sel`` as h5py reads them, as the source's are read
    (:func:`~layoutkit.hdf5.library_read.read_block`): text as text, object references as
    the paths they point at, a scalar's sequence in an object array, sequences labelled
    with their type's byte order."""
    if info.kind == "string":
        return np.asarray(ds.asstr()[sel])
    if info.kind == "reference":  # the paths they point at in the variant, as the source's are read
        refs = np.asarray(ds[sel] if sel else ds[()], dtype=object)
        return np.vectorize(lambda r: reference_path(ds.file, r), otypes=[object])(refs) if refs.size else refs
    return dataset_values(ds, sel)


def _expected_attrs(info: ArrayInfo, ds: Any) -> dict[str, Any]:
    """A dataset's attributes as its variant should hold them: the source's, or for a
    set's variable stored decoded (:mod:`layoutkit.hdf5.concat`) those its inventory
    keeps, with the decoded fill value."""
    attrs = _raw_attrs(ds)
    if not info.unpack:
        return attrs
    kept = {k: v for k, v in attrs.items() if k in info.attrs and k != "_FillValue"}
    if "_FillValue" in info.attrs:
        kept["_FillValue"] = (info.dtype, info.attrs["_FillValue"])
    return kept


def _address(obj: Any) -> int:
    import h5py

    return h5py.h5o.get_info(obj.id).addr


def _fill(ds: Any) -> Any:
    try:
        return ds.fillvalue
    except (OSError, TypeError, ValueError, RuntimeError):
        return None


def _compare_raw_attrs(path: str, a: dict[str, Any], b: dict[str, Any], miss: Any) -> None:
    for key, (dtype, value) in a.items():
        if key not in b:
            miss(path, "attribute", f"{key!r} missing")
        elif b[key][0] != dtype or not _same_raw(value, b[key][1]):
            miss(path, "attribute", f"{key!r} is {b[key][1]!r} ({b[key][0]}), expected {value!r} ({dtype})")
    for key in b:
        if key not in a:
            miss(path, "attribute", f"{key!r} is not in the source")


__all__ = ["compare_hdf5"]
