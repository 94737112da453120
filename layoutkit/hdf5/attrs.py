"""Reading HDF5 attributes: each attribute type's NumPy dtype worked out once, values made
JSON-ready (the type rules of the formats), and the bookkeeping attributes of HDF5's
dimension scales and of netCDF-4 left to structure."""

from __future__ import annotations

import base64
from typing import Any

import h5py
import numpy as np

from layoutkit.formats import LONG_DOUBLE_ATTRS_ATTR, long_double_text, region_text
from layoutkit.hdf5.files import first_line
from layoutkit.hdf5.model import Unsupported, declared_order, long_double

# Attributes that HDF5 and netCDF-4 use for their own bookkeeping. Their meaning is
# carried by structure (dimension names, coordinate arrays, fill values), not copied.
DIMENSION_SCALE_ATTRS = frozenset({"CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST"})

NETCDF4_INTERNAL_ATTRS = frozenset(
    {"_Netcdf4Dimid", "_Netcdf4Coordinates", "_nc3_strict", "_NCProperties", "_IsNetcdf4"}
)

def reference_text(f: Any, ref: Any) -> str:
    """An object reference as its path (:func:`reference_path`), a region reference as
    its text (:func:`region_as_text`): what the type rules store for a compound's
    reference and region members."""
    return region_as_text(f, ref) if isinstance(ref, h5py.RegionReference) else reference_path(f, ref)


def reference_path(f: Any, ref: Any) -> str:
    """An object reference as the type rules write it: the path it points at; the empty
    string for an unset reference or one whose object is gone."""
    if not ref:
        return ""
    try:
        return f[ref].name or ""
    except (KeyError, ValueError, OSError):
        return ""


def region_as_text(f: h5py.File, ref: h5py.RegionReference) -> str:
    """A region reference as the type rules write it (:func:`layoutkit.formats.region_text`):
    the referenced dataset's path and its selection as HDF5 lists it; the empty string
    for an unset reference or one whose dataset is gone."""
    if not ref:
        return ""
    try:
        path = f[ref].name or ""
        space = h5py.h5r.get_region(ref, f.id)
    except (KeyError, ValueError, OSError):
        return ""
    if space is None:
        return ""
    kind = space.get_select_type()
    if kind == h5py.h5s.SEL_POINTS:
        return region_text(path, "points", space.get_select_elem_pointlist().tolist())
    if kind == h5py.h5s.SEL_HYPERSLABS:
        return region_text(path, "blocks", space.get_select_hyper_blocklist().tolist())
    return region_text(path, "none" if kind == h5py.h5s.SEL_NONE else "all")


def attr_to_json(value: Any, file: h5py.File | None = None) -> Any:
    """Convert an HDF5 attribute value to a JSON-ready Python value.

    Numbers and arrays become numbers and lists, bytes become text (base64 with a
    ``base64:`` prefix when not UTF-8), object references become the referenced path,
    compound values become dicts, empty attributes become ``None``.
    """
    if isinstance(value, h5py.Empty):
        # netCDF writes an empty text attribute as a null-space string
        return "" if value.dtype.kind in "SU" else None
    if isinstance(value, h5py.RegionReference):
        return region_as_text(file, value) if file is not None else ""
    if isinstance(value, h5py.Reference):
        if not value or file is None:
            return None
        try:
            return file[value].name
        except (KeyError, ValueError, OSError):
            return None
    if isinstance(value, (np.ndarray, np.generic)) and long_double(value.dtype):  # text (LONG_DOUBLE_ATTRS_ATTR)
        text = long_double_text(value)
        return text.tolist() if text.ndim else text[()]
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
        if value.dtype.kind in "SOUV":  # a list per axis, as numbers' are (tolist)
            return [attr_to_json(v, file) for v in value] if value.ndim else attr_to_json(value[()], file)
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
# reads it as, whether it is a string, and what no layout (or Zarr) carries of it (the
# h5py works these out again for every attribute.
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
    if arr.dtype.kind == "O":  # a big-endian type's sequences, labelled as the type says
        arr = declared_order(arr, dtype)
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
    h5py.h5a.iterate(oid, lambda name, *_: names.append(decoded_name(name)),
                     index_type=h5py.h5.INDEX_CRT_ORDER if tracked else h5py.h5.INDEX_NAME)
    return names

def read_attrs(obj: h5py.HLObject, file: h5py.File, notes: list[str], is_scale: bool | None = None,
               plist: Any = None) -> dict[str, Any]:
    """An object's attributes as h5py reads them, without the netCDF-4 and dimension-scale
    bookkeeping; unreadable ones, and those no layout carries over, are left out and
    noted in ``notes`` (:class:`~layoutkit.hdf5.model.Unsupported`: commands refuse them). ``is_scale``:
    whether the object is a dimension scale, and ``plist``: its creation property list,
    when the caller knows them."""
    out: dict[Any, Any] = {}  # a name that is not UTF-8 stays bytes, as h5py lists it
    for name in attribute_names(obj.id, plist):
        if name in NETCDF4_INTERNAL_ATTRS:
            continue
        if name in DIMENSION_SCALE_ATTRS and _is_scale_bookkeeping(obj, name, is_scale):
            continue
        try:
            raw = attribute(obj.id, name)[0]
        except (OSError, TypeError, ValueError) as exc:
            notes.append(Unsupported(f"Attribute {name!r} of {obj.name!r}",
                                     f"a value HDF5 cannot read ({first_line(exc)})"))
            continue
        out[name] = raw
    return out

def _is_scale_bookkeeping(obj: h5py.HLObject, name: str, is_scale: bool | None = None) -> bool:
    if name in ("DIMENSION_LIST", "REFERENCE_LIST"):
        return True
    if not isinstance(obj, h5py.Dataset):
        return False
    return bool(h5py.h5ds.is_scale(obj.id)) if is_scale is None else is_scale

def convert_attrs(raw: dict[str, Any], f: h5py.File, is_netcdf4: bool) -> dict[str, Any]:
    out = {k: attr_to_json(v, f) for k, v in raw.items()}
    wide = {k: v.dtype.str for k, v in raw.items() if isinstance(v, (np.ndarray, np.generic)) and long_double(v.dtype)}
    if wide:  # long doubles are their text: which ones, and their type (the type rules)
        out[LONG_DOUBLE_ATTRS_ATTR] = wide
    if is_netcdf4:
        # netCDF attributes are 1-D arrays and a 1-element one is a scalar in its data
        # model (ncdump, netCDF4-python and h5netcdf all show it so)
        out = {k: v[0] if isinstance(v, list) and len(v) == 1 else v for k, v in out.items()}
    return out

def attr_text(obj: h5py.HLObject, name: str) -> str:
    v = obj.attrs.get(name)
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, np.ndarray) and v.size == 1:
        v = v.reshape(-1)[0]
        return v.decode(errors="replace") if isinstance(v, bytes) else str(v)
    return "" if v is None else str(v)


def decoded_name(name: bytes) -> str | bytes:
    """A link name as h5py gives it: text when it is UTF-8, else the bytes."""
    try:
        return name.decode("utf8")
    except UnicodeDecodeError:
        return name


__all__ = ["DIMENSION_SCALE_ATTRS", "NETCDF4_INTERNAL_ATTRS", "attr_text", "attr_to_json", "attribute", "attribute_names", "reference_path", "region_as_text",
           "attribute_value", "convert_attrs", "decoded_name", "read_attrs"]
