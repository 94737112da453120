"""Prove that a Zarr variant holds exactly the data of its HDF5 source.

:func:`compare_zarr` walks the source inventory and checks, for every array, that the
store has it at the same path with the same shape, an equivalent dtype, the same fill
value, the same attributes and dimension names, and the same values (NaN-aware,
bit-exact for integers), streamed one write block at a time so memory stays bounded.
It returns a list of :class:`Mismatch`; an empty list means equal.

The comparators are written from what the formats document, not from the writers'
code: zarr's metadata, xarray's conventions (``_FillValue`` as base64 of a double in v3
attributes, ``dimension_names`` / ``_ARRAY_DIMENSIONS``) and the README's rules for
attributes and types. Nothing here imports :mod:`layoutkit.layouts` or
:mod:`layoutkit.writers`, so an encoding bug in a writer cannot hide from ``verify``.
"""

from __future__ import annotations

import base64
import json
import struct
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from layoutkit.errors import LayoutkitError
from layoutkit.hdf5.inventory import ArrayInfo, Inventory, first_line, open_h5, read_inventory
from layoutkit.hdf5.source import SourceReader
from layoutkit.pipeline import PROVENANCE_ATTR
from layoutkit.plan import iter_blocks
from layoutkit.storage import ObjectSource, is_url, store_at
from layoutkit.storage.icechunk_repo import is_icechunk, readonly_store, sidecar_in

# JSON has no NaN or infinities: the README's rule stores them in attributes as these strings
_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
# attributes that carry structure in Zarr (README, "Types"), not source attributes
_STRUCTURAL_ATTRS = ("_ARRAY_DIMENSIONS", "hdf5_enum", "hdf5_reference", "hdf5_null_dataspace",
                     "layoutkit_shot_packed")  # the last: the shot-packed layout's index, on shot groups
# the signal-major layout's array names (README, "signal-major Zarr")
_DATA, _SHOT, _START, _LENGTH = "data", "shot", "start", "length"


def expected_dtype(info: ArrayInfo) -> np.dtype | type:
    """The dtype the README promises in Zarr for a source dataset: text for strings and
    references, the base integer for enums, the same numbers (any byte order) otherwise."""
    if info.kind in ("string", "reference"):
        return str
    if info.kind == "enum" or not info.dtype.names:
        return np.dtype(info.dtype.str)
    return info.dtype


@dataclass(frozen=True)
class Mismatch:
    """One difference between a variant and its source."""

    variant: str
    path: str
    what: str  # "missing", "shape", "dtype", "values", "fill_value", "attribute", "dims", "group"
    detail: str

    def __str__(self) -> str:
        return f"{self.variant}: {self.path}: {self.what}: {self.detail}"


