"""``layoutkit trace``: what a program reads, recorded from every Python process it starts
(issue 67). Each test runs a real script under the recorder and checks the workload file
against what the script itself read."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.trace.recorder import selection_of
from layoutkit.trace.workload import access_order, load

runner = CliRunner()


def sample_signal(path: Path, shots: int, signals: int, seed: int, shot: int = 0) -> tuple[str, str, str]:
    """A sample archive at ``path``: the shot, signal and path of its first signal of one shot."""
    from layoutkit.sample import write_sample

    write_sample(path, shots=shots, signals=signals, seed=seed)
    with h5py.File(path) as f:
        name = sorted(f["shots"])[shot]
        signal = sorted(f[f"shots/{name}/signals"])[0]
    return name, signal, f"shots/{name}/signals/{signal}"


def traced(tmp_path: Path, script: str, *args: str) -> tuple[object, str]:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    out = tmp_path / "w.json"
    result = runner.invoke(app, ["trace", "--out", str(out), "--", sys.executable, str(path), *args])
    assert result.exit_code == 0, result.output
    return load(out), result.output


@pytest.mark.parametrize("key", [
    (), Ellipsis, 3, -1, slice(2, 9), slice(None, None, 3), (slice(1, 4), 2), (Ellipsis, 0), (0, Ellipsis, slice(1, 2)),
    np.array([1, 4, 4, 7]), [0, 2], (slice(None), np.array([True, False, True, False, False])), np.int64(2),
    np.arange(40).reshape(8, 5) % 7 == 3, (Ellipsis, np.arange(15).reshape(5, 3) > 11), (1, np.eye(5, 3, dtype=bool)),
], ids=repr)
def test_a_selection_covers_what_numpy_selects(key) -> None:
    """As many entries as axes, covering as many elements as numpy selects, and each
    axis's range holding every index selected (a mask over several axes included)."""
    shape = (8, 5, 3)
    axes = selection_of(key, shape)
    assert len(axes) == len(shape)
    n = 1
    for a in axes:
        n *= a["points"] if isinstance(a, dict) else len(range(*a))
    assert n == np.empty(shape)[key].size
    where = np.nonzero(np.ones(shape, dtype=bool) & np.isin(np.arange(np.prod(shape)).reshape(shape),
                                                             np.arange(np.prod(shape)).reshape(shape)[key]))
    for a, picked in zip(axes, where):
        low, high = (a["min"], a["max"] + 1) if isinstance(a, dict) else (a[0], a[1])
        assert picked.size == 0 or (low <= picked.min() and picked.max() < high), (a, picked)


def test_reads_from_threads_and_spawned_processes_are_recorded_as_the_script_made_them(tmp_path: Path) -> None:
    src = tmp_path / "a.h5"
    with h5py.File(src, "w") as f:
        for i in range(4):
            f[f"shots/{i}/signals/ip"] = np.arange(100.0) + i
    workload, output = traced(tmp_path, """
        import sys
        import multiprocessing as mp
        from concurrent.futures import ThreadPoolExecutor
        import h5py
        import numpy as np

        def head(name):
            with h5py.File(sys.argv[1]) as f:
                return float(f[name][:10].sum())

        if __name__ == "__main__":
            with h5py.File(sys.argv[1]) as f:
                for _ in range(3):
                    f["shots/0/signals/ip"][...]          # the same read three times: counted
                f["shots/1/signals/ip"][20:40:2]
                f["shots/1/signals/ip"][np.array([1, 5, 7])]
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(head, ["shots/2/signals/ip", "shots/3/signals/ip"]))
            with mp.get_context("spawn").Pool(2) as pool:
                pool.map(head, ["shots/0/signals/ip", "shots/1/signals/ip"])
    """, str(src))
    main = min(r.process for r in workload.reads)
    here = [(r.array, r.selection, r.count) for r in workload.reads if r.thread == "MainThread" and r.process == main]
    assert here == [("/shots/0/signals/ip", ((0, 100, 1),), 3), ("/shots/1/signals/ip", ((20, 40, 2),), 1),
                    ("/shots/1/signals/ip", ({"points": 3, "min": 1, "max": 7},), 1)]
    threads = {(r.array, r.selection) for r in workload.reads if r.process == main and r.thread != "MainThread"}
    assert threads == {("/shots/2/signals/ip", ((0, 10, 1),)), ("/shots/3/signals/ip", ((0, 10, 1),))}
    spawned = {(r.array, r.selection) for r in workload.reads if r.process != main}
    assert spawned == {("/shots/0/signals/ip", ((0, 10, 1),)), ("/shots/1/signals/ip", ((0, 10, 1),))}
    assert {r.source for r in workload.reads} == {str(src)} and {r.api for r in workload.reads} == {"h5py"}
    assert workload.processes >= 2 and "from" in output and "wrote" in output
    first = [r.first for r in workload.reads if r.process == main and r.thread == "MainThread"]
    assert first == sorted(first)  # in the order the script made them


