"""Equality of values and attributes, as the comparators see it: NaN equal to NaN,
integers bit-exact, structured types by bytes, attributes as JSON with the type rules'
spellings (NaN and infinities as text, fill values as xarray encodes them).

It lives on the source side, below :mod:`layoutkit.equality` (verify's proof), because
the source side decides with it too: whether the files of a set hold the same dataset
(:mod:`layoutkit.hdf5.combined`, :mod:`layoutkit.hdf5.concat`)."""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from layoutkit.formats import NON_FINITE
from layoutkit.hdf5.model import ArrayInfo, long_double, text_elements


def same_dtype(a: np.dtype, b: np.dtype) -> bool:
    """The same values can be held: equal up to byte order and, for a compound, up to its
    members' offsets and padding (field names, order and member types must match)."""
    if a.names or b.names:
        if a.names != b.names:
            return False
        return all(same_dtype(a[n], b[n]) for n in a.names or ())
    if a.subdtype or b.subdtype:
        return bool(a.subdtype and b.subdtype) and a.shape == b.shape and same_dtype(a.base, b.base)
    return a.newbyteorder("=") == b.newbyteorder("=")


def expected_dtype(info: ArrayInfo) -> np.dtype | type:
    """The dtype the type rules promise in Zarr for a source dataset: text for strings and
    references, the base integer for enums, the same numbers (any byte order) otherwise."""
    if info.kind in ("string", "reference", "region-reference") or text_elements(info.dtype) or long_double(info.dtype):
        return str
    if info.dtype.subdtype is not None:  # an array type: its numbers (or compounds), the element as trailing axes
        return info.dtype.base if info.dtype.base.names else np.dtype(info.dtype.base.str)
    if info.kind == "enum" or not info.dtype.names:
        return np.dtype(info.dtype.str)
    return info.dtype

@dataclass(frozen=True)
class Mismatch:
    """One difference between a variant and its source."""

    variant: str
    path: str
    what: str  # "missing", "shape", "dtype", "values", "fill_value", "attribute", "dims", "group", "extra"
    detail: str

    def __str__(self) -> str:
        return f"{self.variant}: {self.path}: {self.what}: {self.detail}"

def equal_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise equality, NaN equal to NaN, structured types compared by bytes (or
    field by field when a field holds variable-length objects)."""
    if a.dtype.names and b.dtype.names:
        # field by field: a compound's padding bytes and its members' byte order are no
        # value (PyTables and pandas write padded, big-endian tables; Zarr keeps them packed)
        if a.dtype.names != b.dtype.names:
            return np.zeros(np.broadcast_shapes(a.shape, b.shape), dtype=bool)
        result = np.ones(a.shape, dtype=bool)
        for name in a.dtype.names:
            fa, fb = a[name], b[name]
            eq = equal_values(fa, fb)
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

def decode_fill(v: Any, dtype: np.dtype) -> Any:
    if isinstance(v, str) and dtype.kind == "f":
        return struct.unpack("<d", base64.standard_b64decode(v))[0]
    if isinstance(v, str) and dtype.kind == "S":
        return base64.standard_b64decode(v)
    return v

def as_py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else (v.decode() if isinstance(v, bytes) else v)

def same_attr(a: Any, b: Any) -> bool:
    """``a`` from the source (JSON-ready, NaN as a float), ``b`` as the store holds it."""
    if isinstance(a, float) and isinstance(b, str) and b in NON_FINITE:
        b = NON_FINITE[b]
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (np.isnan(a) and np.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_attr(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_attr(a[k], b[k]) for k in a)
    return a == b


# what must match for a dataset held by two sources to be the same dataset
_SAME_FIELDS = ("shape", "dtype", "kind", "fill_value", "dims", "dim_scales", "is_scale", "null_space", "dim_only")


def attrs_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """The first attribute (by name) that one of two attribute sets lacks or holds with another value."""
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b or not same_attr(_plain(a[name]), _plain(b[name])):
            return f"attribute {name!r}"
    return None


def same_value(a: Any, b: Any) -> bool:
    """Two attribute values as the walk read them (numpy or not) are the same."""
    return same_attr(_plain(a), _plain(b))


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value.item() if isinstance(value, np.generic) else value


def info_difference(a: ArrayInfo, b: ArrayInfo) -> str | None:
    """What differs between two walks of a dataset (short of its values and storage): None when nothing."""
    for name in _SAME_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if name == "fill_value" and same_attr(_plain(x), _plain(y)):
            continue
        if x != y:
            return name.replace("_", " ")
    return attrs_difference(a.attrs, b.attrs)


__all__ = ["Mismatch", "as_py", "same_dtype", "attrs_difference", "info_difference", "same_value", "decode_fill", "equal_values", "expected_dtype", "same_attr"]
