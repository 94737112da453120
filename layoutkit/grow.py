"""Appending along a record dimension: a store's arrays grown in place.

A store made from netCDF files joined along their record dimension (``time``: ERA5's
months, :mod:`layoutkit.hdf5.concat`) takes the next files with ``convert --append``.
Its variables along that dimension grow: the new rows are written after the last ones,
into the chunks the array's grid gives them (new objects; the chunk that held the last
rows, when they did not fill it, written again whole, its old rows unchanged), through
zarr, with each array's new shape held back (:func:`_held_class`) until the root
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

from layoutkit.equality.values import decode_fill, same_value
from layoutkit.errors import LayoutkitError
from layoutkit.hdf5.concat import ENCODING_ATTRS
from layoutkit.hdf5.model import ArrayInfo, Inventory
from layoutkit.storage import SourceSet

SLAB_BYTES = 16 * 1024**2
"""Rows written at a time, at most this many bytes of them (memory bound)."""


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
    the store's own zarr store), which :func:`layoutkit.append._apply` runs before the root."""
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

    from layoutkit.hdf5.source import open_reader

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


def new_chunk_keys(key: str, meta: dict[str, Any], rows: int, at: int | None = None) -> list[str]:
    """The keys of the chunks (or shards) an array gains when ``rows`` rows follow its
    last (from row ``at``, when given)."""
    import itertools

    grid = meta["chunk_grid"]["configuration"]["chunk_shape"]
    sep = meta.get("chunk_key_encoding", {}).get("configuration", {}).get("separator", "/")
    old = int(meta["shape"][0]) if at is None else at
    new = old + rows
    first, last = -(-old // grid[0]), -(-new // grid[0])
    spans = [range(first, last), *(range(-(-n // c)) for n, c in zip(meta["shape"][1:], grid[1:]))]
    return [f"{key}/c{sep}" + sep.join(map(str, idx)) for idx in itertools.product(*spans)]


def _held_class() -> type:
    from zarr.storage import WrapperStore

    class HeldMetadata(WrapperStore):
        """A zarr store whose array documents named in ``held`` are read from there and
        never written (the root gives them, later); every other key goes through."""

        def __init__(self, store: Any, held: dict[str, bytes]) -> None:
            super().__init__(store)
            self.held = held

        async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
            if key in self.held:
                return prototype.buffer.from_bytes(self.held[key])
            return await self._store.get(key, prototype, byte_range)

        async def set(self, key: str, value: Any) -> None:
            if key not in self.held:
                await self._store.set(key, value)

    return HeldMetadata


def held_store(store: Any, held: dict[str, bytes]) -> Any:
    """``store`` with the array documents ``held`` read from there and never written."""
    return _held_class()(store, held)


def grown(meta: dict[str, Any], rows: int, at: int | None = None) -> dict[str, Any]:
    """An array's metadata with ``rows`` more rows (after row ``at``, when given)."""
    return {**meta, "shape": [(int(meta["shape"][0]) if at is None else at) + rows, *meta["shape"][1:]]}


def next_boundary(meta: dict[str, Any]) -> int:
    """The first row of the array's first chunk (or shard) that holds none of its rows:
    rows written from there leave every object of the array as it is."""
    grid = int(meta["chunk_grid"]["configuration"]["chunk_shape"][0])
    return -(-int(meta["shape"][0]) // grid) * grid


IN_FLIGHT = 16
"""Arrays appended to at once (:func:`copy_rows`): their Python work is small and their
I/O waits, so many at once cost one array's time; each holds at most a slab of rows."""


def copy_rows(source: Any, target: Any, items: list[tuple[str, str, dict[str, Any], Any, int | None]]) -> int:
    """Append the rows of arrays of the zarr store ``source`` to arrays of ``target``:
    each item ``(source array, target array, the target's metadata now, transform or
    None, first row or None: after the last)``, the new shapes held back
    (:func:`held_store`); :data:`IN_FLIGHT` arrays at a time, a slab of rows at a time,
    on zarr's own event loop (one round trip into it for them all). Returns the bytes."""
    import asyncio

    import zarr.api.asynchronous as za
    from zarr.core.sync import sync

    async def one(gate: asyncio.Semaphore, name: str, key: str, meta: dict[str, Any], transform: Any,
                  at: int | None) -> int:
        async with gate:
            src = await za.open_array(store=source, path=name, mode="r")
            rows = int(src.shape[0])
            held = {f"{key}/zarr.json": json.dumps(grown(meta, rows, at)).encode()}
            dst = await za.open_array(store=held_store(target, held), path=key, mode="r+")
            first = int(meta["shape"][0]) if at is None else at
            row_bytes = max(1, int(np.prod(src.shape[1:], dtype=np.int64)) * np.dtype(src.dtype).itemsize)
            step, nbytes = max(1, SLAB_BYTES // row_bytes), 0
            for lo in range(0, rows, step):
                hi = min(rows, lo + step)
                values = np.asarray(await src.getitem(slice(lo, hi)))
                await dst.setitem(slice(first + lo, first + hi), transform(values) if transform else values)
                nbytes += values.nbytes
            return nbytes

    async def every() -> int:
        gate = asyncio.Semaphore(IN_FLIGHT)  # made on zarr's loop
        return sum(await asyncio.gather(*(one(gate, *item) for item in items)))

    return sync(every())


__all__ = ["IN_FLIGHT", "SLAB_BYTES", "RecordsError", "copy_rows", "grow", "grown", "held_store", "new_chunk_keys",
           "next_boundary", "plan_growth"]