def test_monthly_netcdf_files_read_with_xarray_and_dask_record_the_point_and_the_map(tmp_path: Path) -> None:
    """The issue's example: ERA5-like monthly files, a time series at one grid point across
    the months (xarray, dask, h5netcdf), then one month's full map."""
    import pandas as pd
    import xarray as xr

    files = []
    for month in (1, 2, 3):
        time = pd.date_range(f"2010-{month:02d}-01", periods=8, freq="6h")
        ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"), np.random.default_rng(month).random((8, 6, 9)))},
                        coords={"time": time, "latitude": np.arange(6.0), "longitude": np.arange(9.0)})
        files.append(tmp_path / f"era5-{month}.nc")
        ds.to_netcdf(files[-1], engine="h5netcdf", encoding={"t2m": {"chunksizes": (4, 6, 9)}})
    workload, _ = traced(tmp_path, """
        import sys
        import xarray as xr

        ds = xr.open_mfdataset(sys.argv[1:], engine="h5netcdf", chunks={"time": 4}, combine="by_coords")
        ds.t2m.isel(latitude=2, longitude=5).load()      # a point through every month
        xr.open_dataset(sys.argv[2], engine="h5netcdf").t2m.isel(time=0).load()   # one month's map
    """, *map(str, files))
    t2m = [r for r in workload.reads if r.array == "/t2m"]
    # the point through the months: dask reads each of its chunks whole from every file (what
    # the files were asked for, which is what a layout must serve), on dask's threads
    point = [r for r in t2m if r.thread != "MainThread"]
    assert sorted((r.source, r.selection) for r in point) == sorted(
        (str(f), (rows, (0, 6, 1), (0, 9, 1))) for f in files for rows in ((0, 4, 1), (4, 8, 1)))
    # then the map: one time step of the second month, in the main thread, last
    maps = [r for r in t2m if r.thread == "MainThread"]
    assert [(r.source, r.selection) for r in maps] == [(str(files[1]), ((0, 1, 1), (0, 6, 1), (0, 9, 1)))]
    assert maps[0].first >= max(r.first for r in point) and all(r.api == "h5py" for r in t2m)


def test_zarr_reads_and_layoutkit_open_are_recorded_once_each(tmp_path: Path) -> None:
    """A read through ``layoutkit.open`` is the archive's, not again zarr's beneath it;
    xarray's zarr engine with dask is zarr's, from the threads dask read in."""
    src = tmp_path / "s.h5"
    shot, signal, name = sample_signal(src, 2, 3, 1)
    name = "/" + name
    store = tmp_path / "s.zarr"
    assert runner.invoke(app, ["-q", "convert", str(src), str(store)]).exit_code == 0
    workload, _ = traced(tmp_path, f"""
        import sys
        import layoutkit
        import xarray as xr

        with layoutkit.open(sys.argv[1]) as archive:
            archive.get("{name}", (slice(0, 50),))
        ds = xr.open_dataset(sys.argv[1], engine="zarr", group="shots/{shot}/signals", chunks={{}})
        ds["{signal}"].load()
    """, str(store))
    ours = [r for r in workload.reads if r.api == "layoutkit"]
    assert [(r.source, r.array, r.selection) for r in ours] == [(str(store), name, ((0, 50, 1),))]
    zarr_reads = [r for r in workload.reads if r.api == "zarr" and r.array == name]
    assert zarr_reads and all(r.source == str(store) for r in zarr_reads)
    assert sum(r.elements for r in zarr_reads) == ours[0].shape[0]  # the whole signal, in dask's chunks
    assert all(r.first > ours[0].first for r in zarr_reads)


