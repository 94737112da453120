"""xarray's engine="layoutkit": every registered layout, and the sources, opened lazily
as xarray users open anything else (issue #51)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import xarray as xr
from conftest import small_archive

import layoutkit
from layoutkit.layouts import LAYOUTS
from layoutkit.sample import write_sample
from layoutkit.storage.counting import LatencyModel


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
                want = archive.shot(shot)  # a node per signal
                node = tree[shot]  # the sample's signals align: the shot's variables
                assert not node.children and sorted(node.data_vars) == sorted(want.children), (name, shot)
                assert node.attrs == want.attrs, (name, shot)
                for signal in want.children:
                    got, ref = tree[f"{shot}/{signal}"], want[signal][signal]
                    xr.testing.assert_identical(got.load(), ref)
                    one = xr.open_dataset(where, engine="layoutkit", group=f"{shot}/{signal}")
                    xr.testing.assert_identical(one[signal].load(), ref)
                xr.testing.assert_identical(xr.open_dataset(where, engine="layoutkit", group=shot).load(),
                                            node.to_dataset(inherit=False).load())
        tree.close()


def test_a_shot_whose_signals_do_not_align_holds_a_node_per_signal(tmp_path):
    """Two time bases named alike (``time``, in groups of their own) of different lengths
    cannot be one dimension: that shot's signals are nodes of their own, each with its own
    time base; the other shot's signals align and are its variables."""
    path = tmp_path / "mixed.h5"
    with h5py.File(path, "w") as f:
        for shot, lengths in (("1", (4, 6)), ("2", (5, 5))):
            for signal, n in zip(("a", "b"), lengths):
                t = f.create_dataset(f"shots/{shot}/timebases/{signal}/time", data=np.arange(n) * 0.5)
                t.make_scale("time")
                s = f.create_dataset(f"shots/{shot}/signals/{signal}", data=np.arange(n, dtype="f4"))
                s.dims[0].attach_scale(t)
    tree = xr.open_datatree(path, engine="layoutkit")
    assert sorted(tree["1"].children) == ["a", "b"] and not tree["1"].data_vars
    assert tree["1/a"]["time"].size == 4 and tree["1/b"]["time"].size == 6
    assert not tree["2"].children and sorted(tree["2"].data_vars) == ["a", "b"]
    np.testing.assert_array_equal(tree["2"]["b"].values, np.arange(5, dtype="f4"))
    shot = xr.open_dataset(path, engine="layoutkit", group="1")
    assert not shot.data_vars  # the shot alone holds none of them
    np.testing.assert_array_equal(xr.open_dataset(path, engine="layoutkit", group="1/b")["time"], np.arange(6) * 0.5)


def test_the_engine_reads_values_only_when_asked(variants):
    """The values are read when asked for, and a selection reads only that selection
    (signal-major: a row's dimensions are in its index; shot-packed reads a shot's bytes
    at opening)."""
    src, found = variants
    for name in ("source", "shot-major", "virtual", "hdf5-paged by signal", "signal-major"):
        tree = xr.open_datatree(found[name], engine="layoutkit")
        shot = sorted(tree.children)[1]
        var = tree[f"{shot}/ip"]
        assert not isinstance(var.variable._data, np.ndarray), name  # not read yet
        with h5py.File(src) as f:
            np.testing.assert_array_equal(var[5:50:7].values, f[f"shots/{shot}/signals/ip"][5:50:7])
            np.testing.assert_array_equal(var.isel({var.dims[0]: -1}).values, f[f"shots/{shot}/signals/ip"][-1])
        ds = xr.open_dataset(found[name], engine="layoutkit", group=f"{shot}/ne_bar")
        assert list(ds.data_vars) == ["ne_bar"] and ds["ne_bar"].dims[0] in ds.coords
        with pytest.raises(KeyError, match="no group"):
            xr.open_dataset(found[name], engine="layoutkit", group=f"{shot}/nosuch")
        tree.close()