def _equal_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise equality, NaN equal to NaN, structured types compared by bytes (or
    field by field when a field holds variable-length objects)."""
    if a.dtype.names and b.dtype.names and (a.dtype.hasobject or b.dtype.hasobject):
        result = np.ones(a.shape, dtype=bool)
        for name in a.dtype.names:
            fa, fb = a[name], b[name]
            eq = _equal_values(fa, fb)
            result &= eq.reshape(fa.shape[: a.ndim] + (-1,)).all(axis=-1) if eq.ndim > a.ndim else eq
        return result
    if a.dtype.kind == "O" and b.dtype.kind == "O":
        same = np.frompyfunc(lambda x, y: bool(np.array_equal(np.asarray(x), np.asarray(y))), 2, 1)
        return np.asarray(same(a, b), dtype=bool)
    if a.dtype.names or b.dtype.names or a.dtype.kind == "V":
        a2 = np.ascontiguousarray(a).view(np.uint8).reshape(a.shape + (-1,))
        b2 = np.ascontiguousarray(b.astype(a.dtype)).view(np.uint8).reshape(b.shape + (-1,))
        return (a2 == b2).all(axis=-1)
    if a.dtype.kind in "fc":
        return (a == b) | (np.isnan(a) & np.isnan(b))
    if a.dtype.kind in "OUT" or b.dtype.kind in "OUT" or a.dtype != b.dtype and "String" in type(b.dtype).__name__:
        return np.asarray(a.astype(object) == b.astype(object), dtype=bool)
    return np.asarray(a == b)


def _decode_fill(v: Any, dtype: np.dtype) -> Any:
    if isinstance(v, str) and dtype.kind == "f":
        return struct.unpack("<d", base64.standard_b64decode(v))[0]
    if isinstance(v, str) and dtype.kind == "S":
        return base64.standard_b64decode(v)
    return v


def _as_py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else (v.decode() if isinstance(v, bytes) else v)


def _same_attr(a: Any, b: Any) -> bool:
    """``a`` from the source (JSON-ready, NaN as a float), ``b`` as the store holds it."""
    if isinstance(a, float) and isinstance(b, str) and b in _NON_FINITE:
        b = _NON_FINITE[b]
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (np.isnan(a) and np.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_attr(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_attr(a[k], b[k]) for k in a)
    return a == b


def compare_zarr(
    source: str | Path,
    store: str | Path | Any,
    inventory: Inventory | None = None,
    skipped: frozenset[str] = frozenset(),
    workers: int = 2,
    name: str | None = None,
) -> list[Mismatch]:
    """Compare a Zarr store written by ``convert`` with its HDF5 source.

    Parameters
    ----------
    source
        The HDF5 file.
    store
        The Zarr store: a folder, or a zarr store object (e.g. ``ObjectStore`` over a bucket).
    skipped
        Paths left out on purpose (``--skip-unsupported``); not reported as missing.
    workers
        Arrays compared at the same time.

    Returns
    -------
    list of Mismatch
        Empty when the store is faithful.
    """
    inventory = inventory or read_inventory(source)
    name = name or str(store)
    # the arrays' own metadata is the truth; consolidated metadata is only a cache of it
    root = zarr.open_group(store, mode="r", use_consolidated=False)
    zfmt = root.metadata.zarr_format
    found: list[Mismatch] = []

    def miss(path: str, what: str, detail: str) -> None:
        found.append(Mismatch(name, path, what, detail))

    def node(path: str, kind: type) -> Any:
        """The store's node at ``path`` if it is of ``kind``, else report it and None."""
        what = "group" if kind is zarr.Group else "array"
        try:
            found_node = root if path == "/" else root[path.lstrip("/")]
        except KeyError:
            miss(path, "missing", f"{what} not in the store")
            return None
        if not isinstance(found_node, kind):
            miss(path, "missing", f"the store has something else than a {what} there")
            return None
        return found_node

    for g in inventory.groups:
        if (zg := node(g.path, zarr.Group)) is not None:
            _compare_attrs(g.path, *_without_provenance(g.path, dict(g.attrs), dict(zg.attrs)), miss)

    arrays = [a for a in inventory.arrays if not a.dim_only and a.path not in skipped]

    def one(info: ArrayInfo) -> list[Mismatch]:
        own: list[Mismatch] = []
        try:
            z = root[info.path.lstrip("/")]
        except KeyError:
            return [Mismatch(name, info.path, "missing", "array not in the store")]
        if not isinstance(z, zarr.Array):
            return [Mismatch(name, info.path, "missing", "the store has something else than an array there")]
        try:
            _compare_array(info, z, zfmt, reader, lambda p, w, d: own.append(Mismatch(name, p, w, d)))
        except (OSError, ValueError, RuntimeError) as exc:  # a chunk that does not decode
            own.append(Mismatch(name, info.path, "values", f"cannot be read: {first_line(exc)}"))
        return own

    # arrays are compared in parallel: zarr decodes and our source reader decodes
    # outside the GIL; each array is streamed one write block at a time
    with SourceReader(source, {a.path: a for a in arrays}) as reader, ThreadPoolExecutor(max(1, workers)) as pool:
        for own in pool.map(one, arrays):
            found.extend(own)
    return found


