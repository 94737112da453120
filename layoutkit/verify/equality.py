"""Prove that a Zarr variant holds exactly the data of its HDF5 source.

:func:`compare_zarr` walks the source inventory and checks, for every array, that the
store has it at the same path with the same shape, an equivalent dtype, the same fill
value, the same attributes and dimension names, and the same values (NaN-aware,
bit-exact for integers), streamed one write block at a time so memory stays bounded.
It returns a list of :class:`Mismatch`; an empty list means equal.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from layoutkit.inventory import ArrayInfo, Inventory, read_inventory
from layoutkit.plan import iter_blocks
from layoutkit.source import SourceReader
from layoutkit.writers.zarr_ import _json_attrs, target_dtype


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
    """Element-wise equality, NaN equal to NaN, structured types compared by bytes."""
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
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (np.isnan(a) and np.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_attr(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_attr(a[k], b[k]) for k in a)
    return a == b


def compare_zarr(
    source: str | Path,
    store: str | Path,
    inventory: Inventory | None = None,
    skipped: frozenset[str] = frozenset(),
) -> list[Mismatch]:
    """Compare a Zarr store written by ``convert`` with its HDF5 source.

    Parameters
    ----------
    source
        The HDF5 file.
    store
        The Zarr store.
    skipped
        Paths left out on purpose (``--skip-unsupported``); not reported as missing.

    Returns
    -------
    list of Mismatch
        Empty when the store is faithful.
    """
    inventory = inventory or read_inventory(source)
    name = str(store)
    # the arrays' own metadata is the truth; consolidated metadata is only a cache of it
    root = zarr.open_group(store, mode="r", use_consolidated=False)
    zfmt = root.metadata.zarr_format
    found: list[Mismatch] = []

    def miss(path: str, what: str, detail: str) -> None:
        found.append(Mismatch(name, path, what, detail))

    for g in inventory.groups:
        try:
            zg = root if g.path == "/" else root[g.path.lstrip("/")]
        except KeyError:
            miss(g.path, "missing", "group not in the store")
            continue
        if not isinstance(zg, zarr.Group):
            miss(g.path, "group", "is an array in the store")
            continue
        _compare_attrs(g.path, _json_attrs(g.attrs), dict(zg.attrs), miss)

    arrays = [a for a in inventory.arrays if not a.dim_only and a.path not in skipped]
    with SourceReader(source, {a.path: a for a in arrays}) as reader:
        for info in arrays:
            try:
                z = root[info.path.lstrip("/")]
            except KeyError:
                miss(info.path, "missing", "array not in the store")
                continue
            if not isinstance(z, zarr.Array):
                miss(info.path, "missing", "is a group in the store")
                continue
            _compare_array(info, z, zfmt, reader, miss)
    return found


def _compare_attrs(path: str, expected: dict[str, Any], got: dict[str, Any], miss: Any) -> None:
    for key, value in expected.items():
        if key not in got:
            miss(path, "attribute", f"{key!r} missing")
        elif not _same_attr(value, got[key]):
            miss(path, "attribute", f"{key!r} is {got[key]!r}, expected {value!r}")
    for key in got:
        if key not in expected and key not in ("_ARRAY_DIMENSIONS", "hdf5_enum", "hdf5_reference", "hdf5_null_dataspace"):
            miss(path, "attribute", f"{key!r} is not in the source")


def _compare_array(info: ArrayInfo, z: zarr.Array, zfmt: int, reader: SourceReader, miss: Any) -> None:
    path = info.path
    if tuple(z.shape) != info.shape:
        miss(path, "shape", f"{tuple(z.shape)}, expected {info.shape}")
        return
    want = target_dtype(info)
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
    expected = _json_attrs(dict(info.attrs))
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
