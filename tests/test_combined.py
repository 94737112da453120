"""Many sources written as one archive (issue 38): convert of a list, a glob or a list
file, into every Zarr layout, equal to the files it came from and to the store made
from the one file they were split from; duplicates taken once or refused by name."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

import layoutkit
from layoutkit.cli import app
from layoutkit.errors import DifferentDuplicateError, SourcesDoNotCombineError
from layoutkit.hdf5.combined import walk_sources
from layoutkit.layouts import layouts_of
from layoutkit.sample import write_sample
from layoutkit.storage import SourceSet, as_sources
from layoutkit.verify.equality import compare_set, compare_variant

ZARR_LAYOUTS = [layout.name for layout in layouts_of("convert") if "local" in layout.destinations]  # virtual: its own tests
runner = CliRunner()


@pytest.fixture(scope="module")
def fifty(tmp_path_factory) -> tuple[Path, Path]:
    """An archive of 50 shots as one file, and as 50 files of one shot each."""
    work = tmp_path_factory.mktemp("fifty")
    one = write_sample(work / "one.h5", shots=50, signals=4, seed=5).path
    write_sample(work / "files", shots=50, signals=4, seed=5, shots_per_file=1)
    return Path(one), work / "files"


@pytest.mark.parametrize("layout", ZARR_LAYOUTS)
def test_fifty_files_into_each_layout_equal_to_them_and_to_the_one_file(fifty, tmp_path, layout):
    one, files = fifty
    assert len(list(files.glob("*.h5"))) == 50
    store = tmp_path / f"{layout}.zarr"
    result = runner.invoke(app, ["--quiet", "convert", str(files / "shots-*.h5"), str(store), "--layout", layout])
    assert result.exit_code == 0, result.output
    assert compare_set([str(files / "shots-*.h5")], store) == []  # equal to the 50 files, no extra shot
    assert compare_variant(one, store) == []  # and to the file they were split from
    with layoutkit.open(store) as combined, layoutkit.open(one) as whole:
        assert combined.shots == whole.shots


def test_the_combined_inventory_is_the_one_files(fifty):
    """Walked and combined, 50 files plan as the one file: the same datasets, each with
    its metadata, and each recording the file that holds it."""
    one, files = fifty
    members = sorted(files.glob("*.h5"))
    combined = walk_sources(SourceSet(tuple(members), "/shots/{shot}/signals/{signal}"))
    whole = walk_sources(one)
    assert sorted(a.path for a in combined.arrays) == sorted(a.path for a in whole.arrays)
    assert sorted(g.path for g in combined.groups) == sorted(g.path for g in whole.groups)
    by_path = {a.path: a for a in whole.arrays}
    for a in combined.arrays:
        assert (a.shape, a.dtype, a.dims, a.attrs.keys()) == (by_path[a.path].shape, by_path[a.path].dtype,
                                                              by_path[a.path].dims, by_path[a.path].attrs.keys())
        shot = a.path.split("/")[2]
        assert members[a.member].name == f"shots-{shot}.h5"  # read from its own file


def test_a_list_file_and_several_arguments_name_the_same_sources(fifty, tmp_path):
    _, files = fifty
    members = sorted(files.glob("*.h5"))
    listing = tmp_path / "sources.txt"
    listing.write_text("# the first half\n" + "\n".join(map(str, members[2:25])) + "\n\n")
    store = tmp_path / "listed.zarr"
    result = runner.invoke(app, ["--quiet", "convert", str(members[0]), str(members[1]), str(store),
                                 "--sources-from", str(listing), "--layout", "shot-packed"])
    assert result.exit_code == 0, result.output
    assert compare_set(members[:25], store) == []
    with layoutkit.open(store) as combined:
        assert len(combined.shots) == 25
    listing.write_text("\n".join(map(str, members[:25])))  # verify reads the same list
    quick = ["--patterns", "open,shot", "--repeat", "1", "--sample", "2"]
    verified = runner.invoke(app, ["verify", "--sources-from", str(listing), str(store), *quick])
    assert verified.exit_code == 0, verified.output
    assert "the 1 variant holds exactly the data of shots-1160930001.h5 and 24 more" in " ".join(verified.output.split())
    listing.write_text("\n".join(map(str, members[:24])))  # a shot the list does not hold: found
    verified = runner.invoke(app, ["verify", "--sources-from", str(listing), str(store), *quick])
    assert verified.exit_code == 1 and "extra: a shot none of the sources holds" in verified.output


def test_dry_run_says_the_rule_and_writes_nothing(fifty, tmp_path):
    _, files = fifty
    store = tmp_path / "dry.zarr"
    result = runner.invoke(app, ["convert", str(files / "shots-*.h5"), str(store), "--dry-run"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "50 sources combined as the union of their shots" in text and "50 shots" in text
    assert not store.exists()


@pytest.fixture
def three(tmp_path) -> list[Path]:
    write_sample(tmp_path / "three", shots=6, signals=3, seed=1, shots_per_file=2)
    return sorted((tmp_path / "three").glob("*.h5"))


def test_a_shot_in_two_files_is_taken_once_when_equal(three, tmp_path):
    again = tmp_path / "again.h5"
    shutil.copy(three[1], again)
    store = tmp_path / "once.zarr"
    layoutkit.convert([*three, again], store)
    assert compare_set(three, store) == []
    with layoutkit.open(store) as combined:
        assert len(combined.shots) == 6


def test_a_shot_in_two_files_with_different_data_is_refused_by_name(three, tmp_path):
    changed = tmp_path / "changed.h5"
    shutil.copy(three[1], changed)
    with h5py.File(changed, "r+") as f:
        f["shots/1160930004/signals/ip"][5] += 1
    before = changed.read_bytes()
    store = tmp_path / "refused.zarr"
    result = runner.invoke(app, ["convert", *map(str, three), str(changed), str(store)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert "Shot 1160930004 is in" in text and "shots-1160930003.h5" in text and "changed.h5" in text
    assert "dataset '/shots/1160930004/signals/ip' differs" in text
    assert not store.exists() and changed.read_bytes() == before  # nothing written, the sources untouched
    with h5py.File(changed, "r+") as f:  # a signal one copy has and the other not
        del f["shots/1160930003/signals/ip"]
    with pytest.raises(DifferentDuplicateError, match=r"Shot 1160930003 .*'/shots/1160930003/signals/ip' is in one only"):
        layoutkit.convert([*three, changed], tmp_path / "refused2.zarr")


def test_what_lies_outside_the_shots_must_agree(three, tmp_path):
    other = tmp_path / "other.h5"
    shutil.copy(three[2], other)
    with h5py.File(other, "r+") as f:
        f.attrs["machine"] = "another tokamak"
    with pytest.raises(DifferentDuplicateError, match=r"Group '/' is in .* and in .*other.h5 with different "
                                                      r"attributes \(attribute 'machine' differs\)"):
        layoutkit.convert([*three[:2], other], tmp_path / "x.zarr")
    assert not (tmp_path / "x.zarr").exists()


def test_files_without_shots_are_refused_saying_the_rule(tmp_path):
    for name in ("a.h5", "b.h5"):
        with h5py.File(tmp_path / name, "w") as f:
            f["x"] = [1, 2, 3]
    with pytest.raises(SourcesDoNotCombineError, match="the union of their shots under the template"):
        layoutkit.convert([tmp_path / "a.h5", tmp_path / "b.h5"], tmp_path / "x.zarr")
    result = runner.invoke(app, ["convert", str(tmp_path / "*.h5"), str(tmp_path / "y.zarr")])
    assert result.exit_code != 0 and "none of them holds a shot" in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_one_source_is_not_a_set(three):
    assert as_sources([str(three[0])], "/shots/{shot}/signals/{signal}") == three[0]
    assert isinstance(as_sources(str(three[0].parent / "*.h5"), "/shots/{shot}/signals/{signal}"), SourceSet)


def test_a_missing_member_is_one_sentence(three, tmp_path):
    result = runner.invoke(app, ["convert", str(three[0]), str(tmp_path / "nope.h5"), str(tmp_path / "x.zarr")])
    assert result.exit_code != 0 and "does not exist" in result.output and "Traceback" not in result.output


# -- netCDF files joined along their record dimension ------------------------------------


def monthly(folder: Path, months=((1, 31), (2, 28), (3, 31)), packed: bool = True, **changes) -> list[Path]:
    """ERA5-like monthly files: t2m packed as int16 with each month's own scale and offset
    (and chunking), a land-sea mask without time, time unlimited."""
    import numpy as np
    import pandas as pd
    import xarray as xr

    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    out = []
    for month, days in months:
        time = pd.date_range(f"2010-{month:02d}-01", periods=days * 4, freq="6h")
        t2m = (250 + 30 * rng.random((len(time), 5, 7))).astype("f4")
        t2m[month, 1, 2] = np.nan
        lsm = changes.get("lsm", {}).get(month, np.ones((5, 7), "f4"))
        ds = xr.Dataset({"t2m": (("time", "lat", "lon"), t2m, {"units": changes.get("units", {}).get(month, "K")}),
                         "lsm": (("lat", "lon"), lsm, {"units": "1"})},
                        coords={"time": time, "lat": np.linspace(50, 40, 5), "lon": np.linspace(0, 6, 7)},
                        attrs={"Conventions": "CF-1.6", "history": f"month {month}"})
        lo, hi = float(np.nanmin(t2m)), float(np.nanmax(t2m))
        encoding = {"t2m": {"dtype": "int16", "scale_factor": (hi - lo) / 60000, "add_offset": (hi + lo) / 2,
                            "_FillValue": -32767, "zlib": True, "chunksizes": (days * month % 7 + 3, 5, 7)}
                    if packed else {"zlib": month % 2 == 1},
                    "time": {"units": changes.get("time_units", "hours since 1900-01-01"), "dtype": "int64"}}
        path = folder / f"t2m_2010{month:02d}.nc"
        ds.to_netcdf(path, engine="h5netcdf", unlimited_dims=["time"], encoding=encoding)
        out.append(path)
    return out


def open_mf(files: list[Path]):  # noqa: ANN201
    import xarray as xr

    return xr.open_mfdataset(sorted(files), combine="by_coords", data_vars="minimal", coords="minimal",
                             compat="override", join="exact", engine="h5netcdf").load()


def without_provenance(ds):  # noqa: ANN001, ANN201
    ds.attrs.pop("layoutkit")  # what layoutkit records of the run
    return ds


@pytest.mark.parametrize("packed", [True, False], ids=["packing-differs", "plain"])
def test_monthly_netcdf_files_are_one_store_equal_to_open_mfdataset(tmp_path, packed):
    import xarray as xr

    files = monthly(tmp_path / "era5", packed=packed)
    store = tmp_path / "t2m.zarr"
    result = runner.invoke(app, ["--quiet", "convert", str(tmp_path / "era5" / "t2m_*.nc"), str(store)])
    assert result.exit_code == 0, result.output
    got = without_provenance(xr.open_zarr(store).load())
    xr.testing.assert_identical(got, open_mf(files))  # values, decoded dtypes, coordinates, attributes
    assert compare_set(files, store) == []
    dry = runner.invoke(app, ["convert", *map(str, files[::-1]), str(tmp_path / "x.zarr"), "--dry-run"])
    text = " ".join(dry.output.split())
    assert "3 sources joined along 'time'" in text and ("stored decoded" in text) == packed


def test_netcdf_files_that_do_not_join_are_refused_by_name(tmp_path):
    import numpy as np

    overlap = monthly(tmp_path / "overlap", months=((1, 31), (2, 28)))
    with h5py.File(overlap[0], "r") as jan, h5py.File(overlap[1], "r+") as feb:
        feb["time"][0] = jan["time"][-1]  # February starts where January ends
    with pytest.raises(SourcesDoNotCombineError, match="overlap along 'time'"):
        layoutkit.convert(overlap, tmp_path / "a.zarr")
    mask = monthly(tmp_path / "mask", lsm={2: np.zeros((5, 7), "f4")})
    with pytest.raises(SourcesDoNotCombineError, match=r"Variable '/lsm' \(without the record dimension\) differs "
                                                       r"in its values between .*t2m_201001.nc and .*t2m_201002.nc"):
        layoutkit.convert(mask, tmp_path / "b.zarr")
    units = monthly(tmp_path / "units", units={3: "degC"})
    with pytest.raises(SourcesDoNotCombineError, match=r"Variable '/t2m' differs in its attribute 'units'"):
        layoutkit.convert(units, tmp_path / "c.zarr")
    result = runner.invoke(app, ["convert", *map(str, units), str(tmp_path / "d.zarr")])
    assert result.exit_code != 0 and "Traceback" not in result.output and not (tmp_path / "d.zarr").exists()



@pytest.mark.parametrize("by", ["shot", "signal"])
def test_reorder_writes_several_files_as_one_paged_file(fifty, tmp_path, by):
    """A set reordered is one paged file: equal to the files (each dataset's attributes,
    scales and values from its own file) and, object for object, to the reorder of the
    file they were split from (h5diff finds nothing)."""
    import subprocess

    from layoutkit.reorder import ReorderOptions, reorder

    one, files = fifty
    out, whole = tmp_path / "set.h5", tmp_path / "whole.h5"
    result = runner.invoke(app, ["--quiet", "reorder", str(files / "shots-*.h5"), str(out), "--by", by])
    assert result.exit_code == 0, result.output
    reorder(one, whole, ReorderOptions(by=by))
    assert compare_set([str(files / "shots-*.h5")], out) == []
    assert compare_variant(one, out) == []
    diff = subprocess.run(["h5diff", "-c", str(whole), str(out)], capture_output=True, text=True)
    assert diff.returncode == 0, diff.stdout[-2000:]
    with h5py.File(out) as f, h5py.File(whole) as w:
        assert f.id.get_create_plist().get_file_space_strategy()[0] == h5py.h5f.FSPACE_STRATEGY_PAGE
        assert sorted(f["shots"]) == sorted(w["shots"])


def test_monthly_netcdf_files_reordered_are_one_netcdf_file_equal_to_open_mfdataset(tmp_path):
    """Months packed differently, reordered into one file: it opens in xarray identical
    to open_mfdataset of the months (the variable stored decoded), and verifies equal."""
    import xarray as xr

    files = monthly(tmp_path / "era5")
    out = tmp_path / "t2m.nc"
    result = runner.invoke(app, ["--quiet", "reorder", str(tmp_path / "era5" / "t2m_*.nc"), str(out), "--by", "group"])
    assert result.exit_code == 0, result.output
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        xr.testing.assert_identical(without_provenance(ds.load()), open_mf(files))
    assert compare_set(files, out) == []
    with h5py.File(out, "a") as f:  # a value changed in the variant is found
        f["t2m"][40, 0, 0] += 1
    assert [m.path for m in compare_set(files, out)] == ["/t2m"]


def test_a_set_reader_holds_a_bounded_number_of_files_open(fifty, monkeypatch):
    """An archive may be thousands of files: the set's reader keeps at most
    MAX_OPEN_MEMBERS open (closing the least recently used idle one), and reads every
    one of them right, in any order, from many threads."""
    from concurrent.futures import ThreadPoolExecutor

    import layoutkit.hdf5.raw as source_module

    one, files = fifty
    monkeypatch.setattr(source_module, "MAX_OPEN_MEMBERS", 3)
    members = sorted(files.glob("*.h5"))
    combined = walk_sources(SourceSet(tuple(members), "/shots/{shot}/signals/{signal}"))
    whole = {a.path: a for a in walk_sources(one).arrays}
    arrays = {a.path: a for a in combined.arrays}
    paths = [p for p in arrays if "/signals/" in p][::-1]
    most_open = []
    with source_module.open_reader(SourceSet(tuple(members), "/shots/{shot}/signals/{signal}"), arrays) as reader, \
            source_module.open_reader(one, whole) as truth:
        def check(path: str) -> None:
            region = tuple((0, n) for n in arrays[path].shape)
            np.testing.assert_array_equal(reader.read(path, region), truth.read(path, region))
            most_open.append(len(reader._readers))

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(check, paths))
        assert reader.bytes_read > 0
    assert len(paths) >= 150 and max(most_open) <= 3 + 4  # the limit, and at most one more per reading thread


def test_on_a_cluster_each_worker_walks_its_own_files(fifty, tmp_path):
    """--scheduler ADDRESS: the files are the unit of work, each walked by a worker
    (a read_inventory task per file in the scheduler's task stream), this process only
    combining what they found; the store equal to the files."""
    from distributed import Client, LocalCluster, get_task_stream

    _, files = fifty
    members = sorted(files.glob("*.h5"))[:6]
    store = tmp_path / "cluster.zarr"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client, get_task_stream(client) as stream:
        result = runner.invoke(app, ["--quiet", "convert", *map(str, members), str(store), "--layout", "signal-major",
                                     "--scheduler", cluster.scheduler_address])
        assert result.exit_code == 0, result.output
    walks = [t for t in stream.data if "read_inventory" in str(t["key"])]
    assert len(walks) == len(members)
    assert compare_set(members, store) == []
