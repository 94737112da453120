"""Every chunk index HDF5 writes, through every writer: the output holds what HDF5's own
read gives, and verify (which reads the source through HDF5) catches a wrong chunk.

h5py picks the index from ``libver`` and ``maxshape``: a version-1 B-tree for the
earliest format; with the latest, a single chunk (one chunk, fixed size), an implicit
index (fixed size, space allocated early, no filter), a fixed array (fixed maximum),
an extensible array (one unlimited axis) and a version-2 B-tree (several). HDF5's chunk
queries report impossible origins for an extensible array whose unlimited axis is not
the first (the five lines of issue #48), while its read is right: the raw path must
notice and read those datasets through HDF5.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.errors import RawReadFallback
from layoutkit.hdf5.inventory import read_inventory
from layoutkit.hdf5.raw import RawReader

# name: (libver, shape, chunks, maxshape, early allocation)
INDEXES = {
    "btree-v1": ("earliest", (5, 7), (2, 3), (None, None), False),
    "single-chunk": ("latest", (5, 7), (5, 7), (5, 7), False),
    "implicit": ("latest", (5, 7), (2, 3), (5, 7), True),
    "fixed-array": ("latest", (5, 7), (2, 3), (12, 20), False),
    "extensible-array-last-axis": ("latest", (5, 7), (2, 3), (10, None), False),
    "extensible-array-first-axis": ("latest", (5, 7), (2, 3), (None, 7), False),
    "btree-v2": ("latest", (5, 7), (2, 3), (None, None), False),
}
# how the dataset is written: all of it, or only some chunks (the rest reads as the fill value)
FILLS = {"full": None, "partial": ((slice(2, 4), slice(3, 6)), (slice(4, 5), slice(0, 3)))}


def build(path: Path, index: str, fill: str, compression: str | None = None, root: str = "/") -> np.ndarray:
    """One dataset ``x`` under ``root`` with the chunk index ``index``; returns what HDF5 reads."""
    libver, shape, chunks, maxshape, early = INDEXES[index]
    with h5py.File(path, "a", libver=libver) as f:
        group = f.require_group(root)
        kwargs = {"compression": compression, "shuffle": bool(compression)} if compression else {}
        if early:
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_chunk(chunks)
            dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
            dcpl.set_fill_value(np.array(-7, "i4"))
            space = h5py.h5s.create_simple(shape, maxshape)
            h5py.h5d.create(group.id, b"x", h5py.h5t.STD_I32LE, space, dcpl=dcpl)
            ds = group["x"]
        else:
            ds = group.create_dataset("x", shape=shape, chunks=chunks, maxshape=maxshape, dtype="i4",
                                      fillvalue=-7, **kwargs)
        data = np.arange(np.prod(shape), dtype="i4").reshape(shape)
        if FILLS[fill] is None:
            ds[...] = data
        else:
            for sel in FILLS[fill]:
                ds[sel] = data[sel]
    with h5py.File(path, "r") as f:
        return f[root]["x"][...]


def cli(*args: object) -> None:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output


CASES = [pytest.param(i, f, id=f"{i}-{f}") for i in INDEXES for f in FILLS]
# an implicit index holds unfiltered chunks only (HDF5 allocates them all, at their full size)
FILTERED = [c for c in CASES if c.values[0] != "implicit"]


@pytest.mark.parametrize(("index", "fill"), FILTERED)
def test_the_raw_reader_gives_what_hdf5_reads(tmp_path: Path, index: str, fill: str) -> None:
    src = tmp_path / "s.h5"
    want = build(src, index, fill, compression="gzip")
    info = read_inventory(src).array("/x")
    with RawReader(src, {"/x": info}) as reader:
        np.testing.assert_array_equal(reader.read("/x", tuple((0, n) for n in info.shape)), want)
        np.testing.assert_array_equal(reader.read("/x", ((1, 4), (2, 6))), want[1:4, 2:6])


@pytest.mark.parametrize(("index", "fill"), CASES)
@pytest.mark.parametrize("zarr_format", [3, 2])
def test_convert_writes_what_hdf5_reads(tmp_path: Path, index: str, fill: str, zarr_format: int) -> None:
    src = tmp_path / "s.h5"
    want = build(src, index, fill)
    cli("convert", src, tmp_path / "o.zarr", "--zarr-format", zarr_format)
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "o.zarr" / "x", mode="r")[...], want)
    cli("verify", src, tmp_path / "o.zarr", "--patterns", "open", "--repeat", "1")


@pytest.mark.parametrize(("index", "fill"), FILTERED)
def test_convert_copying_the_stored_chunks_writes_what_hdf5_reads(tmp_path: Path, index: str, fill: str) -> None:
    src = tmp_path / "s.h5"
    want = build(src, index, fill, compression="gzip")
    cli("convert", src, tmp_path / "o.zarr", "--compressor", "source", "--chunks", "source")
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "o.zarr" / "x", mode="r")[...], want)


@pytest.mark.parametrize(("index", "fill"), CASES)
def test_reorder_writes_what_hdf5_reads(tmp_path: Path, index: str, fill: str) -> None:
    src = tmp_path / "s.h5"
    want = build(src, index, fill)
    cli("reorder", src, tmp_path / "o.h5", "--by", "group")
    with h5py.File(tmp_path / "o.h5", "r") as f:
        np.testing.assert_array_equal(f["x"][...], want)
        assert f["x"].maxshape == INDEXES[index][3]


@pytest.mark.parametrize(("index", "fill"), FILTERED)
def test_reorder_copying_the_stored_chunks_writes_what_hdf5_reads(tmp_path: Path, index: str, fill: str) -> None:
    src = tmp_path / "s.h5"
    want = build(src, index, fill, "gzip")
    # the source's own filters (h5py's shuffle and gzip level 4): chunks copied without decoding
    cli("reorder", src, tmp_path / "o.h5", "--by", "group", "--compressor", "shuffle+gzip:4")
    with h5py.File(tmp_path / "o.h5", "r") as f:
        np.testing.assert_array_equal(f["x"][...], want)
        assert f["x"].maxshape == INDEXES[index][3]


@pytest.mark.parametrize("layout", ["signal-major", "shot-packed", "shot-major"])
def test_every_layout_writes_an_extensible_array_as_hdf5_reads_it(tmp_path: Path, layout: str) -> None:
    """The five lines of issue #48 inside a shot archive, two shots, each layout."""
    src = tmp_path / "s.h5"
    want = {shot: build(src, "extensible-array-last-axis", "full", root=f"/shots/{shot}/signals")
            for shot in ("1", "2")}
    cli("convert", src, tmp_path / "o.zarr", "--layout", layout)
    import layoutkit

    with layoutkit.open(tmp_path / "o.zarr") as archive:
        for shot, values in want.items():
            np.testing.assert_array_equal(archive.signal("x")[shot].values, values)
    cli("verify", src, tmp_path / "o.zarr", "--patterns", "open", "--repeat", "1")


