"""Convert a netCDF-4 file to Zarr with layoutkit's Python API, then open both in xarray.

    python examples/netcdf_to_zarr.py [WORKDIR]

Writes a small climate-like netCDF-4 file (needs h5netcdf: pip install h5netcdf), converts
it to sharded Zarr v3 with zstd, and checks that xarray sees the same dataset in both.
"""

import sys
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

import layoutkit
from layoutkit.convert import ConvertOptions
from layoutkit.options import parse_compressor, parse_shards


def make_netcdf(path: Path) -> Path:
    rng = np.random.default_rng(0)
    tas = 280 + rng.normal(0, 5, size=(48, 18, 36)).astype("f4")
    tas[0, 0, :4] = np.nan  # missing values survive too
    ds = xr.Dataset(
        {"tas": (("time", "lat", "lon"), tas, {"units": "K", "long_name": "near-surface air temperature"})},
        coords={
            "time": ("time", np.arange(48.0), {"units": "hours since 2000-01-01", "calendar": "standard"}),
            "lat": ("lat", np.linspace(-85, 85, 18), {"units": "degrees_north"}),
            "lon": ("lon", np.linspace(0, 350, 36), {"units": "degrees_east"}),
        },
        attrs={"title": "layoutkit example", "Conventions": "CF-1.8"},
    )
    ds.to_netcdf(path, engine="h5netcdf", encoding={"tas": {"zlib": True, "chunksizes": (12, 18, 36)}})
    return path


def main(work: Path) -> None:
    src = make_netcdf(work / "tas.nc")
    dst = work / "tas.zarr"
    options = ConvertOptions(compressor=parse_compressor("zstd:3"), shards=parse_shards("auto"))
    summary = layoutkit.convert(src, dst, options)
    print(f"converted {src.name}: {summary.arrays} arrays, {summary.source_bytes:,} B -> {summary.dest_bytes:,} B")

    source = xr.open_dataset(src, engine="h5netcdf").load()
    store = xr.open_zarr(dst).load()
    del store.attrs["layoutkit"]  # the one attribute layoutkit adds: the recipe it wrote with
    xr.testing.assert_identical(source, store)
    print("xarray sees the same dataset in both:", dict(store.sizes))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
