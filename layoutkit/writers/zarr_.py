"""Write a Zarr store (v3 by default, v2 on request) that mirrors an HDF5 hierarchy.

The writer creates every group and array up front (metadata only), then accepts whole
write blocks (chunks, or shards when sharding) from any number of workers, and finally
consolidates the metadata. Worker processes reopen the store by path.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import zarr
import zarr.codecs

from layoutkit.errors import InvalidOptionError, UnsupportedFeatureError
from layoutkit.inventory import ArrayInfo, Inventory
from layoutkit.options import CompressorSpec
from layoutkit.plan import ArrayPlan, Region

SIDECAR = "layoutkit.json"


def target_dtype(info: ArrayInfo) -> np.dtype | type:
    """The dtype the Zarr array gets for a source dataset."""
    if info.kind in ("string", "reference"):
        return str
    if info.kind == "enum":
        return np.dtype(info.dtype.str)  # the base integer, without h5py's enum metadata
    if info.kind == "vlen":
        raise UnsupportedFeatureError(info.path, "variable-length sequences (vlen arrays)")
    if info.kind == "other":
        raise UnsupportedFeatureError(info.path, f"the HDF5 type {info.dtype}")
    if info.dtype.names:
        for name in info.dtype.names:
            sub = info.dtype.fields[name][0]
            if sub.hasobject or sub.names:
                raise UnsupportedFeatureError(
                    info.path, f"a compound type with a nested or variable-length member {name!r}"
                )
    return np.dtype(info.dtype.str) if not info.dtype.names else info.dtype


def _zarr3_compressors(spec: CompressorSpec, itemsize: int) -> list[Any]:
    shuffle = [numcodecs.zarr3.Shuffle(elementsize=itemsize)] if spec.shuffle and spec.name != "blosc" else []
    if spec.name == "none":
        return []
    if spec.name == "zstd":
        return [*shuffle, zarr.codecs.ZstdCodec(level=spec.level)]
    if spec.name == "gzip":
        return [*shuffle, zarr.codecs.GzipCodec(level=spec.level)]
    if spec.name == "lz4":
        return [zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle" if spec.shuffle else "noshuffle")]
    if spec.name == "blosc":
        return [
            zarr.codecs.BloscCodec(
                cname=spec.cname, clevel=spec.level, shuffle="shuffle" if spec.shuffle else "noshuffle"
            )
        ]
    raise InvalidOptionError(
        f"Compressor {spec} is an HDF5 filter that Zarr does not have; "
        "choose none, zstd, gzip, lz4 or blosc for a Zarr target."
    )


def _zarr2_codecs(spec: CompressorSpec, itemsize: int) -> tuple[list[Any], Any]:
    filters = [numcodecs.Shuffle(elementsize=itemsize)] if spec.shuffle and spec.name != "blosc" else []
    if spec.name == "none":
        return filters, None
    if spec.name == "zstd":
        return filters, numcodecs.Zstd(level=spec.level)
    if spec.name == "gzip":
        return filters, numcodecs.GZip(level=spec.level)
    if spec.name == "lz4":
        return [], numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1 if spec.shuffle else 0)
    if spec.name == "blosc":
        return [], numcodecs.Blosc(cname=spec.cname, clevel=spec.level, shuffle=1 if spec.shuffle else 0)
    raise InvalidOptionError(
        f"Compressor {spec} is an HDF5 filter that Zarr does not have; "
        "choose none, zstd, gzip, lz4 or blosc for a Zarr target."
    )


def _json_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    # zarr writes strict JSON for v2: NaN/Inf become strings, as zarr does for fill values
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not np.isfinite(v):
            return "NaN" if np.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        if isinstance(v, list):
            return [clean(x) for x in v]
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return v

    return {k: clean(v) for k, v in attrs.items()}


def _fill_value(info: ArrayInfo, dtype: Any, zarr_format: int, is_netcdf4: bool) -> Any:
    if dtype is str:
        return ""
    fv = info.fill_value
    if zarr_format == 3:
        if fv is None:
            return None
        return fv if info.dtype.names else np.asarray(fv).astype(dtype)[()]
    # v2: xarray reads fill_value as the netCDF _FillValue (a mask), so only a real
    # _FillValue, or a deliberate non-default fill of a plain HDF5 file, goes there.
    if "_FillValue" in info.attrs:
        return np.asarray(info.attrs["_FillValue"]).astype(dtype)[()]
    if is_netcdf4 or fv is None or info.dtype.names:
        return None
    fv = np.asarray(fv).astype(dtype)[()]
    return None if (fv == np.zeros((), dtype)[()]) else fv


class ZarrWriter:
    """Creates the Zarr hierarchy for a plan and writes blocks into it.

    Parameters
    ----------
    path
        The directory of the store (layoutkit writes to a temporary sibling and renames).
    zarr_format
        2 or 3.
    """

    name = "zarr"

    def __init__(self, path: str | Path, zarr_format: int = 3) -> None:
        self.path = Path(path)
        self.zarr_format = zarr_format
        self._arrays: dict[str, zarr.Array] = {}

    # -- creation ---------------------------------------------------------------

    def create(self, inventory: Inventory, plans: list[ArrayPlan], sidecar: dict[str, Any]) -> None:
        """Create every group (with attributes) and every planned array (metadata only)."""
        from xarray.backends.zarr import FillValueCoder

        root = zarr.open_group(self.path, mode="w-", zarr_format=self.zarr_format)
        groups: dict[str, zarr.Group] = {"/": root}
        for g in inventory.groups:
            if g.path != "/":
                groups[g.path] = root.require_group(g.path.lstrip("/"))
            groups[g.path].attrs.update(_json_attrs(g.attrs))
        infos = {a.path: a for a in inventory.arrays}
        for plan in plans:
            info = infos[plan.path]
            parent_path, _, name = plan.path.rpartition("/")
            parent = groups.get(parent_path or "/") or root.require_group(parent_path.lstrip("/"))
            dtype = target_dtype(info)
            np_dtype = np.dtype(dtype) if dtype is not str else np.dtype(object)
            attrs = dict(info.attrs)
            if info.kind == "enum" and info.enum_mapping:
                attrs["hdf5_enum"] = {k: int(v) for k, v in info.enum_mapping.items()}
            if info.kind == "reference":
                attrs["hdf5_reference"] = "object references, stored as the referenced paths"
            kwargs: dict[str, Any] = dict(
                name=name,
                shape=plan.shape,
                dtype=dtype,
                chunks=plan.chunks if plan.shape else "auto",
                fill_value=_fill_value(info, dtype, self.zarr_format, inventory.is_netcdf4),
                overwrite=False,
            )
            if self.zarr_format == 3:
                if "_FillValue" in attrs and np_dtype.kind in "biufcS":
                    fv = attrs["_FillValue"]
                    fv = fv.encode() if np_dtype.kind == "S" and isinstance(fv, str) else fv
                    attrs["_FillValue"] = FillValueCoder.encode(np.asarray(fv, np_dtype)[()].item(), np_dtype)
                kwargs["dimension_names"] = list(info.dims) if info.dims else None
                kwargs["compressors"] = _zarr3_compressors(plan.compressor, np_dtype.itemsize)
                if plan.shards:
                    kwargs["shards"] = plan.shards
                if np_dtype.byteorder == ">" and np_dtype.kind in "iufc":
                    kwargs["serializer"] = zarr.codecs.BytesCodec(endian="big")
            else:
                attrs.pop("_FillValue", None)
                attrs["_ARRAY_DIMENSIONS"] = list(info.dims)
                filters, compressor = _zarr2_codecs(plan.compressor, np_dtype.itemsize)
                kwargs["filters"] = filters or None
                kwargs["compressors"] = compressor
            kwargs["attributes"] = _json_attrs(attrs)
            parent.create_array(**kwargs)
        (self.path / SIDECAR).write_text(json.dumps(sidecar, indent=2, default=str))

    # -- data -------------------------------------------------------------------

    def _array(self, path: str) -> zarr.Array:
        arr = self._arrays.get(path)
        if arr is None:
            arr = zarr.open_array(self.path / path.lstrip("/"), mode="r+", zarr_format=self.zarr_format)
            self._arrays[path] = arr
        return arr

    def write(self, path: str, region: Region, data: np.ndarray) -> None:
        """Write one whole block (chunk or shard) of ``path``."""
        arr = self._array(path)
        if not region:
            arr[...] = data
        else:
            arr[tuple(slice(a, b) for a, b in region)] = data

    def finish(self, consolidate: bool) -> None:
        """Consolidate the metadata (one read to open the whole hierarchy)."""
        if consolidate:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                zarr.consolidate_metadata(self.path, zarr_format=self.zarr_format)


WRITERS = {"zarr": ZarrWriter}
