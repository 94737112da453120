"""Datasets declared far larger than they are written are planned from where their data
lie (issue #48): a never-written contiguous dataset of 2^61 bytes, a chunk grid of
10^8 chunks holding two, and a 10-element dataset whose maximum shape is 10^11.

Before, planning enumerated every block of the extent (``MemoryError``, or minutes
and gigabytes), and reorder gave the last a fixed-array chunk index sized for its
maximum: a 149 GiB (sparse) file. verify's proof compares the blocks either side says
hold data, and the first, the last and a few drawn at random, which must read as the
same fill value on both sides.
"""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.hdf5.inventory import read_inventory
from layoutkit.plan import blocks_over, iter_blocks

HUGE = 10**11


def run(*args: object) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def verify(src: Path, out: Path) -> CliRunner:
    return CliRunner().invoke(app, ["verify", str(src), str(out), "--patterns", "open", "--repeat", "1"])


def sparse_grid(path: Path) -> None:
    """10^11 floats in chunks of 1000 (10^8 chunks), two of them written."""
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("y", shape=(HUGE,), chunks=(1000,), dtype="f4", maxshape=(None,), fillvalue=-1)
        ds[10:20] = np.arange(10)
        ds[HUGE - 5:] = 7


def test_blocks_over_visits_the_blocks_that_meet_the_regions() -> None:
    regions = [((3, 5), (0, 2)), ((9, 10), (7, 9)), ((4, 5), (1, 2))]
    got = list(blocks_over((10, 9), (4, 4), regions))
    assert got == [((0, 4), (0, 4)), ((4, 8), (0, 4)), ((8, 10), (4, 8)), ((8, 10), (8, 9))]
    assert list(blocks_over((10, 9), (4, 4), None)) == list(iter_blocks((10, 9), (4, 4)))
    assert list(blocks_over((10, 9), (4, 4), ())) == []


def test_the_walk_records_where_the_data_lie(tmp_path: Path) -> None:
    src = tmp_path / "s.h5"
    sparse_grid(src)
    with h5py.File(src, "a") as f:
        f.create_dataset("never", shape=(2**33, 2**28), dtype="u1")
        f.create_dataset("small", data=np.arange(5))
    inv = read_inventory(src)
    assert inv.array("/y").stored_regions == (((0, 1000),), ((HUGE - 1000, HUGE),))
    assert inv.array("/never").stored_regions == ()
    assert inv.array("/small").stored_regions is None


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_convert_writes_the_written_chunks_alone(tmp_path: Path, zarr_format: int) -> None:
    src, out = tmp_path / "s.h5", tmp_path / "o.zarr"
    sparse_grid(src)
    run("convert", src, out, "--zarr-format", zarr_format)
    z = zarr.open_array(out / "y", mode="r")
    assert z.shape == (HUGE,)
    np.testing.assert_array_equal(z[8:22], [-1, -1, *range(10), -1, -1])
    np.testing.assert_array_equal(z[HUGE - 7:], [-1, -1, 7, 7, 7, 7, 7])
    assert z[HUGE // 2] == -1
    assert verify(src, out).exit_code == 0


def test_reorder_writes_the_written_chunks_alone(tmp_path: Path) -> None:
    src, out = tmp_path / "s.h5", tmp_path / "o.h5"
    sparse_grid(src)
    run("reorder", src, out, "--by", "group")
    assert out.stat().st_size < 1 << 20
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(f["y"][8:22], [-1, -1, *range(10), -1, -1])
        np.testing.assert_array_equal(f["y"][HUGE - 7:], [-1, -1, 7, 7, 7, 7, 7])
    assert verify(src, out).exit_code == 0


def test_a_never_written_contiguous_dataset_of_2_to_the_61_bytes(tmp_path: Path) -> None:
    src = tmp_path / "s.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("big", shape=(2**33, 2**28), dtype="u1", fillvalue=3)
        f.create_dataset("small", data=np.arange(5))
    run("convert", src, tmp_path / "o.zarr")
    run("reorder", src, tmp_path / "o.h5", "--by", "group")
    assert zarr.open_array(tmp_path / "o.zarr" / "big", mode="r")[2**32, 5:8].tolist() == [3, 3, 3]
    with h5py.File(tmp_path / "o.h5", "r") as f:
        assert f["big"].shape == (2**33, 2**28) and f["big"][2**32, 5:8].tolist() == [3, 3, 3]
    for out in ("o.zarr", "o.h5"):
        assert verify(src, tmp_path / out).exit_code == 0


def test_a_declared_maximum_does_not_size_the_output(tmp_path: Path) -> None:
    """10 elements that may grow to 10^11: the 1.10 format's fixed-array index for that
    maximum made a 149 GiB file; the output keeps the maximum and stays small."""
    src, out = tmp_path / "s.h5", tmp_path / "o.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("x", data=np.arange(10.0), chunks=(5,), maxshape=(HUGE,))
    run("reorder", src, out, "--by", "group")
    assert os.path.getsize(out) < 1 << 20
    with h5py.File(out, "r") as f:
        assert f["x"].maxshape == (HUGE,)
        np.testing.assert_array_equal(f["x"][...], np.arange(10.0))
    assert verify(src, out).exit_code == 0
    with h5py.File(out, "r+") as f:
        f["x"].resize((20,))  # still growable as declared
        f["x"][10:] = 1


@pytest.mark.parametrize("where", ["inside the written chunk", "far from any written chunk"])
@pytest.mark.parametrize("variant", ["o.zarr", "o.h5"])
def test_verify_finds_a_wrong_value_in_a_sparse_variant(tmp_path: Path, where: str, variant: str) -> None:
    src, out = tmp_path / "s.h5", tmp_path / variant
    sparse_grid(src)
    index = 15 if where == "inside the written chunk" else 4 * 10**10 + 123
    if variant.endswith(".zarr"):
        run("convert", src, out)
        zarr.open_array(out / "y", mode="r+")[index] = 99
    else:
        run("reorder", src, out, "--by", "group")
        with h5py.File(out, "r+") as f:
            f["y"][index] = 99
    result = verify(src, out)
    assert result.exit_code == 1, result.output
    assert f"/y: values: first difference at index ({index},)" in " ".join(result.output.split())


def test_verify_finds_written_data_missing_from_a_sparse_variant(tmp_path: Path) -> None:
    src, out = tmp_path / "s.h5", tmp_path / "o.zarr"
    sparse_grid(src)
    run("convert", src, out)
    z = zarr.open_array(out / "y", mode="r+")
    z[HUGE - 10:] = -1  # the last written chunk back to the fill value (zarr drops it)
    result = verify(src, out)
    assert result.exit_code == 1, result.output
    assert f"first difference at index ({HUGE - 5},)" in " ".join(result.output.split())
