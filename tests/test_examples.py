"""Every script in examples/ runs, as a user would run it, and checks what it shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import era5_files

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(script: str, *args: str | Path) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *map(str, args)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_every_example_has_a_smoke_test() -> None:
    tested = {"netcdf_to_zarr.py", "shot_archive_all_layouts.py", "read_signal_major_with_zarr.py",
              "custom_layout.py", "read_shot_with_zarr.py", "three_signals.py", "era5_point_and_map.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def test_three_signals_traced(shot_file: Path, tmp_path: Path) -> None:
    """The analysis, run as it is and under ``layoutkit trace``: the workload holds one
    whole read of each of its signals of every shot, in shot order."""
    import h5py

    from layoutkit.trace.workload import access_order, load

    out = run("three_signals.py", shot_file)
    with h5py.File(shot_file) as f:
        want = [f"/shots/{s}/signals/{n}" for s in f["shots"] for n in ("ip", "ne_bar", "te_ece_01")
                if f"shots/{s}/signals/{n}" in f]
    assert len(out.splitlines()) == len(want) > 0
    traced = subprocess.run([sys.executable, "-m", "layoutkit", "-q", "trace", "--out", str(tmp_path / "w.json"), "--",
                             sys.executable, str(EXAMPLES / "three_signals.py"), str(shot_file)],
                            capture_output=True, text=True, timeout=300)
    assert traced.returncode == 0, traced.stderr[-3000:]
    reads = load(tmp_path / "w.json").reads
    assert [r.array for r in reads] == want and all(r.count == 1 and r.elements == r.shape[0] for r in reads)
    assert access_order(reads, "/shots/{shot}/signals/{signal}") == "by shot"
    # the same reads through layoutkit.open, as the workload benchmark runs the script on each layout
    said = run("three_signals.py", shot_file, "--latency", "0.001")
    assert said.startswith(f"{len(want)} signals in ") and " requests, " in said, said


def test_era5_point_and_map(tmp_path: Path) -> None:
    """The climate analysis on two months, with h5netcdf and through layoutkit.open: the
    same values loaded (28 days of hourly points a month, a map of 6 x 9)."""
    files = era5_files(tmp_path / "era5", 2)
    assert run("era5_point_and_map.py", *files).strip() == f"loaded {2 * 24 * 28} points and a map of 54"
    said = run("era5_point_and_map.py", *files, "--latency", "0.001")
    assert said.endswith(" s\n") and int(said.split()[0]) > 0, said


def test_netcdf_to_zarr(tmp_path: Path) -> None:
    out = run("netcdf_to_zarr.py", tmp_path)
    assert "xarray sees the same dataset in both" in out
    assert (tmp_path / "tas.zarr" / "zarr.json").is_file()


def test_shot_archive_all_layouts(tmp_path: Path) -> None:
    from layoutkit.layouts import LAYOUTS

    out = run("shot_archive_all_layouts.py", tmp_path, "--shots", "3")
    assert f"all {len(LAYOUTS)} variants hold exactly the data of shots.h5" in out
    for name in ("shot-major", "signal-major", "shot-packed", "hdf5-paged", "virtual"):
        assert name in out


def test_read_signal_major_with_zarr(tmp_path: Path) -> None:
    out = run("read_signal_major_with_zarr.py")
    assert "in 3 shots" in out and "<xarray.Dataset>" in out


def test_read_shot_with_zarr(shot_file: Path, tmp_path: Path) -> None:
    """The example reads a shot with zarr alone, as the spec says: the values, attributes
    and time bases layoutkit reads."""
    import runpy

    import numpy as np

    import layoutkit
    from layoutkit.convert import ConvertOptions, convert

    assert "holds 20 packed datasets" in run("read_shot_with_zarr.py")
    store = tmp_path / "packed.zarr"
    convert(shot_file, store, ConvertOptions(layout="shot-packed"))
    read_shot = runpy.run_path(str(EXAMPLES / "read_shot_with_zarr.py"))["read_shot"]
    with layoutkit.open(shot_file) as source:
        shot = source.shots[1]
        got = read_shot(store, shot)
        for signal in source.signals:
            want = source.read(shot, signal)
            values, attrs, scales = got[f"signals/{signal}"]
            np.testing.assert_array_equal(values, want.values)
            assert scales[0] and scales[0][0].rsplit("/", 1)[-1] == want.dims[0]
            assert attrs.get("units") == want.attrs.get("units")


def test_custom_layout(shot_file: Path, tmp_path: Path) -> None:
    out = run("custom_layout.py", shot_file, tmp_path / "npy")
    assert "arrays=" in out and "layoutkit.open: NpyArchive" in out and "compare: 0 differences" in out
    assert len(list((tmp_path / "npy").glob("*.npy"))) > 10


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_examples_say_how_to_run_them(script: str) -> None:
    assert f"python examples/{script}" in (EXAMPLES / script).read_text()
