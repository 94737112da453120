"""Open a source HDF5 file and its Zarr conversions side by side and compare a signal.

    python examples/read_back.py SRC.h5 STORE.zarr [STORE.zarr ...]
"""

import sys

import h5py
import numpy as np
import xarray as xr
import zarr

src, *stores = sys.argv[1:]
with h5py.File(src, "r") as f:
    shot = sorted(f["shots"])[0]
    name = sorted(f[f"shots/{shot}/signals"])[0]
    path = f"shots/{shot}/signals/{name}"
    expected = f[path][...]
print(f"{path}: {expected.shape} {expected.dtype}")
for store in stores:
    z = zarr.open_group(store, mode="r")
    got = z[path][...]
    same = np.array_equal(got, expected, equal_nan=True)
    print(f"  {store}: equal={same}, chunks={z[path].chunks}, shards={z[path].shards}")
    tree = xr.open_datatree(store, engine="zarr")
    print(f"  xarray: {tree[f'shots/{shot}/signals'].dataset[name].dims}")
    if not same:
        sys.exit(1)
