"""netCDF-4 files joined along their record dimension, as ``xarray.open_mfdataset`` joins them.

ERA5 comes as a file per variable and month, read together along ``time``. When the
sources of a set hold no shot (:mod:`layoutkit.hdf5.combined`) and are netCDF-4 (or
``--concat-dim`` names the dimension), :func:`concatenate` combines their walks:

- the record dimension is the unlimited one every file has (or ``--concat-dim``); the
  files are put in the order of their first coordinate value along it (as
  ``open_mfdataset(combine="by_coords")`` orders them), and must not overlap;
- a variable whose first dimension is the record dimension is one array, its files'
  datasets end to end (:attr:`ArrayInfo.segments`). Chunking and compression may differ
  between files: each dataset is read and decoded as stored. When the files encode it
  differently (``scale_factor``, ``add_offset``, ``_FillValue``, ``missing_value``), the
  values are stored decoded, as xarray decodes each file (:attr:`ArrayInfo.unpack`), so
  no decoded value changes; any other attribute that differs is refused by name (a time
  coordinate's ``units`` among them: its values would change meaning);
- a variable without the record dimension must be the same in every file (shape, type,
  attributes, values), or the run is refused by name;
- groups keep the first file's attributes (``history`` differs from file to file), as
  ``open_mfdataset``'s ``combine_attrs="override"`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from layoutkit.errors import SourcesDoNotCombineError
from layoutkit.hdf5.model import ArrayInfo, Inventory
from layoutkit.hdf5.values import same_value
from layoutkit.storage import SourceSet

RULE = "netCDF files joined along their record dimension"
ENCODING_ATTRS = frozenset({"scale_factor", "add_offset", "_FillValue", "missing_value"})
"""What xarray decodes values with: may differ between files (the values are then stored decoded)."""
_DECODING_ONLY = ("_FillValue", "missing_value", "scale_factor", "add_offset")


def record_dimension(sources: SourceSet, inventories: Sequence[Inventory]) -> str:
    """``--concat-dim``, or the unlimited dimension every file has."""
    if sources.concat_dim:
        return sources.concat_dim
    found = None
    for inv in inventories:
        unlimited = {a.dims[0] for a in inv.arrays if a.maxshape and a.maxshape[0] is None and a.dims}
        found = unlimited if found is None else found & unlimited
    if not found or len(found) != 1:
        said = "none" if not found else ", ".join(sorted(found))
        raise SourcesDoNotCombineError(
            f"{len(inventories)} netCDF sources were given and layoutkit joins them along their record dimension, "
            f"but they share {'no' if not found else 'more than one'} unlimited dimension ({said}); "
            "pass --concat-dim NAME."
        )
    return next(iter(found))


def concatenate(sources: SourceSet, inventories: Sequence[Inventory], reader: Any) -> Inventory:
    """One inventory of netCDF ``sources`` joined along their record dimension (module
    docstring). ``reader(member, info)`` reads a member's whole dataset (for the order
    of the files and the variables that must be equal)."""
    dim = record_dimension(sources, inventories)
    order = _file_order(dim, inventories, reader)
    first = inventories[order[0]]
    arrays = []
    equal: list[str] = []
    for info in first.arrays:
        infos = [_in(inventories[i], info.path, i) for i in order]
        if info.dims and dim in info.dims:
            arrays.append(_joined(info.path, dim, infos, [inventories[i].path for i in order]))
        else:
            arrays.append(replace(info, member=order[0]))
            equal.append(info.path)
    for inv in inventories:
        extra = {a.path for a in inv.arrays} - {a.path for a in first.arrays}
        if extra:
            raise SourcesDoNotCombineError(f"Variable {sorted(extra)[0]!r} is in {inv.path} and not in {first.path}; "
                                           f"{RULE} must hold the same variables.")
    _check_equal(equal, order, inventories, reader)
    return Inventory(path=str(sources), userblock_size=first.userblock_size, is_netcdf4=True,
                     groups=tuple(replace(g, member=order[0]) for g in first.groups),
                     arrays=tuple(arrays), links=first.links, attr_notes=first.attr_notes,
                     datatypes=first.datatypes)


def _in(inv: Inventory, path: str, member: int) -> ArrayInfo:
    try:
        return replace(inv.array(path), member=member)
    except KeyError:
        raise SourcesDoNotCombineError(f"Variable {path!r} is not in {inv.path}; {RULE} must hold the same "
                                       "variables.") from None


def _file_order(dim: str, inventories: Sequence[Inventory], reader: Any) -> list[int]:
    """The files in the order of their first coordinate value along ``dim``; refused
    when they overlap."""
    coords = []
    for i, inv in enumerate(inventories):
        coord = next((a for a in inv.arrays if a.name == dim and a.dims == (dim,) and not a.dim_only), None)
        if coord is None or not coord.shape[0]:
            return list(range(len(inventories)))  # no coordinate values: the order given
        values = np.asarray(reader(i, coord))
        coords.append((values[0], values[-1], i))
    coords.sort(key=lambda c: c[0])
    for (_, last, i), (start, _, j) in zip(coords, coords[1:]):
        if not last < start:
            raise SourcesDoNotCombineError(
                f"{inventories[i].path} and {inventories[j].path} overlap along {dim!r} (the first ends at {last}, the "
                f"other starts at {start}); {RULE} must follow one another."
            )
    return [i for _, _, i in coords]


def _joined(path: str, dim: str, infos: list[ArrayInfo], files: list[str]) -> ArrayInfo:
    """One array of the files' datasets end to end along their first axis."""
    first = infos[0]
    if first.dims[0] != dim:
        raise SourcesDoNotCombineError(f"Variable {path!r} has {dim!r} as axis {first.dims.index(dim)}, not its "
                                       "first; layoutkit joins files along the first axis only.")
    for info, name in zip(infos[1:], files[1:]):
        differs = ("its shape past the first axis" if info.shape[1:] != first.shape[1:] else
                   "its dimensions" if info.dims != first.dims else
                   "its type" if info.dtype != first.dtype or info.kind != first.kind else None)
        if differs is None:
            names = {k for k in set(info.attrs) | set(first.attrs)
                     if k not in ENCODING_ATTRS and not same_value(info.attrs.get(k), first.attrs.get(k))}
            differs = f"its attribute {sorted(names)[0]!r}" if names else None
        if differs is not None:
            raise SourcesDoNotCombineError(f"Variable {path!r} differs in {differs} between {files[0]} and {name}; "
                                           f"{RULE} must agree in all but their encoding.")
    unpack = any(not same_value(info.attrs.get(k), first.attrs.get(k)) for info in infos for k in ENCODING_ATTRS)
    joined = replace(first, shape=(sum(i.shape[0] for i in infos), *first.shape[1:]), layout="contiguous", stored_regions=None,
                     chunks=None, filters=(), storage_bytes=sum(i.storage_bytes for i in infos), offset=None,
                     chunk_entries=None, address=None, segments=tuple(infos), unpack=unpack)
    if unpack:
        dtype = np.result_type(*(decoded_dtype(i) for i in infos))
        attrs = {k: v for k, v in first.attrs.items() if k not in _DECODING_ONLY}
        attrs["_FillValue"] = dtype.type(np.nan) if dtype.kind == "f" else None
        joined = replace(joined, dtype=dtype, fill_value=attrs["_FillValue"],
                         attrs={k: v for k, v in attrs.items() if v is not None})
    return joined


