"""convert end to end: scale-out equivalence, bounded memory, structure details."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr
from roundtrip import LayoutRoundTrip

from layoutkit.convert import ConvertOptions, convert, plan_convert
from layoutkit.equality import compare_zarr
from layoutkit.options import parse_shards


def store_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_processes_cluster_gives_the_same_store_as_threads(shot_file: Path, tmp_path: Path) -> None:
    """Work split into tasks that each open the source themselves (a dask LocalCluster of
    processes) writes byte for byte the store a local threaded run writes."""
    local = tmp_path / "threads.zarr"
    cluster = tmp_path / "cluster.zarr"
    convert(shot_file, local, ConvertOptions(chunk_bytes=64 << 10, shards=parse_shards("256KiB")))
    convert(shot_file, cluster, ConvertOptions(chunk_bytes=64 << 10, shards=parse_shards("256KiB"),
                                               scheduler="processes", workers=2))
    a, b = store_files(local), store_files(cluster)
    assert a.keys() == b.keys()
    different = [k for k in a if a[k] != b[k] and k != "layoutkit.json"]
    assert not different
    assert not compare_zarr(shot_file, cluster)


def test_sample_dimension_scales_become_dimension_names(shot_file: Path, tmp_path: Path) -> None:
    dst = tmp_path / "s.zarr"
    convert(shot_file, dst)
    root = zarr.open_group(dst, mode="r")
    with h5py.File(shot_file, "r") as f:
        shot = sorted(f["shots"])[0]
        for name, ds in f[f"shots/{shot}/signals"].items():
            scale = ds.dims[0][0]
            z = root[f"shots/{shot}/signals/{name}"]
            assert z.metadata.dimension_names[0] == scale.name.rsplit("/", 1)[-1]
            # the scale itself stays a coordinate array with its own dimension name
            zs = root[scale.name.lstrip("/")]
            assert zs.metadata.dimension_names == (scale.name.rsplit("/", 1)[-1],)
            np.testing.assert_array_equal(zs[:], scale[:])


def test_links_are_recorded_not_dropped(hard_cases: dict[str, Path], tmp_path: Path) -> None:
    dst = tmp_path / "l.zarr"
    summary = convert(hard_cases["links"], dst)
    sidecar = json.loads((dst / "layoutkit.json").read_text())
    links = {link["path"]: link for link in sidecar["links"]}
    # the walk meets /data/hard_alias first (names sorted), so /data/x is the link to it
    assert links["/data/x"] == {"path": "/data/x", "kind": "hard", "target": "/data/hard_alias", "target_file": None}
    assert links["/soft"]["kind"] == "soft" and links["/soft"]["target"] == "/data/x"
    assert links["/dangling"]["target"] == "/nowhere"
    assert links["/external"]["target_file"] == "missing_file.h5"
    assert summary.links == 4
    # one copy of the data: the hard link is not a second array
    root = zarr.open_group(dst, mode="r")
    assert sorted(root["data"].array_keys()) == ["hard_alias"]


def test_skip_unsupported_lists_what_was_left_out(tmp_path: Path) -> None:
    src = tmp_path / "external.h5"
    with contextlib.chdir(tmp_path), h5py.File(src, "w") as f:  # external raw storage whose file is gone: refused
        f.create_dataset("gone", shape=(3,), dtype="<f8", external=[("gone.bin", 0, h5py.h5f.UNLIMITED)])[...] = 1
        f["ok"] = np.arange(3)
    (tmp_path / "gone.bin").unlink()
    with pytest.raises(Exception, match=r"'/gone' uses external raw storage \(its file gone.bin is missing\)"):
        convert(src, tmp_path / "a.zarr")
    summary = convert(src, tmp_path / "b.zarr", ConvertOptions(skip_unsupported=True))
    assert [p for p, _ in summary.skipped] == ["/gone"]
    assert compare_zarr(src, tmp_path / "b.zarr", skipped=frozenset({"/gone"})) == []
    sidecar = json.loads((tmp_path / "b.zarr" / "layoutkit.json").read_text())
    assert sidecar["skipped"][0]["path"] == "/gone"


def test_sparse_regions_are_not_written(tmp_path: Path) -> None:
    src = tmp_path / "sparse.h5"
    with h5py.File(src, "w") as f:
        d = f.create_dataset("x", shape=(1_000_000,), chunks=(10_000,), dtype="f4", fillvalue=-1)
        d[500_000:500_010] = 3
    dst = tmp_path / "sparse.zarr"
    convert(src, dst, ConvertOptions(chunk_bytes=40_000))
    chunk_files = [p for p in (dst / "x" / "c").rglob("*") if p.is_file()]
    assert len(chunk_files) == 1
    assert compare_zarr(src, dst) == []


def test_plan_respects_memory_budget(tmp_path: Path) -> None:
    src = tmp_path / "big.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("x", shape=(4_000_000,), dtype="f8", chunks=(100_000,))
    _, plan = plan_convert(src, tmp_path / "o.zarr", ConvertOptions(memory_limit=16 << 20, workers=2))
    assert plan.task_bytes == 1 << 20
    assert all(t.nbytes <= plan.task_bytes for t in plan.tasks)
    assert sum(t.nbytes for t in plan.tasks) == 32_000_000


PEAK = textwrap.dedent(
    """
    import resource, sys
    from layoutkit import ConvertOptions, convert
    from layoutkit.options import parse_size
    convert(sys.argv[1], sys.argv[2], ConvertOptions(memory_limit=parse_size(sys.argv[3])))
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    """
)


def peak_rss(src: Path, dst: Path, limit: str) -> int:
    out = subprocess.run([sys.executable, "-c", PEAK, str(src), str(dst), limit],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_peak_memory_is_bounded_by_the_limit_not_the_file(tmp_path: Path) -> None:
    """Converting 480 MB of data with a 64 MiB budget costs about what converting 1 MB
    does, plus the budget: nothing scales with the file."""
    big, small = tmp_path / "big.h5", tmp_path / "small.h5"
    ramp = np.linspace(0, 1, 1_000_000)
    with h5py.File(big, "w") as f:
        for name in ("a", "b", "c"):
            d = f.create_dataset(name, shape=(20_000_000,), dtype="f8", chunks=(500_000,), compression="gzip",
                                 compression_opts=1)
            for i in range(20):
                d[i * 1_000_000 : (i + 1) * 1_000_000] = ramp + i
    with h5py.File(small, "w") as f:
        f.create_dataset("a", data=ramp[:100_000], chunks=(50_000,), compression="gzip")
    baseline = peak_rss(small, tmp_path / "small.zarr", "64MiB")
    peak = peak_rss(big, tmp_path / "big.zarr", "64MiB")
    assert peak - baseline < (64 << 20) + (96 << 20), (baseline, peak)
    assert peak - baseline < 160_000_000  # one dataset alone is 160 MB


@pytest.mark.parametrize("dtype, value", [("f4", -999.0), ("f8", np.nan), ("i2", -32768), ("u1", 255),
                                          ("S3", b"abc"), ("?", True), ("c8", 1 + 2j)])
def test_fill_attr_encoding_matches_xarray(dtype, value):
    """layoutkit encodes _FillValue itself (to avoid importing xarray); it must stay
    byte-for-byte what xarray's zarr backend writes and reads."""
    from xarray.backends.zarr import FillValueCoder

    from layoutkit.writers.zarr_ import encode_fill_attr

    dt = np.dtype(dtype)
    ours = encode_fill_attr(np.asarray(value, dt)[()].item(), dt)
    assert ours == FillValueCoder.encode(np.asarray(value, dt)[()].item(), dt)
    if dt.kind != "S":  # xarray encodes byte-string fills but cannot decode them
        decoded = FillValueCoder.decode(ours, dt)
        assert np.asarray(decoded, dt).tobytes() == np.asarray(value, dt).tobytes()


def test_scheduler_address_runs_on_an_existing_cluster(shot_file: Path, tmp_path: Path) -> None:
    """--scheduler ADDRESS: tasks go to a running dask.distributed scheduler."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        dst = tmp_path / "remote.zarr"
        convert(shot_file, dst, ConvertOptions(scheduler=cluster.scheduler_address, chunk_bytes=64 << 10))
        with Client(cluster) as client:  # the workers did the copying: they opened the source
            opened = client.run(lambda: sorted(k[0] for k in __import__("importlib").import_module("layoutkit.writers.zarr_convert")._OPEN))
        assert all(v == [] for v in opened.values())  # and closed it again (cleanup ran)
    assert compare_zarr(shot_file, dst) == []


class TestZarrMirrorRoundTrip(LayoutRoundTrip):
    """The shared round trips for ``convert`` (``--layout shot-major``)."""

    layout = "zarr-mirror"
    options = ConvertOptions(shards=parse_shards("auto"))
