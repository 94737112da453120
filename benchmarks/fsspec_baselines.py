"""What users do today to copy an HDF5 file from a bucket to Zarr, as references for
``bench_object_store.py``. Both read through s3fs (fsspec) with its read-ahead cache.

    python benchmarks/fsspec_baselines.py xarray ENDPOINT s3://bucket/file.nc OUT.zarr
    python benchmarks/fsspec_baselines.py h5py   ENDPOINT s3://bucket/file.h5 OUT.zarr

``xarray``: ``xarray.open_dataset(fs.open(url), engine="h5netcdf", chunks={}).to_zarr(OUT)``
(dask reads the chunks; h5py serialises them). ``h5py``: plain_loop.py's copy, with the
file object from s3fs instead of a path.
"""

import sys

import s3fs
from plain_loop import copy_file

BLOCK = 8 * 1024**2  # s3fs's read-ahead, as in the C-Mod study's readers


def main(kind: str, endpoint: str, url: str, out: str) -> None:
    fs = s3fs.S3FileSystem(key="test", secret="test", client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"})
    with fs.open(url, "rb", block_size=BLOCK, cache_type="blockcache") as fh:
        if kind == "xarray":
            import xarray as xr

            ds = xr.open_dataset(fh, engine="h5netcdf", chunks={})
            ds.to_zarr(out, mode="w-", zarr_format=3, consolidated=True)
        else:
            copy_file(fh, out)


if __name__ == "__main__":
    main(*sys.argv[1:5])