def _variable(info: ArrayInfo, data: np.ndarray) -> Any:
    import xarray as xr

    attrs = {k: v for k, v in info.attrs.items() if k in ENCODING_ATTRS}
    return xr.Variable(tuple(f"d{i}" for i in range(data.ndim)), data, attrs=attrs)


def decode(info: ArrayInfo, data: np.ndarray) -> np.ndarray:
    """A dataset's values as xarray decodes them (mask, then scale and offset)."""
    from xarray.coding.variables import CFMaskCoder, CFScaleOffsetCoder

    variable = _variable(info, data)
    for coder in (CFMaskCoder(), CFScaleOffsetCoder()):
        variable = coder.decode(variable, name=info.path)
    return np.asarray(variable.values)


def decoded_dtype(info: ArrayInfo) -> np.dtype:
    """The type xarray decodes a dataset to."""
    return decode(info, np.zeros((0, *info.shape[1:]), dtype=info.dtype)).dtype


def _check_equal(paths: list[str], order: list[int], inventories: Sequence[Inventory], reader: Any) -> None:
    """Refuse a variable without the record dimension that differs between files."""
    from layoutkit.hdf5.values import equal_values, info_difference

    for path in paths:
        base = _in(inventories[order[0]], path, order[0])
        want = None
        for i in order[1:]:
            other = _in(inventories[i], path, i)
            differs = info_difference(base, other)
            if differs is None:
                want = np.asarray(reader(order[0], base)) if want is None else want
                if not bool(np.all(equal_values(want, np.asarray(reader(i, other))))):
                    differs = "values"
            if differs is not None:
                raise SourcesDoNotCombineError(
                    f"Variable {path!r} (without the record dimension) differs in its {differs} between "
                    f"{inventories[order[0]].path} and {inventories[i].path}; {RULE} must agree on it."
                )


__all__ = ["ENCODING_ATTRS", "RULE", "concatenate", "decode", "decoded_dtype", "record_dimension"]