def test_axes_without_scales_are_named_by_length_where_one_name_would_have_two(tmp_path):
    """A plain HDF5 group of a 5-value, a 3-value and a 3 x 3 dataset, no dimension scales:
    ``dim_0`` would have lengths 5 and 3, which xarray refuses; the axes are named as
    h5netcdf names them (``phony_dims="sort"``), from the file and from its store alike."""
    src = tmp_path / "plain.h5"
    with h5py.File(src, "w") as f:
        f["a"], f["b"], f["c"] = np.arange(5), np.arange(3), np.arange(9.0).reshape(3, 3)
    want = xr.open_dataset(src, engine="h5netcdf", phony_dims="sort").load()
    layoutkit.convert(src, tmp_path / "plain.zarr")
    for place in (src, tmp_path / "plain.zarr"):
        got = xr.open_dataset(place, engine="layoutkit").load()
        got.attrs.clear()
        xr.testing.assert_identical(got, want)


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


# -- issue 62: xarray's own decoding, the stored chunks, a group that costs that group ---------


def _cf_file(path):
    """A netCDF-4 file as climate models write it (netCDF-C, not h5py): a packed variable
    with a fill value, float fill values, times with bounds, a timedelta, strings."""
    rng = np.random.default_rng(0)
    t2m = 280 + rng.normal(0, 5, size=(6, 4, 5))
    t2m[0, 0, 0] = np.nan
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), t2m, {"units": "K"}),
         "pr": (("time", "lat", "lon"), rng.random((6, 4, 5)).astype("f4"), {"units": "mm"}),
         "time_bnds": (("time", "nv"), np.stack([np.arange(6.0), np.arange(6.0) + 1], axis=1)),
         "station": (("lat",), np.array(["a", "bb", "ccc", "dddd"], dtype=object)),
         "dt": (("time",), np.arange(6.0), {"units": "hours"})},
        coords={"time": ("time", np.arange(6.0), {"units": "hours since 2000-01-01", "calendar": "standard",
                                                  "bounds": "time_bnds"}),
                "lat": ("lat", np.linspace(-30, 30, 4), {"units": "degrees_north"}),
                "lon": ("lon", np.linspace(0, 40, 5), {"units": "degrees_east"})},
        attrs={"title": "cf"})
    ds.to_netcdf(path, engine="netcdf4", encoding={
        "t2m": {"dtype": "i2", "scale_factor": 0.01, "add_offset": 280.0, "_FillValue": np.int16(-32767),
                "chunksizes": (2, 4, 5)}})
    return path


@pytest.fixture(scope="module")
def cf_variants(tmp_path_factory):  # noqa: ANN201 - (source, {name: place})
    work = tmp_path_factory.mktemp("cf")
    src = _cf_file(work / "cf.nc")
    out = {"source": str(src)}
    for fmt in (3, 2):
        layoutkit.convert(src, work / f"cf-v{fmt}.zarr", layoutkit.ConvertOptions(zarr_format=fmt, chunks="source"))
        out[f"zarr v{fmt}"] = str(work / f"cf-v{fmt}.zarr")
    return src, out


DECODINGS = [
    pytest.param({}, id="default"),
    pytest.param({"decode_cf": False}, id="decode_cf=False"),
    pytest.param({"mask_and_scale": False}, id="mask_and_scale=False"),
    pytest.param({"decode_times": False}, id="decode_times=False"),
    pytest.param({"decode_timedelta": True}, id="decode_timedelta=True"),
    pytest.param({"use_cftime": True}, id="use_cftime=True"),
    pytest.param({"concat_characters": False}, id="concat_characters=False"),
    pytest.param({"decode_coords": False}, id="decode_coords=False"),
    pytest.param({"drop_variables": ["pr"]}, id="drop_variables"),
]


@pytest.mark.parametrize("decoding", DECODINGS)
def test_a_netcdf_file_and_its_stores_decode_as_h5netcdf_decodes_the_file(cf_variants, decoding):
    """Packed variables, fill values, times and their bounds, timedeltas, strings: xarray's
    own decoding, every standard argument passed through, on the file and its Zarr copies."""
    pytest.importorskip("cftime") if decoding.get("use_cftime") else None
    src, found = cf_variants
    want = xr.open_dataset(src, engine="h5netcdf", **decoding).load()
    assert ("t2m" in want) and want["t2m"].dtype.kind == ("f" if decoding.get("mask_and_scale", True)
                                                          and decoding.get("decode_cf", True) else "i")
    for name, where in found.items():
        got = xr.open_dataset(where, engine="layoutkit", **decoding).load()
        got.attrs = {k: v for k, v in got.attrs.items() if not k.startswith("layoutkit")}  # provenance
        xr.testing.assert_identical(got, want), name