def test_show_says_the_order_and_draws_it(tmp_path: Path) -> None:
    src = tmp_path / "a.h5"
    with h5py.File(src, "w") as f:
        for shot in ("1", "2", "3"):
            for sig in ("a", "b"):
                f[f"shots/{shot}/signals/{sig}"] = np.zeros(10)
    _, _ = traced(tmp_path, """
        import sys
        import h5py
        with h5py.File(sys.argv[1]) as f:
            for sig in ("a", "b"):
                for shot in ("1", "2", "3"):
                    f[f"shots/{shot}/signals/{sig}"][...]
    """, str(src))
    shown = runner.invoke(app, ["trace", "--show", str(tmp_path / "w.json"), "--plot", str(tmp_path / "w.png")])
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.output.split())
    assert "6 reads (6 distinct) from 1 process, 1 thread" in said and "in order: by signal" in said, said
    assert (tmp_path / "w.png").read_bytes()[:4] == b"\x89PNG"
    by_shot = load(tmp_path / "w.json").reads
    by_shot = sorted(by_shot, key=lambda r: r.array)  # shot 1's a, b, then shot 2's...
    assert access_order(by_shot, "/shots/{shot}/signals/{signal}") == "by shot"


def test_what_cannot_be_traced_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "exists.json").write_text("{}")
    (tmp_path / "other.json").write_text(json.dumps({"format": "something else"}))
    cases = [
        (["trace", "--out", str(tmp_path / "w.json")], "Expected a command to trace"),
        (["trace", "--out", str(tmp_path / "w.json"), "--", "no-such-program-here"], "was not found"),
        (["trace", "--out", str(tmp_path / "exists.json"), "--", sys.executable, "-c", "pass"], "exists"),
        (["trace", "--out", str(tmp_path / "exists.json" / "w.json"), "--", sys.executable, "-c", "pass"], "exists.json"),
        (["trace", "--show", str(tmp_path / "other.json")], "is not a workload file"),
        (["trace", "--show", str(tmp_path / "missing.json")], "is not a workload file"),
    ]
    for args, words in cases:
        result = runner.invoke(app, args)
        said = " ".join(result.output.split())
        assert result.exit_code == 2 and said.startswith("error:") and words in said, (args, said)
    assert not (tmp_path / "w.json").exists()
    failing = runner.invoke(app, ["trace", "--out", str(tmp_path / "w.json"), "--", sys.executable, "-c",
                                  "import sys; sys.exit(3)"])
    assert failing.exit_code == 3 and load(tmp_path / "w.json").exit_code == 3  # the command's own exit


requires_strace_and_h5dump = pytest.mark.skipif(
    shutil.which("strace") is None or shutil.which("h5dump") is None, reason="needs strace and Debian's hdf5-tools")


@requires_strace_and_h5dump
def test_a_c_program_traced_through_its_system_calls_reads_what_python_reads(tmp_path: Path) -> None:
    """The same reads made by h5dump (the HDF5 C library) and by h5py: the system calls'
    offsets, mapped back through the file's chunk index, give the arrays and selections
    the Python recorder gives (chunk-aligned hyperslabs: a C program's reads are the
    chunks it fetched). The library's metadata reads are counted, not mapped."""
    src = tmp_path / "c.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("grid/t", data=np.arange(4000.0).reshape(400, 10), chunks=(100, 10), compression="gzip")
        f.create_dataset("series/ip", data=np.arange(3000, dtype="i4"), chunks=(1000,))
    reads = [("/grid/t", "100,0", "200,10"), ("/series/ip", "1000", "1000"), ("/grid/t", "0,0", "100,10")]
    from_c = set()
    for i, (name, start, count) in enumerate(reads):
        out = tmp_path / f"c{i}.json"
        result = runner.invoke(app, ["trace", "--syscalls", "--out", str(out), "--", "h5dump", "-d", name, "-s", start,
                                     "-c", count, str(src)])
        assert result.exit_code == 0, result.output
        workload = load(out)
        from_c |= {(r.array, json.dumps(r.selection)) for r in workload.reads}
        assert {r.source for r in workload.reads} == {str(src)} and workload.unmapped[str(src)]["reads"] > 0
    python, _ = traced(tmp_path, """
        import sys
        import h5py
        with h5py.File(sys.argv[1]) as f:
            f["grid/t"][100:200, 0:10]
            f["grid/t"][200:300, 0:10]
            f["series/ip"][1000:2000]
            f["grid/t"][0:100, :]
    """, str(src))
    from_python = {(r.array, json.dumps(r.selection)) for r in python.reads}
    assert from_c == from_python, (from_c, from_python)