def test_the_fallback_is_said(tmp_path: Path) -> None:
    src = tmp_path / "s.h5"
    build(src, "extensible-array-last-axis", "full")
    result = CliRunner().invoke(app, ["convert", str(src), str(tmp_path / "o.zarr")])
    assert result.exit_code == 0, result.output
    assert "/x is read through HDF5's own read" in " ".join(result.output.split())


def test_a_misplaced_chunk_inside_the_extent_is_caught_by_its_values(tmp_path: Path) -> None:
    """One chunk written at rows 4-5 of an extensible array: HDF5's query places it at
    (0, 6), inside the extent, so only the values give it away."""
    src = tmp_path / "s.h5"
    with h5py.File(src, "w", libver="latest") as f:
        ds = f.create_dataset("x", shape=(6, 9), chunks=(2, 3), maxshape=(10, None), dtype="i4", fillvalue=-7)
        ds[4:6, 0:3] = 9
        want = ds[...]
    info = read_inventory(src).array("/x")
    with RawReader(src, {"/x": info}) as reader, pytest.warns(RawReadFallback):
        np.testing.assert_array_equal(reader.read("/x", ((0, 6), (0, 9))), want)
        assert "/x" in reader.untrusted
        # the stored chunks, for copies that keep them, are found by HDF5's own lookup
        assert reader.stored_chunks("/x", ((4, 6), (0, 3)))[(4, 0)][0] is not None
        assert reader.stored_chunks("/x", ((0, 2), (6, 9)))[(0, 6)][0] is None


@pytest.mark.parametrize("index", ["extensible-array-last-axis", "btree-v1", "fixed-array"])
@pytest.mark.parametrize("variant", ["o.zarr", "o.h5"])
def test_verify_finds_one_wrong_chunk(tmp_path: Path, index: str, variant: str) -> None:
    src = tmp_path / "s.h5"
    build(src, index, "full")
    out = tmp_path / variant
    if variant.endswith(".zarr"):
        cli("convert", src, out)
        z = zarr.open_array(out / "x", mode="r+")
        z[2:4, 0:3] = z[2:4, 0:3] + 1
    else:
        cli("reorder", src, out, "--by", "group")
        with h5py.File(out, "r+") as f:
            f["x"][2:4, 0:3] = f["x"][2:4, 0:3] + 1
    result = CliRunner().invoke(app, ["verify", str(src), str(out), "--patterns", "open", "--repeat", "1"])
    assert result.exit_code == 1, result.output
    assert "/x: values: first difference at index (2, 0)" in result.output


