"""The comparators the conformance tests rely on must catch what they claim to catch:
a suite of `== []` checks is only as honest as the comparator behind it."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import zarr

from layoutkit.convert import ConvertOptions, convert
from layoutkit.equality import compare_zarr
from layoutkit.equality.hdf5 import compare_hdf5
from layoutkit.hdf5.inventory import read_inventory
from layoutkit.options import parse_chunks
from layoutkit.reorder import ReorderOptions, reorder


def kinds(mismatches) -> set[tuple[str, str]]:
    return {(m.path, m.what) for m in mismatches}


def test_compare_zarr_catches_values_attributes_missing_and_dims(hard_cases: dict[str, Path], tmp_path: Path) -> None:
    src = hard_cases["scales"]
    good = tmp_path / "good.zarr"
    convert(src, good)
    assert compare_zarr(src, good) == []
    bad = tmp_path / "bad.zarr"
    shutil.copytree(good, bad)
    root = zarr.open_group(bad, mode="r+", use_consolidated=False)
    root["shot/signals/a"][3, 1] = 42.0                      # one value
    root["shot/time"].attrs["units"] = "s"                  # an attribute that is not in the source
    nan_fill = root["top"]
    nan_fill[0] = np.nan                                      # NaN where the source has 0
    shutil.rmtree(bad / "shot" / "signals" / "b")             # a whole array
    found = kinds(compare_zarr(src, bad))
    assert ("/shot/signals/a", "values") in found
    assert ("/shot/time", "attribute") in found
    assert ("/top", "values") in found
    assert ("/shot/signals/b", "missing") in found


def test_compare_zarr_names_the_first_differing_index(hard_cases: dict[str, Path], tmp_path: Path) -> None:
    src = hard_cases["filters"]
    dst = tmp_path / "f.zarr"
    convert(src, dst)
    zarr.open_group(dst, mode="r+", use_consolidated=False)["edge_chunks"][1000, 6] = -1
    (m,) = compare_zarr(src, dst)
    assert m.path == "/edge_chunks" and "(1000, 6)" in m.detail


def test_compare_hdf5_catches_values_attributes_missing_and_scales(hard_cases: dict[str, Path], tmp_path: Path) -> None:
    src = hard_cases["scales"]
    dst = tmp_path / "r.h5"
    reorder(src, dst, ReorderOptions(by="group", dedupe=False))
    assert compare_hdf5(src, dst) == []
    with h5py.File(dst, "r+") as f:
        f["shot/signals/a"][0, 0] = 5.0
        f["shot/signals/a"].attrs["added"] = 1
        f["shot/signals/b"].dims[1].detach_scale(f["shot/channel"])
        del f["top"]
    found = kinds(compare_hdf5(src, dst))
    assert ("/shot/signals/a", "values") in found
    assert ("/shot/signals/a", "attribute") in found
    assert ("/shot/signals/b", "dims") in found
    assert ("/top", "missing") in found


def test_compare_hdf5_checks_exact_types(tmp_path: Path) -> None:
    src, dst = tmp_path / "a.h5", tmp_path / "b.h5"
    with h5py.File(src, "w") as f:
        f["x"] = np.arange(4, dtype="<i4")
        f["x"].attrs["scale"] = np.float32(0.5)
    with h5py.File(dst, "w") as f:
        f["x"] = np.arange(4, dtype="<i8")  # same values, wider type
        f["x"].attrs["scale"] = np.float64(0.5)
    assert ("/x", "dtype") in kinds(compare_hdf5(src, dst))
    with h5py.File(dst, "w") as f:
        f["x"] = np.arange(4, dtype="<i4")
        f["x"].attrs["scale"] = np.float64(0.5)  # same value, other type
    assert ("/x", "attribute") in kinds(compare_hdf5(src, dst))


def test_the_proof_reads_ahead_in_worker_processes_and_still_names_the_first_difference(
        tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001 - pytest's fixture
    """With worker processes (a source of gigabytes), the source's blocks are read ahead
    of the comparison: each block must still meet its own region of the variant, and of
    two differences, one in a late block and one in an early one, the first is named."""
    import layoutkit.equality.expected as expected

    src = tmp_path / "src.h5"
    values = np.arange(64 * 40, dtype="f8").reshape(64, 40)
    with h5py.File(src, "w") as f:
        f.create_dataset("a", data=values, chunks=(4, 40), compression="gzip")
    dst = tmp_path / "a.zarr"
    convert(src, dst)
    monkeypatch.setattr(expected, "PROCESS_MIN_BYTES", 0)  # the workers, for 20 KB
    with expected.ReferenceReader(src, {"/a": read_inventory(src).arrays[0]}) as reader:
        assert reader._pool is not None
        regions = [((r, r + 4), (0, 40)) for r in range(60, -4, -4)]  # backwards: order is the caller's
        got = list(reader.read_each("/a", regions))
        assert [r for r, _ in got] == regions
        for (rows, _), block in got:
            np.testing.assert_array_equal(block, values[rows[0]:rows[1]])
        for _ in reader.read_each("/a", regions):  # stopped after one: the reads ahead are left
            break
    changed = zarr.open_group(dst, mode="r+", use_consolidated=False)["a"]
    changed[61, 7] = changed[2, 39] = -1
    (m,) = compare_zarr(src, dst)
    assert m.path == "/a" and "(2, 39)" in m.detail, m


def test_a_block_of_one_value_comes_back_from_a_worker_as_that_value_and_still_meets_every_element(
        tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001 - pytest's fixture
    """A worker sends a block whose values are all one number as that number (2 GiB of
    zeros piped as arrays took 15.8 s to verify, 12.2 s sent so); the block it stands for
    is the block, and a variant that differs in one element of it is still found. NaN is
    not equal to itself, so a block of NaN comes back whole, and equal."""
    import layoutkit.equality.expected as expected

    src = tmp_path / "src.h5"
    rows, cols = 16, expected.UNIFORM_MIN // 16  # blocks of 16 rows, each just large enough (the workers'
    values = np.zeros((8 * rows, cols))          # threshold is their own module's)
    values[rows:2 * rows] = 7.5  # a block of one value that is not the fill value
    values[2 * rows:3 * rows] = np.nan
    values[5 * rows:] = np.arange(3 * rows * cols).reshape(3 * rows, cols)  # varied
    with h5py.File(src, "w") as f:
        f.create_dataset("a", data=values, chunks=(rows, cols), compression="gzip")
    dst = tmp_path / "a.zarr"
    convert(src, dst, ConvertOptions(chunks=parse_chunks(f"{rows},{cols}")))
    monkeypatch.setattr(expected, "PROCESS_MIN_BYTES", 0)
    regions = [((r, r + rows), (0, cols)) for r in range(0, 8 * rows, rows)]
    with expected.ReferenceReader(src, {"/a": read_inventory(src).arrays[0]}) as reader:
        got = dict(reader.read_each("/a", regions))
    for ((start, stop), _), block in got.items():
        np.testing.assert_array_equal(block, values[start:stop])
        sent_as_one = block.strides == (0, 0)
        assert sent_as_one == (start < 5 * rows and start != 2 * rows), start
    assert compare_zarr(src, dst) == []
    changed = zarr.open_group(dst, mode="r+", use_consolidated=False)["a"]
    changed[17, 3] = 7.25
    (m,) = compare_zarr(src, dst)
    assert m.path == "/a" and "(17, 3)" in m.detail, m