def test_chunks_are_the_stored_chunks_and_a_selection_reads_only_its_chunks(cf_variants):
    import zarr

    src, found = cf_variants
    stored = zarr.open_array(found["zarr v3"], path="t2m").chunks
    ds = xr.open_dataset(found["zarr v3"], engine="layoutkit", chunks={})
    assert ds["t2m"].encoding["preferred_chunks"] == dict(zip(ds["t2m"].dims, stored)) == {"time": 2, "lat": 4, "lon": 5}
    assert tuple(c[0] for c in ds["t2m"].chunks) == stored and len(ds["t2m"].chunks[0]) == 3  # dask: 3 chunks
    with h5py.File(src) as f:
        assert xr.open_dataset(src, engine="layoutkit", chunks={})["t2m"].chunks[0] == (2, 2, 2)
        assert f["t2m"].chunks == (2, 4, 5)
    with layoutkit.open(found["zarr v3"]) as archive:
        lazy = xr.open_dataset(archive, engine="layoutkit")  # an open archive: its counter tells the requests
        before = archive.counter.requests
        part = lazy["t2m"].isel(time=slice(2, 4)).values  # one stored chunk
        assert archive.counter.requests - before == 1
        np.testing.assert_array_equal(part, xr.open_dataset(src, engine="h5netcdf")["t2m"].values[2:4])
        before = archive.counter.requests
        assert lazy["t2m"].isel(time=slice(1, 3)).values.shape[0] == 2  # two chunks
        assert archive.counter.requests - before == 2


@pytest.mark.parametrize("node_by_node", [False, True], ids=["root read whole", "node by node"])
def test_a_group_costs_the_same_whatever_the_number_of_shots(tmp_path, monkeypatch, node_by_node):
    """One signal, or one shot, through ``group=``: the same requests for a store of 4 shots
    as for 12, on shot-major Zarr (its consolidated root read whole when small, node by node
    when large: the threshold lowered here), on the virtual layout (an Icechunk repository
    gives its root whole: past the threshold only its head is parsed; with layoutkit's index
    of its nodes, neither) and the layouts that index shots; the same values either way."""
    import layoutkit.readers.zarr_ as zarr_reader

    if node_by_node:
        monkeypatch.setattr(zarr_reader, "ROOT_HEAD_BYTES", 512)
        monkeypatch.setattr(zarr_reader, "ROOT_WHOLE_BYTES", 512)
    costs: dict[str, list[int]] = {}
    for shots in (4, 12):
        src = small_archive(tmp_path / f"a{shots}.h5", shots)
        for layout in ("shot-major", "signal-major", "shot-packed", "virtual"):
            place = f"icechunk:{tmp_path / f'a{shots}.icechunk'}" if layout == "virtual" else tmp_path / f"a{shots}-{layout}.zarr"
            layoutkit.convert(src, place, layoutkit.ConvertOptions(layout=layout))
            with layoutkit.open(place) as archive:
                if layout in ("shot-major", "virtual"):  # virtual: node by node from its index, whatever its size
                    assert archive._shallow is (node_by_node or layout == "virtual")
                before = archive.counter.requests
                ds = xr.open_dataset(archive, engine="layoutkit", group="102/s1").load()
                shot = xr.open_dataset(archive, engine="layoutkit", group="102")
                costs.setdefault(layout, []).append(archive.counter.requests - before)
                np.testing.assert_array_equal(ds["s1"].values, np.arange(50.0) * 2 + 2)
                np.testing.assert_array_equal(ds["t"].values, np.arange(50.0) + 2)
                assert ds["s1"].attrs == {"units": "V"} and shot.attrs == {"operator": "op2"}
                want = archive.shot("102")
                xr.testing.assert_identical(ds["s1"], want["s1"]["s1"])
                if layout in ("shot-major", "virtual") and (node_by_node or layout == "virtual"):
                    assert archive._shallow  # nothing above read every node
                    assert archive.shots == [str(100 + k) for k in range(shots)]  # and then all of it
    for layout, (few, many) in costs.items():
        assert few == many, (layout, costs)