def test_a_zarr_store_read_by_any_program_is_mapped_through_its_chunk_keys(tmp_path: Path) -> None:
    """Programs that do not read through Python's recorder, on local Zarr stores: ``cat``
    of chunk files (v3 and v2 keys) is a read of those chunks' boxes; zarr-python's read of
    part of a sharded array, traced through its system calls, is a read of the inner chunk
    its byte range holds (found in the shard's index), and its reads of documents and of
    the shard's index are counted per store, not mapped."""
    import zarr

    store, old = tmp_path / "s.zarr", tmp_path / "v2.zarr"
    root = zarr.open_group(store, mode="w")
    root.create_array("grid/t", shape=(400, 10), chunks=(100, 10), dtype="f8")[:] = np.arange(4000.0).reshape(400, 10)
    # inner chunks larger than Python's 8 KiB read buffer: read alone, not with the whole shard
    root.create_array("series/ip", shape=(300_000,), chunks=(25_000,), shards=(100_000,),
                      dtype="f8")[:] = np.random.default_rng(1).random(300_000)
    zarr.open_group(old, mode="w", zarr_format=2).create_array("x", shape=(50, 4), chunks=(10, 4), dtype="i2")[:] = 1
    out = tmp_path / "cat.json"
    result = runner.invoke(app, ["trace", "--syscalls", "--out", str(out), "--", "sh", "-c",
                                 f"cat {store}/grid/t/c/1/0 {old}/x/3.0 {store}/zarr.json > /dev/null"])
    assert result.exit_code == 0, result.output
    workload = load(out)
    assert sorted((r.source, r.array, r.selection) for r in workload.reads) == sorted([
        (str(store), "/grid/t", ((100, 200, 1), (0, 10, 1))), (str(old), "/x", ((30, 40, 1), (0, 4, 1)))])
    assert workload.unmapped == {str(store): {"reads": 1, "bytes": (store / "zarr.json").stat().st_size}}
    out = tmp_path / "zarr.json"
    result = runner.invoke(app, ["trace", "--syscalls", "--out", str(out), "--", sys.executable, "-c",
                                 f"import zarr; zarr.open_array({str(store / 'series/ip')!r}, mode='r')[125_000:150_000]"])
    assert result.exit_code == 0, result.output
    workload = load(out)
    assert [(r.source, r.array, r.selection) for r in workload.reads] == [
        (str(store), "/series/ip", ((125_000, 150_000, 1),))]
    assert workload.unmapped[str(store)]["reads"] >= 2  # the array's document and the shard's index


def test_a_range_of_the_library_s_metadata_is_not_an_array_read(tmp_path: Path) -> None:
    """A read that runs past an array's bytes into bytes no array holds (HDF5's metadata
    cache reads whole blocks) is the library's, counted as unmapped."""
    from layoutkit.trace.syscalls import FileRead, map_reads

    src = tmp_path / "m.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("a", data=np.arange(100, dtype="f8"))  # contiguous
    with h5py.File(src) as f:
        offset = f["a"].id.get_offset()
    records, unmapped = map_reads([FileRead(str(src), offset + 80, 160, 1, 0.0),   # elements 10-30
                                   FileRead(str(src), offset - 16, 64, 1, 0.1),    # a header's bytes and a's first
                                   FileRead(str(tmp_path / "not-hdf5.txt"), 0, 10, 1, 0.2)])
    assert [(r["array"], r["selection"]) for r in records] == [("/a", [[10, 30, 1]])]
    assert unmapped == {str(src): {"reads": 1, "bytes": 64}}