def _without_provenance(path: str, *attrs: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """Leave out the one root attribute layoutkit adds to every variant (the recipe it was
    written with), on both sides; every other attribute is compared."""
    if path != "/":
        return attrs
    return tuple({k: v for k, v in a.items() if k != PROVENANCE_ATTR} for a in attrs)


def _compare_attrs(path: str, expected: dict[str, Any], got: dict[str, Any], miss: Any) -> None:
    for key, value in expected.items():
        if key not in got:
            miss(path, "attribute", f"{key!r} missing")
        elif not _same_attr(value, got[key]):
            miss(path, "attribute", f"{key!r} is {got[key]!r}, expected {value!r}")
    for key in got:
        if key not in expected and key not in _STRUCTURAL_ATTRS:
            miss(path, "attribute", f"{key!r} is not in the source")


def _compare_array(info: ArrayInfo, z: zarr.Array, zfmt: int, reader: SourceReader, miss: Any) -> None:
    path = info.path
    if tuple(z.shape) != info.shape:
        miss(path, "shape", f"{tuple(z.shape)}, expected {info.shape}")
        return
    want = expected_dtype(info)
    if want is str:
        if z.dtype.kind not in "OUT" and "String" not in type(z.dtype).__name__:
            miss(path, "dtype", f"{z.dtype}, expected variable-length strings")
    elif np.dtype(want).newbyteorder("=") != np.dtype(z.dtype).newbyteorder("="):
        miss(path, "dtype", f"{z.dtype}, expected {np.dtype(want)}")
        return
    # dimension names
    dims = tuple(z.metadata.dimension_names or ()) if zfmt == 3 else tuple(z.attrs.get("_ARRAY_DIMENSIONS", ()))
    if info.shape and dims != info.dims:
        miss(path, "dims", f"{dims}, expected {info.dims}")
    # attributes
    expected = dict(info.attrs)
    got = dict(z.attrs)
    # _FillValue is stored the way xarray expects: base64 in v3 attributes, the
    # fill_value itself in v2; compare it as a number
    want_fv = info.attrs.get("_FillValue")
    expected.pop("_FillValue", None)
    got_fv = got.pop("_FillValue", None)
    if want_fv is not None and zfmt == 3:
        if got_fv is None:
            miss(path, "attribute", "'_FillValue' missing")
        else:
            got_fv = _decode_fill(got_fv, np.dtype(z.dtype) if want is not str else np.dtype(object))
            if isinstance(want_fv, list) and len(want_fv) == 1:
                want_fv = want_fv[0]  # netCDF's 1-element array
            if not _same_attr(_as_py(want_fv), _as_py(got_fv)):
                miss(path, "attribute", f"'_FillValue' is {got_fv!r}, expected {want_fv!r}")
    _compare_attrs(path, expected, got, miss)
    # fill value (v3 keeps HDF5's; v2 keeps it only where it is not netCDF's default)
    if zfmt == 3 and want is not str and info.fill_value is not None and not info.dtype.names:
        fv = np.asarray(info.fill_value).astype(z.dtype)
        if not _equal_values(fv.reshape(1), np.asarray(z.fill_value).astype(z.dtype).reshape(1)).all():
            miss(path, "fill_value", f"{z.fill_value!r}, expected {info.fill_value!r}")
    # values, one write block at a time
    block = z.shards or z.chunks if z.shape else ()
    for region in iter_blocks(info.shape, block):
        sel = tuple(slice(a, b) for a, b in region) if region else ()
        expected_v = np.asarray(reader.read(path, region))
        got_v = np.asarray(z[sel] if sel else z[...])
        eq = _equal_values(expected_v, got_v)
        if not eq.all():
            bad = np.argwhere(~eq)[0] if eq.ndim else ()
            index = tuple(int(i) + a for i, (a, _) in zip(bad, region))
            miss(path, "values", f"first difference at index {index}")
            return


def _raw_attrs(obj: Any) -> dict[str, Any]:
    import h5py

    out = {}
    is_scale = isinstance(obj, h5py.Dataset) and h5py.h5ds.is_scale(obj.id)
    for name in obj.attrs:
        if name in ("DIMENSION_LIST", "REFERENCE_LIST") or (is_scale and name == "NAME"):
            continue
        if h5py.check_ref_dtype(obj.attrs.get_id(name).dtype) is not None:
            continue
        out[name] = (obj.attrs.get_id(name).dtype, obj.attrs[name])
    return out


def _same_raw(a: Any, b: Any) -> bool:
    import h5py

    if isinstance(a, h5py.Empty) or isinstance(b, h5py.Empty):
        return isinstance(a, h5py.Empty) and isinstance(b, h5py.Empty) and a.dtype == b.dtype
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(_equal_values(a.reshape(-1), b.reshape(-1)).all()) if a.size else True


def compare_hdf5(
    source: str | Path,
    variant: str | Path,
    merged: dict[str, str] | None = None,
    inventory: Inventory | None = None,
) -> list[Mismatch]:
    """Compare an HDF5 variant written by ``reorder`` with its source.

    Every group, dataset (values, exact dtype, shape, fill value), attribute (exact
    type) and dimension scale attachment must match. ``merged`` maps a deduplicated
    scale to the copy kept: its path must hold equal data, and a dataset attached to the
    duplicate must be attached to the kept copy.
    """
    import h5py

    inventory = inventory or read_inventory(source)
    merged = merged or {}
    name = str(variant)
    found: list[Mismatch] = []

    def miss(path: str, what: str, detail: str) -> None:
        found.append(Mismatch(name, path, what, detail))

    with open_h5(source) as fs, open_h5(variant) as fv:
        for g in inventory.groups:
            if g.path not in fv:
                miss(g.path, "missing", "group not in the variant")
                continue
            _compare_raw_attrs(g.path, *_without_provenance(g.path, _raw_attrs(fs[g.path]), _raw_attrs(fv[g.path])), miss)
        infos = {a.path: a for a in inventory.arrays}
        with SourceReader(source, infos) as rs:
            for info in inventory.arrays:
                path = info.path
                if path not in fv or not isinstance(fv[path], h5py.Dataset):
                    miss(path, "missing", "dataset not in the variant")
                    continue
                ds_s, ds_v = fs[path], fv[path]
                if ds_s.dtype != ds_v.dtype:
                    miss(path, "dtype", f"{ds_v.dtype}, expected {ds_s.dtype}")
                    continue
                if ds_s.shape != ds_v.shape:
                    miss(path, "shape", f"{ds_v.shape}, expected {ds_s.shape}")
                    continue
                if path in merged:
                    continue  # compared through the kept copy (hash-equal by construction)
                fill_s, fill_v = _fill(ds_s), _fill(ds_v)
                if fill_s is not None and (fill_v is None or not _same_raw(fill_s, fill_v)):
                    miss(path, "fill_value", f"{fill_v!r}, expected {fill_s!r}")
                _compare_raw_attrs(path, _raw_attrs(ds_s), _raw_attrs(ds_v), miss)
                if bool(h5py.h5ds.is_scale(ds_s.id)) != bool(h5py.h5ds.is_scale(ds_v.id)):
                    miss(path, "dims", "dimension-scale status differs")
                for axis, scales in enumerate(() if info.null_space else info.dim_scales):
                    want = sorted(merged.get(s, s) for s in scales)
                    got = sorted(_address(v) for v in ds_v.dims[axis].values())
                    want_c = sorted(_address(fv[w]) for w in want if w in fv)
                    if got != want_c:
                        miss(path, "dims", f"axis {axis} has scales {got}, expected {want}")
                if ds_s.shape is None or info.kind in ("vlen",):
                    continue
                block = ds_v.chunks or ds_s.chunks or (tuple(ds_s.shape) if ds_s.shape else ())
                for region in iter_blocks(info.shape, block):
                    sel = tuple(slice(a, b) for a, b in region) if region else ()
                    expected_v = np.asarray(rs.read(path, region))
                    try:
                        got_v = np.asarray(ds_v.asstr()[sel] if info.kind == "string" else ds_v[sel])
                    except (OSError, ValueError, RuntimeError) as exc:  # a chunk that does not decode
                        miss(path, "values", f"cannot be read at {region}: {first_line(exc)}")
                        break
                    if info.kind == "reference":
                        break
                    eq = _equal_values(expected_v, got_v)
                    if not np.all(eq):
                        bad = np.argwhere(~eq)[0] if np.ndim(eq) else ()
                        miss(path, "values", f"first difference at index {tuple(int(i) + a for i, (a, _) in zip(bad, region))}")
                        break
    return found


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


def recorded_skips(variant: str | Path, storage_options: dict[str, str] | None = None) -> list[str]:
    """The datasets a Zarr variant leaves out on purpose (``convert --skip-unsupported``),
    as its ``layoutkit.json`` lists them (README: "Links"); none for an HDF5 variant."""
    try:
        if is_icechunk(str(variant)):
            from zarr.core.buffer import default_buffer_prototype
            from zarr.core.sync import sync

            buf = sync(readonly_store(str(variant), storage_options or {}).get("zarr.json", default_buffer_prototype()))
            if buf is None:
                return []
            text = json.dumps(sidecar_in(json.loads(buf.to_bytes()).get("attributes", {}).get(PROVENANCE_ATTR)))
        elif is_url(str(variant)):
            import obstore

            text = bytes(obstore.get(store_at(str(variant), storage_options or {}), "layoutkit.json").bytes()).decode()
        else:
            sidecar = Path(variant) / "layoutkit.json"
            if not sidecar.is_file():
                return []
            text = sidecar.read_text()
        doc = json.loads(text)
    except (OSError, ValueError):  # FileNotFoundError from the store too: no sidecar, nothing skipped
        return []
    return [s["path"] for s in doc.get("skipped", []) if isinstance(s, dict) and isinstance(s.get("path"), str)]


def _locate_variant(variant: str | Path, storage_options: dict[str, str]) -> tuple[str, str, Any]:
    """(name, "zarr" or "hdf5", what the comparators open): a local path, or for a URL a
    zarr ``ObjectStore`` over the bucket prefix or an :class:`ObjectSource`."""
    if not is_url(str(variant)):
        path = Path(variant)
        return str(path), ("zarr" if path.is_dir() else "hdf5"), path
    from layoutkit.archive import zarr_format_at

    url = str(variant)
    if is_icechunk(url):
        return url, "zarr", readonly_store(url, storage_options)
    prefixed = store_at(url, storage_options)
    if zarr_format_at(prefixed) is not None:
        return url, "zarr", zarr.storage.ObjectStore(prefixed, read_only=True)
    return url, "hdf5", ObjectSource(url, tuple(sorted(storage_options.items())))


class DifferentSourceError(LayoutkitError):
    """A variant that does not come from the source it is compared with."""


def compare_variant(
    source: str | Path, variant: str | Path, inventory: Inventory | None = None, workers: int = 2,
    storage_options: dict[str, str] | None = None, skipped: list[str] | None = None,
) -> list[Mismatch]:
    """Compare any variant layoutkit writes (a Zarr store in any layout, a paged HDF5
    file), local or in a bucket (``s3://...``, read through the store), with its source.
    ``skipped``: the datasets it left out on purpose, when the caller has read them
    (:func:`recorded_skips`) already.

    Raises
    ------
    DifferentSourceError
        When at least half of the source's arrays are missing from the variant: it was
        made from another file, and listing every array as missing would bury that.
    """
    inventory = inventory or read_inventory(source)
    skipped = frozenset(recorded_skips(variant, storage_options) if skipped is None else skipped)
    name, kind, handle = _locate_variant(variant, storage_options or {})
    if kind == "zarr":
        layout = zarr.open_group(handle, mode="r").attrs.get("layoutkit_layout") or {}
        compare = _ZARR_COMPARATORS.get(layout.get("name") if isinstance(layout, dict) else None, compare_zarr)
        found = compare(source, handle, inventory=inventory, skipped=skipped, workers=workers, name=name)
    else:
        found = compare_hdf5(source, handle, inventory=inventory)
    arrays = [a for a in inventory.arrays if not a.dim_only and a.path not in skipped]
    missing = [m for m in found if m.what == "missing" and m.path in {a.path for a in arrays}]
    if arrays and len(missing) * 2 >= len(arrays) and len(arrays) > 1:
        raise DifferentSourceError(
            f"{variant} does not hold the arrays of {source} ({len(missing)} of {len(arrays)} are missing, "
            f"such as {missing[0].path}): was it made from another file?"
        )
    return found


# layouts that need their own comparator, by the name in the root attribute layoutkit_layout
_ZARR_COMPARATORS: dict[Any, Any] = {}


def compare_signal_major(
    source: str | Path,
    store: str | Path | Any,
    inventory: Inventory | None = None,
    skipped: frozenset[str] = frozenset(),
    workers: int = 2,
    name: str | None = None,
) -> list[Mismatch]:
    """Compare a signal-major Zarr store (``convert --order signal``) with its source.

    Arrays and groups the layout mirrors are compared as :func:`compare_zarr` does. Every
    packed dataset is read back at its source path through the store's reader
    (:class:`~layoutkit.archive.SignalMajorArchive`, opened on the arrays' own metadata,
    not the consolidated copy) and compared with the source: shape, dtype, fill value,
    attributes, dimension scales and values, one source chunk at a time. The index is
    checked too: the index arrays equal the index in the series' attributes, the shots
    fill their packed array end to end, and the store has no shot the source lacks.
    """
    from layoutkit.archive import SignalMajorArchive

    return _compare_packed(source, store, SignalMajorArchive, _check_signal_major_index, inventory, skipped,
                           workers, name)


def compare_shot_packed(
    source: str | Path,
    store: str | Path | Any,
    inventory: Inventory | None = None,
    skipped: frozenset[str] = frozenset(),
    workers: int = 2,
    name: str | None = None,
) -> list[Mismatch]:
    """Compare a shot-packed Zarr store (``convert --order shot-packed``) with its source,
    as :func:`compare_signal_major` does: every packed dataset read back at its source
    path (shape, dtype, fill value, attributes, dimension scales and values), the
    mirrored ones as :func:`compare_zarr` compares them, and the index: each shot's
    datasets fill its packed arrays end to end, and the store has no dataset the source
    lacks."""
    from layoutkit.archive import ShotPackedArchive

    return _compare_packed(source, store, ShotPackedArchive, _check_shot_packed_index, inventory, skipped,
                           workers, name)


def _compare_packed(source: str | Path, store: Any, archive_class: Any, check_index: Any,
                    inventory: Inventory | None, skipped: frozenset[str], workers: int,
                    name: str | None) -> list[Mismatch]:
    from dataclasses import replace

    from layoutkit.archive import LAYOUT_ATTR, scan_grid

    inventory = inventory or read_inventory(source)
    name = name or str(store)
    found: list[Mismatch] = []

    def miss(path: str, what: str, detail: str) -> None:
        found.append(Mismatch(name, path, what, detail))

    with warnings.catch_warnings():  # walking the hierarchy meets layoutkit.json
        warnings.simplefilter("ignore")
        where = Path(store) if isinstance(store, (str, Path)) else name  # a store in a bucket: its URL
        archive = archive_class(where, root=zarr.open_group(store, mode="r", use_consolidated=False))
    arrays = [a for a in inventory.arrays if not a.dim_only and a.path not in skipped]
    packed = [a for a in arrays if archive._locate(a.path) is not None]
    mirrored = [a for a in arrays if archive._locate(a.path) is None]
    # groups without attributes that hold packed datasets are implied by the index
    implied = archive._virtual_tree()
    groups = [g for g in inventory.groups if g.path != "/" and (g.attrs or g.path not in implied)]
    found += compare_zarr(source, store, replace(inventory, groups=tuple(groups), arrays=tuple(mirrored)),
                          skipped, workers, name)
    root = next((g for g in inventory.groups if g.path == "/"), None)
    if root is not None:
        got = {k: v for k, v in archive.root.attrs.items() if k != LAYOUT_ATTR}
        _compare_attrs("/", *_without_provenance("/", dict(root.attrs), got), miss)

    def one(info: ArrayInfo) -> list[Mismatch]:
        own: list[Mismatch] = []

        def report(path: str, what: str, detail: str) -> None:
            own.append(Mismatch(name, path, what, detail))

        row = archive._locate(info.path)
        z = archive._array(row.data)
        shape = getattr(row, "shape", None) or (row.length, *z.shape[1:])  # shot-packed rows carry their shape
        if shape != info.shape:
            return [Mismatch(name, info.path, "shape", f"{shape}, expected {info.shape}")]
        dtype = np.dtype(getattr(row, "dtype", None) or z.dtype)  # shot-packed rows carry their dtype
        if dtype.newbyteorder("=") != info.dtype.newbyteorder("="):
            return [Mismatch(name, info.path, "dtype", f"{dtype}, expected {info.dtype}")]
        if hasattr(row, "fill_value"):  # in the index, as JSON (NaN and infinities as strings)
            got = [_NON_FINITE.get(v, v) if isinstance(v, str) else v
                   for v in (row.fill_value if isinstance(row.fill_value, list) else [row.fill_value])]
            got = None if got == [None] else complex(*got) if len(got) == 2 else got[0]
            want = None if info.fill_value is None else np.asarray(info.fill_value).astype(dtype).reshape(1)
            if (want is None) != (got is None) or (
                    want is not None and not _equal_values(want, np.asarray(got, dtype=dtype).reshape(1)).all()):
                report(info.path, "fill_value", f"{got!r}, expected {info.fill_value!r}")
        elif info.fill_value is not None and archive.root.metadata.zarr_format == 3:
            fv = np.asarray(info.fill_value).astype(z.dtype).reshape(1)
            if not _equal_values(fv, np.asarray(z.fill_value).astype(z.dtype).reshape(1)).all():
                report(info.path, "fill_value", f"{z.fill_value!r}, expected {info.fill_value!r}")
        _compare_attrs(info.path, dict(info.attrs), row.attrs, report)
        shot = archive._prefix.match(info.path).group("shot")
        got_dims = [[archive._scale_source(shot, r) for r in axis] for axis in row.dims]
        if info.dim_scales and any(info.dim_scales) and got_dims != [list(a) for a in info.dim_scales]:
            report(info.path, "dims", f"dimension scales {got_dims}, expected {[list(a) for a in info.dim_scales]}")
        grid = scan_grid(info.shape, info.dtype.itemsize, info.chunks)
        try:
            for region in iter_blocks(info.shape, grid):
                sel = tuple(slice(a, b) for a, b in region)
                eq = _equal_values(np.asarray(reader.read(info.path, region)), archive.get(info.path, sel))
                if not eq.all():
                    bad = np.argwhere(~eq)[0]
                    report(info.path, "values", f"first difference at index {tuple(int(i) + a for i, (a, _) in zip(bad, region))}")
                    break
        except (OSError, ValueError, RuntimeError) as exc:  # a chunk that does not decode
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            report(info.path, "values", f"cannot be read: {first}")
        return own

    with SourceReader(source, {a.path: a for a in packed}) as reader, ThreadPoolExecutor(max(1, workers)) as pool:
        for own in pool.map(one, packed):
            found.extend(own)
    check_index(archive, {a.path for a in arrays} | set(skipped), miss)
    return found


def _check_shot_packed_index(archive: Any, source_paths: set[str], miss: Any) -> None:
    """Every indexed dataset is in the source, and each shot's datasets fill its packed
    arrays end to end."""
    for shot, members in archive._segments.items():
        spans: dict[str, list[tuple[int, int]]] = {}
        for rel, seg in members.items():
            path = f"{archive.shot_path(shot)}/{rel}"
            if path not in source_paths:
                miss(path, "extra", f"the store's index of shot {shot} has {rel}, which the source does not")
            spans.setdefault(seg.data, []).append((seg.start, seg.length))
        for data, parts in spans.items():
            parts.sort()
            ends = [0] + [s + n for s, n in parts]
            if data not in archive._nodes:
                miss(data, "index", "a packed array the index names is missing")
            elif [s for s, _ in parts] != ends[:-1] or ends[-1] != archive._array(data).shape[0]:
                miss(data, "index", f"the datasets of shot {shot} do not fill the packed array end to end")


def _check_signal_major_index(archive: Any, source_paths: set[str], miss: Any) -> None:
    """The index arrays against the index in the metadata, and every stored shot
    against the source."""
    for rel, series in archive._series.items():
        for shot in {*series.rows, *series.same_as}:
            path = f"{archive.shot_path(shot)}/{rel}"
            if path not in source_paths:
                miss(path, "extra", f"the store has shot {shot} of {series.group}, which the source does not")
        parts: dict[str, list[tuple[str, Any]]] = {}
        for shot, row in series.rows.items():
            parts.setdefault(row.data, []).append((shot, row))
        for data, rows in parts.items():
            suffix = data.rsplit("/", 1)[-1][len(_DATA):]
            rows.sort(key=lambda r: r[1].start)
            try:
                ids = [str(v) for v in archive.get(f"{series.group}/{_SHOT}{suffix}")]
                starts = archive.get(f"{series.group}/{_START}{suffix}").tolist()
                lengths = archive.get(f"{series.group}/{_LENGTH}{suffix}").tolist()
            except KeyError as exc:
                miss(series.group, "index", f"an index array is missing ({exc})")
                continue
            if ids != [s for s, _ in rows] or starts != [r.start for _, r in rows] or lengths != [r.length for _, r in rows]:
                miss(data, "index", "the index arrays differ from the index in the series' attributes")
            ends = [0] + [r.start + r.length for _, r in rows]
            if [r.start for _, r in rows] != ends[:-1] or ends[-1] != archive._array(data).shape[0]:
                miss(data, "index", "the shots do not fill the packed array end to end")


_ZARR_COMPARATORS["signal-major"] = compare_signal_major
_ZARR_COMPARATORS["shot-packed"] = compare_shot_packed