def test_a_shot_major_store_read_node_by_node_reads_as_read_whole(variants, monkeypatch):
    """Node by node (a large root), every shot of the sample reads as with its root read whole."""
    import layoutkit.readers.zarr_ as zarr_reader

    src, found = variants
    with layoutkit.open(found["shot-major"]) as whole:
        want = {shot: whole.shot(shot) for shot in whole.shots}
    monkeypatch.setattr(zarr_reader, "ROOT_HEAD_BYTES", 1024)
    monkeypatch.setattr(zarr_reader, "ROOT_WHOLE_BYTES", 1024)
    for shot, tree in want.items():
        with layoutkit.open(found["shot-major"]) as archive:
            assert archive._shallow
            got = archive.shot(shot)
            assert archive._shallow
            xr.testing.assert_identical(got, tree)
            sub = xr.open_datatree(archive, engine="layoutkit", group=shot)
            for signal in tree.children:
                xr.testing.assert_identical(sub[signal].load(), tree[signal][signal])


def test_a_page_buffer_is_hdf5s_only_when_asked_for(variants):
    src, found = variants
    paged = found["hdf5-paged by shot"]
    with layoutkit.open(paged) as default, layoutkit.open(src) as plain:
        assert default.page_buffer == 0 and plain.page_buffer == 0
    with layoutkit.open(paged, page_buffer=64 << 20) as buffered:
        assert buffered.page_buffer == 64 << 20 and buffered.page_buffer_stats() is not None
    ds = xr.open_dataset(paged, engine="layoutkit", group=f"{1160930001}/ip", backend_kwargs={"page_buffer": 64 << 20})
    assert "ip" in ds


def test_drop_variables_and_an_unknown_group_in_a_group(variants):
    src, found = variants
    with layoutkit.open(src) as archive:
        shot = archive.shots[0]
    ds = xr.open_dataset(src, engine="layoutkit", group=f"{shot}/ip", drop_variables=["ip"])
    assert "ip" not in ds and len(ds.coords) == 1
    with pytest.raises(KeyError, match=f"no group '{shot}/nosuch'"):
        xr.open_dataset(src, engine="layoutkit", group=f"{shot}/nosuch")
    tree = xr.open_datatree(src, engine="layoutkit", group=shot)
    whole = xr.open_datatree(src, engine="layoutkit")[shot]
    assert set(tree.data_vars) == set(whole.data_vars) == {"ip", "ne_bar", "te_ece_01"}
    assert "ip" not in xr.open_datatree(src, engine="layoutkit", group=shot, drop_variables=["ip"]).data_vars


def test_a_tree_is_lazy_and_honours_create_default_indexes(variants):
    src, found = variants
    for name in ("source", "shot-major", "signal-major"):
        tree = xr.open_datatree(found[name], engine="layoutkit", create_default_indexes=False)
        shot = sorted(tree.children)[0]
        node = tree[shot]
        assert not node.dataset.xindexes and not isinstance(node["ip"].variable._data, np.ndarray), name
        indexed = xr.open_datatree(found[name], engine="layoutkit")[shot]
        assert set(indexed.dataset.xindexes) == set(indexed.dims), name


def test_a_shot_of_a_by_shot_file_in_a_bucket_takes_few_gets_without_hdf5s_buffer(variants):
    # where requests cost, the reader's own blocks make a few GETs of h5py's hundreds of
    # reads, and of smaller blocks than the pages HDF5's buffer reads whole; on a local
    # file HDF5's buffer saves reads that cost nothing
    src, found = variants
    paged = found["hdf5-paged by shot"]
    with layoutkit.open(paged) as archive:
        shot = archive.shots[1]
    counts = {}
    for name, buffer, model in (("local", 0, None), ("local, HDF5's buffer", 64 << 20, None),
                                ("bucket", None, LatencyModel(latency=0.01)),
                                ("bucket, HDF5's buffer", 64 << 20, LatencyModel(latency=0.01))):
        with layoutkit.open(paged, page_buffer=buffer, model=model, sleep=lambda _: None) as archive:
            archive.shot(shot)
            counts[name] = (archive.counter.requests, archive.counter.bytes)
    assert counts["bucket"][0] <= 4 < counts["local"][0], counts
    assert counts["bucket"][1] <= counts["bucket, HDF5's buffer"][1], counts
    assert counts["local, HDF5's buffer"][0] < counts["local"][0], counts