def test_verify_replays_a_workload_on_every_variant_and_proves_its_selections(tmp_path: Path) -> None:
    """``verify --workload``: the reads a traced script made of the source, made again on
    every variant (the pattern ``workload``, timed and counted beside the standard ones),
    and each selection's values proved equal to HDF5's read of the source: a variant
    changed inside a selection is named by that selection (exit 1)."""
    import shutil as sh

    import zarr

    src = tmp_path / "s.h5"
    _, _, name = sample_signal(src, 3, 4, 2, shot=1)
    workload, _ = traced(tmp_path, f"""
        import sys
        import h5py
        with h5py.File(sys.argv[1]) as f:
            for _ in range(2):
                f["{name}"][100:300]
            f["{name}"][::7]
    """, str(src))
    assert [(r.selection, r.count) for r in workload.reads] == [(((100, 300, 1),), 2), (((0, workload.reads[1].shape[0], 7),), 1)]
    for args in (["convert", str(src), str(tmp_path / "v.zarr")], ["reorder", str(src), str(tmp_path / "p.h5"), "--by", "signal"]):
        assert runner.invoke(app, ["-q", *args]).exit_code == 0
    out = tmp_path / "report"
    result = runner.invoke(app, ["verify", str(src), str(tmp_path / "v.zarr"), str(tmp_path / "p.h5"), "--workload",
                                 str(tmp_path / "w.json"), "--patterns", "open", "--repeat", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [r for r in json.loads((out / "results.json").read_text())["results"] if r["pattern"] == "workload"]
    assert sorted(r["variant"] for r in rows) == ["p.h5", "s.h5", "v.zarr"] and all(r["requests"] > 0 for r in rows)
    changed = tmp_path / "changed.zarr"
    sh.copytree(tmp_path / "v.zarr", changed)
    array = zarr.open_array(changed / name, mode="r+")
    array[150] = array[150] + 1
    result = runner.invoke(app, ["verify", str(src), str(changed), "--workload", str(tmp_path / "w.json"), "--patterns",
                                 "open", "--repeat", "1"])
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and f"/{name}[100:300]: values: the workload's selection differs" in said, said
    assert f"/{name}[0:" not in said  # the strided read does not hold index 150 (150 % 7 != 0): equal
    other = tmp_path / "other.h5"
    sh.copy(src, other)
    (tmp_path / "two.json").write_text(json.dumps({**json.loads((tmp_path / "w.json").read_text()), "reads": [
        *json.loads((tmp_path / "w.json").read_text())["reads"],
        {**json.loads((tmp_path / "w.json").read_text())["reads"][0], "source": "/elsewhere.h5"}]}))
    refused = runner.invoke(app, ["verify", str(other), str(tmp_path / "v.zarr"), "--workload", str(tmp_path / "two.json")])
    assert refused.exit_code == 2 and "is none of them" in " ".join(refused.output.split()), refused.output


def test_reads_in_the_worker_processes_of_a_dask_cluster_are_recorded(tmp_path: Path) -> None:
    """xarray with dask.distributed (a LocalCluster of two worker processes): each time
    chunk is read once, in a worker process, not in the script's."""
    import pandas as pd
    import xarray as xr

    src = tmp_path / "m.nc"
    time = pd.date_range("2010-01-01", periods=16, freq="6h")
    xr.Dataset({"t2m": (("time", "y", "x"), np.random.default_rng(1).random((16, 6, 9)))}, coords={"time": time}
               ).to_netcdf(src, engine="h5netcdf", encoding={"t2m": {"chunksizes": (4, 6, 9)}})
    workload, _ = traced(tmp_path, """
        import sys
        import xarray as xr
        from distributed import Client, LocalCluster

        if __name__ == "__main__":
            with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
                with Client(cluster):
                    xr.open_dataset(sys.argv[1], engine="h5netcdf", chunks={"time": 4}).t2m.mean().compute()
    """, str(src))
    t2m = [r for r in workload.reads if r.array == "/t2m"]
    script = min(r.process for r in workload.reads)
    assert sorted(r.selection[0] for r in t2m) == [(0, 4, 1), (4, 8, 1), (8, 12, 1), (12, 16, 1)]
    assert all(r.count == 1 and r.process != script for r in t2m) and len({r.process for r in t2m}) >= 1
