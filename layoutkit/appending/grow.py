"""Appending along a record dimension: a store's arrays grown in place.

A store made from netCDF files joined along their record dimension (``time``: ERA5's
months, :mod:`layoutkit.hdf5.concat`) takes the next files with ``convert --append``.
Its variables along that dimension grow: the new rows are written after the last ones,
into the chunks the array's grid gives them (new objects; the chunk that held the last
rows, when they did not fill it, written again whole, its old rows unchanged), through
zarr, with each array's new shape held back (:func:`~layoutkit.merging.held_store`) until the root
document, the commit, gives it: a reader of the old root reads the old shape, and the
rows past it are no part of the array. The arrays' own ``zarr.json`` follow the root.

The new files must continue the store: their first coordinate value after its last,
every variable along the dimension present, the same shape past it, the same
attributes; variables without it equal to the store's. Their encoding must be the
store's, except where the store holds decoded values (floats, NaN for missing: what a
run writes when its files packed a variable differently), where the new values are
decoded as xarray decodes them; otherwise the append is refused by name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from layoutkit.errors import LayoutkitError
from layoutkit.hdf5.concat import ENCODING_ATTRS
from layoutkit.hdf5.model import ArrayInfo, Inventory
from layoutkit.hdf5.values import decode_fill, same_value
from layoutkit.merging import SLAB_BYTES, grown, held_store, new_chunk_keys
from layoutkit.storage import SourceSet


class RecordsError(LayoutkitError):
    """New files that do not continue a store along its record dimension."""


def plan_growth(inventory: Inventory, root: dict[str, Any], get: Any, dst: str) -> list[tuple[str, ArrayInfo, dict]]:
    """For each variable joined along the record dimension: its key, how to read it (a
    copy of its inventory entry: decoded or not) and the store's metadata of it."""
    listed = (root.get("consolidated_metadata") or {}).get("metadata") or {}
    joined = [a for a in inventory.arrays if a.segments is not None]
    if not joined:
        raise RecordsError(f"The new sources hold no shot and no record dimension to append to {dst} along.")
    dim = joined[0].dims[0]
    out = []
    for info in joined:
        key = info.path.strip("/")
        meta = listed.get(key) or json.loads(get(f"{key}/zarr.json") or "null")
        if meta is None or meta.get("node_type") != "array":
            raise RecordsError(f"Variable {info.path!r} of the new sources is not in {dst}.")
        if list(meta.get("dimension_names") or []) != list(info.dims) or list(meta["shape"][1:]) != list(info.shape[1:]):
            raise RecordsError(f"Variable {info.path!r} has the dimensions {info.dims} {info.shape[1:]} past {dim!r} in "
                               f"the new sources, and {meta.get('dimension_names')} {meta['shape'][1:]} in {dst}.")
        out.append((key, _as_stored(info, meta, dst), meta))
    mine = {k for k, _, _ in out}
    missing = [k for k, m in listed.items() if m.get("node_type") == "array" and k not in mine
               and (m.get("dimension_names") or [None])[0] == dim]
    if missing:
        raise RecordsError(f"Variable '/{missing[0]}' of {dst} is along {dim!r} and not in the new sources; an append "
                           "along it must bring every such variable.")
    return out


def _as_stored(info: ArrayInfo, meta: dict[str, Any], dst: str) -> ArrayInfo:
    """``info`` read as the store holds the variable: as stored when the new files
    encode it as the store does, decoded when the store holds decoded values."""
    attrs = meta.get("attributes") or {}
    dtype = np.dtype(meta["data_type"]) if meta["data_type"] != "string" else info.dtype
    for name in set(info.attrs) & set(attrs) - ENCODING_ATTRS:
        if not same_value(info.attrs[name], attrs[name]):
            raise RecordsError(f"Variable {info.path!r} has another attribute {name!r} in the new sources than in {dst}; "
                               "an append must agree in all but the encoding.")
    stored = {k: decode_fill(attrs[k], dtype) if k == "_FillValue" else attrs[k] for k in ENCODING_ATTRS if k in attrs}
    segments = info.segments or ()
    if all(all(same_value(s.attrs.get(k), stored.get(k)) for k in ENCODING_ATTRS) for s in segments):
        return replace(info, unpack=False) if info.dtype == dtype else _refuse(info, dst)
    decoded_store = dtype.kind == "f" and not {"scale_factor", "add_offset"} & set(stored) and (
        "_FillValue" not in stored or np.isnan(stored["_FillValue"]))
    if decoded_store:
        from layoutkit.hdf5.concat import decoded_dtype

        if all(np.can_cast(decoded_dtype(s), dtype, "same_kind") and decoded_dtype(s).itemsize <= dtype.itemsize
               for s in segments):
            return replace(info, unpack=True, dtype=dtype)
    return _refuse(info, dst)


def _refuse(info: ArrayInfo, dst: str) -> ArrayInfo:
    raise RecordsError(
        f"Variable {info.path!r} is encoded otherwise in the new sources than in {dst} (scale_factor, add_offset, "
        "_FillValue or type), and the store holds it as encoded; convert all the files into a new store, which "
        "stores it decoded."
    )


def grow(zarr_store: Any, sources: SourceSet, plans: list[tuple[str, ArrayInfo, dict]],
         root: dict[str, Any]) -> tuple[dict[str, bytes], list[str], Callable[[], int]]:
    """An append along the record dimension: the new shapes put in ``root`` (its listing);
    returns the arrays' own documents with them (written after the root), the chunk keys
    the rows add, and the writing of the rows after the store's (into ``zarr_store``,
    the store's own zarr store), which :func:`layoutkit.appending.append._apply` runs before the root."""
    listed = (root.get("consolidated_metadata") or {}).get("metadata")
    after: dict[str, bytes] = {}
    added: list[str] = []
    for key, info, meta in plans:
        if listed is not None:
            listed[key] = grown(meta, info.shape[0])
        after[f"{key}/zarr.json"] = json.dumps(grown(meta, info.shape[0])).encode()
        added += new_chunk_keys(key, meta, info.shape[0])
    return after, added, lambda: _write_rows(zarr_store, sources, plans)


def _write_rows(zarr_store: Any, sources: SourceSet, plans: list[tuple[str, ArrayInfo, dict]]) -> int:
    """Every variable's new rows after the store's, a bounded slab at a time; the bytes read."""
    import zarr

    from layoutkit.hdf5.raw import open_reader

    nbytes = 0
    with open_reader(sources, {info.path: info for _, info, _ in plans}) as reader:
        for key, info, meta in plans:
            old = int(meta["shape"][0])
            array = zarr.open_array(held_store(zarr_store, {f"{key}/zarr.json": json.dumps(grown(meta, info.shape[0]))
                                                            .encode()}), path=key, mode="r+")
            row_bytes = max(1, int(np.prod(info.shape[1:], dtype=np.int64)) * info.dtype.itemsize)
            step = max(1, SLAB_BYTES // row_bytes)
            rest = tuple((0, n) for n in info.shape[1:])
            for lo in range(0, info.shape[0], step):
                hi = min(info.shape[0], lo + step)
                values = reader.read(info.path, ((lo, hi), *rest))
                array[old + lo: old + hi] = values
                nbytes += values.nbytes
    return nbytes


__all__ = ["RecordsError", "grow", "plan_growth"]
