"""xarray's engine="layoutkit": every registered layout, and the sources, opened lazily
as xarray users open anything else (issue #51)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import xarray as xr

import layoutkit
from layoutkit.layouts import LAYOUTS
from layoutkit.sample import write_sample


@pytest.fixture(scope="module")
def variants(tmp_path_factory):  # noqa: ANN201 - {name: what layoutkit.open takes}
    from layoutkit.layouts.hdf5_paged.options import ReorderOptions
    from layoutkit.reorder import reorder

    work = tmp_path_factory.mktemp("engine")
    src = write_sample(work / "shots.h5", shots=3, signals=3, seed=4).path
    out = {"source": str(src)}
    for layout in dict.fromkeys(LAYOUTS.values()):
        if layout.format == "hdf5":
            for by in ("shot", "signal"):
                reorder(src, work / f"by-{by}.h5", ReorderOptions(by=by))
                out[f"{layout.name} by {by}"] = str(work / f"by-{by}.h5")
            continue
        place = work / f"{layout.name}.store"
        layoutkit.convert(src, place, layoutkit.ConvertOptions(layout=layout.name))
        out[layout.name] = f"icechunk:{place}" if "local" not in layout.destinations else str(place)
    return src, out


def test_the_engine_opens_every_layout_as_layoutkit_reads_it(variants):
    src, found = variants
    assert {"shot-major", "signal-major", "shot-packed", "virtual"} <= set(found)
    for name, where in found.items():
        tree = xr.open_datatree(where, engine="layoutkit")
        with layoutkit.open(where) as archive:
            assert sorted(tree.children) == archive.shots, name
            for shot in archive.shots:
                want = archive.shot(shot)
                assert sorted(tree[shot].children) == sorted(want.children), (name, shot)
                for signal in want.children:
                    got, ref = tree[f"{shot}/{signal}"][signal], want[signal][signal]
                    xr.testing.assert_identical(got.load(), ref)
        tree.close()


def test_the_engine_reads_values_only_when_asked(variants):
    """The values are read when asked for, and a selection reads only that selection
    (signal-major: a row's dimensions are in its index; shot-packed reads a shot's bytes
    at opening)."""
    src, found = variants
    for name in ("source", "shot-major", "virtual", "hdf5-paged by signal", "signal-major"):
        tree = xr.open_datatree(found[name], engine="layoutkit")
        shot = sorted(tree.children)[1]
        var = tree[f"{shot}/ip"]["ip"]
        assert not isinstance(var.variable._data, np.ndarray), name  # not read yet
        with h5py.File(src) as f:
            np.testing.assert_array_equal(var[5:50:7].values, f[f"shots/{shot}/signals/ip"][5:50:7])
            np.testing.assert_array_equal(var.isel({var.dims[0]: -1}).values, f[f"shots/{shot}/signals/ip"][-1])
        ds = xr.open_dataset(found[name], engine="layoutkit", group=f"{shot}/ne_bar")
        assert list(ds.data_vars) == ["ne_bar"] and ds["ne_bar"].dims[0] in ds.coords
        with pytest.raises(KeyError, match="no group"):
            xr.open_dataset(found[name], engine="layoutkit", group=f"{shot}/nosuch")
        tree.close()


def test_a_netcdf_file_opens_as_its_groups(tmp_path):
    """A file that is not a shot archive: its groups and arrays at their paths, equal to
    what xarray's own netCDF engine reads."""
    ds = xr.Dataset({"t2m": (("time", "lat"), np.arange(12.0).reshape(4, 3), {"units": "K"})},
                    coords={"time": np.arange(4), "lat": [10.0, 20.0, 30.0]}, attrs={"title": "demo"})
    path = tmp_path / "era.nc"
    ds.to_netcdf(path, engine="h5netcdf")
    got = xr.open_dataset(path, engine="layoutkit")
    want = xr.open_dataset(path, engine="h5netcdf")
    np.testing.assert_array_equal(got["t2m"].values, want["t2m"].values)
    assert got["t2m"].dims == want["t2m"].dims and got["t2m"].attrs["units"] == "K"
    np.testing.assert_array_equal(got["lat"].values, want["lat"].values)
    assert got.attrs.get("title") == "demo"