def test_verify_refuses_what_a_wrong_chunk_index_would_write(tmp_path: Path) -> None:
    """What convert wrote before the self-check, for the five lines of issue #48: HDF5's
    query places the chunks of rows 2-3 at columns 15 and 18, so the copy held rows 0-1's
    halves side by side and zeros below. The raw reader read the source the same way
    and called it equal; HDF5's own read does not."""
    src = tmp_path / "s.h5"
    with h5py.File(src, "w", libver="latest") as f:
        f.create_dataset("x", shape=(4, 6), chunks=(2, 3), maxshape=(10, None), dtype="i4")[...] = \
            np.arange(24).reshape(4, 6)
    cli("convert", src, tmp_path / "o.zarr")
    z = zarr.open_array(tmp_path / "o.zarr" / "x", mode="r+")
    z[...] = [[0, 1, 2, 12, 13, 14], [6, 7, 8, 18, 19, 20], [0] * 6, [0] * 6]
    result = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "o.zarr"), "--patterns", "open",
                                      "--repeat", "1"])
    assert result.exit_code == 1, result.output
    assert "/x: values: first difference at index (0, 3)" in result.output


def test_verify_finds_a_dataset_the_shared_walk_missed(tmp_path: Path) -> None:
    """The proof lists the source's objects through HDF5's own visit too: a dataset the
    walk every command shares loses is missing from the proof, not from both sides."""
    from dataclasses import replace

    from layoutkit.verify.equality import compare_variant

    src = tmp_path / "s.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("g/a", data=np.arange(3))
        f.create_dataset("g/b", data=np.arange(4))
    cli("convert", src, tmp_path / "o.zarr")
    inventory = read_inventory(src)
    assert compare_variant(src, tmp_path / "o.zarr", inventory=inventory) == []
    lost = replace(inventory, arrays=tuple(a for a in inventory.arrays if a.path != "/g/b"),
                   groups=inventory.groups[:1])
    found = [(m.path, m.what) for m in compare_variant(src, tmp_path / "o.zarr", inventory=lost)]
    assert ("/g/b", "missing") in found and ("/", "missing") in found


def test_the_walker_processes_check_the_indexes_they_record(tmp_path: Path, monkeypatch) -> None:
    """A file walked by walker processes has each recorded index held against HDF5's own
    reads there (``index_checked``), and the raw reader takes that verdict instead of
    reading through h5py again: the same datasets distrusted as when it checks them
    itself (a chunk HDF5's query misplaces inside the extent among them), the same
    values read, and no chunk read through HDF5 for a dataset the walk vouched for."""
    import layoutkit.hdf5.inventory as inventory_module
    import layoutkit.hdf5.raw as raw_module

    src = tmp_path / "s.h5"
    want = {f"/{i}/x": build(src, i, f, root=f"/{i}") for i, f in [("btree-v1", "partial"), ("fixed-array", "full"),
                                                                     ("btree-v2", "partial"), ("single-chunk", "full")]}
    with h5py.File(src, "a", libver="latest") as f:  # HDF5's query places its one chunk at (0, 6)
        ds = f.create_dataset("misplaced", shape=(6, 9), chunks=(2, 3), maxshape=(10, None), dtype="i4", fillvalue=-7)
        ds[4:6, 0:3] = 9
        want["/misplaced"] = ds[...]
    alone = read_inventory(src, workers=1)
    monkeypatch.setattr(inventory_module, "PARALLEL_MIN_DATASETS", 2)
    walked = read_inventory(src, workers=2)
    assert {a.path: a.index_checked for a in alone.arrays} == dict.fromkeys(want)  # not checked in one process
    verdicts = {a.path: a.index_checked for a in walked.arrays}
    assert verdicts["/misplaced"].startswith("the chunk it places at (0, 6)")
    assert all(verdicts[p] == "" for p in want if p != "/misplaced")

    def untrusted(inventory) -> set[str]:  # noqa: ANN001
        with RawReader(src, {a.path: a for a in inventory.arrays}) as reader, pytest.warns(RawReadFallback):
            for path, values in want.items():
                np.testing.assert_array_equal(reader.read(path, tuple((0, n) for n in values.shape)), values)
            return set(reader.untrusted)

    reads: list[str] = []
    real = raw_module.direct_chunk
    monkeypatch.setattr(raw_module, "direct_chunk", lambda ds, origin: (reads.append(ds.name), real(ds, origin))[1])
    assert untrusted(alone) == {"/misplaced"} and {"/fixed-array/x", "/misplaced"} <= set(reads)
    reads.clear()
    assert untrusted(walked) == {"/misplaced"}
    assert set(reads) <= {"/misplaced"}  # read through HDF5 as a distrusted dataset, never to check one
