"""``layoutkit.open``: one reader over every layout, and the counting under it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import assert_same_reads

import layoutkit
from layoutkit.archive import NotAnArchiveError
from layoutkit.convert import ConvertOptions, convert
from layoutkit.options import parse_shards
from layoutkit.reorder import ReorderOptions, reorder
from layoutkit.storage.counting import Counter, CountingStore


def test_counting_store_counts_the_inner_chunks_of_a_partial_shard_read(tmp_path: Path) -> None:
    path = tmp_path / "sharded.zarr"
    z = zarr.create_array(path, shape=(10_000,), chunks=(100,), shards=(5_000,), dtype="f4")
    z[:] = np.arange(10_000, dtype="f4")
    counter = Counter()
    store = CountingStore(zarr.storage.LocalStore(path, read_only=True), None, counter)
    a = zarr.open_array(store, mode="r")
    counter.reset()
    np.testing.assert_array_equal(a[150:420], np.arange(150, 420, dtype="f4"))
    # the shard index, then the three inner chunks as one coalesced range
    assert counter.requests == 2
    assert counter.bytes > 3 * 100 * 4 * 0.1


@pytest.fixture(scope="module")
def four_layouts(shot_file: Path, tmp_path_factory) -> dict[str, Path]:
    """The sample in every layout layoutkit writes."""
    root = tmp_path_factory.mktemp("layouts")
    out = {"source": shot_file}
    # without dedupe: a merged scale is one object under two names, and h5py names it by
    # the first path it finds, so a signal's coordinate could take the other copy's name
    reorder(shot_file, root / "by-signal.h5", ReorderOptions(by="signal", dedupe=False))
    out["reorder"] = root / "by-signal.h5"
    convert(shot_file, root / "shot.zarr")
    out["shot-major"] = root / "shot.zarr"
    convert(shot_file, root / "signal.zarr", ConvertOptions(layout="signal-major", shards=parse_shards("auto")))
    out["signal-major"] = root / "signal.zarr"
    convert(shot_file, root / "packed.zarr", ConvertOptions(layout="shot-packed"))
    out["shot-packed"] = root / "packed.zarr"
    return out


def test_open_gives_the_same_archive_over_every_layout(four_layouts: dict[str, Path]) -> None:
    kinds = {}
    with layoutkit.open(four_layouts["source"]) as source:
        for name, path in four_layouts.items():
            with layoutkit.open(path) as variant:
                kinds[name] = (type(variant).__name__, variant.layout)
                if name != "source":
                    assert_same_reads(source, variant, slices=name in ("signal-major", "shot-packed"))
    assert kinds == {
        "source": ("HDF5Archive", "hdf5"),
        "reorder": ("HDF5Archive", "hdf5-paged-signal"),
        "shot-major": ("ShotMajorArchive", "shot-major"),
        "signal-major": ("SignalMajorArchive", "signal-major"),
        "shot-packed": ("ShotPackedArchive", "shot-packed"),
    }


@pytest.mark.parametrize("layout", ["source", "reorder", "shot-major", "signal-major", "shot-packed"])
def test_iterating_shots_reads_what_shot_reads(four_layouts: dict[str, Path], layout: str) -> None:
    """iter_shots gives each shot's tree as shot() does, with no more requests; where the
    layout fetches ahead (whole objects: shot-major and shot-packed Zarr), the next
    shots' objects are asked for before the first shot is handed over."""
    import xarray as xr

    with layoutkit.open(four_layouts[layout]) as archive:
        shots = archive.shots[:3]
        archive.counter.reset()
        for shot in shots:
            archive.shot(shot)
        one_by_one = archive.counter.requests
    with layoutkit.open(four_layouts[layout]) as archive:
        assert archive.shots[:3] == shots  # the listing read, as above
        archive.counter.reset()
        started: list[str] = []  # the shots whose objects went ahead (started before handed over)
        fetch_ahead = getattr(archive, "_fetch_ahead", None)
        if fetch_ahead is not None:
            def spy(reads: list, fetch=fetch_ahead) -> object:
                ahead = fetch(reads)
                if ahead is not None:
                    started.extend(s for s in shots if any(f"/{s}/" in f"{path}/" for path, _ in reads))
                return ahead

            archive._fetch_ahead = spy
        trees = archive.iter_shots(shots)
        first = next(trees)
        after_first = list(started)
        got = [first, *trees]
        assert archive.counter.requests <= one_by_one
        assert [shot for shot, _ in got] == shots
        for shot, tree in got:
            xr.testing.assert_identical(tree, archive.shot(shot))
    if layout in ("shot-major", "shot-packed"):  # the two after the first, each once, before it is handed over
        assert after_first == started == shots[1:], (after_first, started)
    else:
        assert started == []


@pytest.mark.parametrize("layout", ["shot-major", "signal-major", "shot-packed"])
def test_signals_of_one_read_share_a_time_base_without_aliasing_it(four_layouts: dict[str, Path], layout: str) -> None:
    """One coordinate is built per scale and read (faster than one per array): each
    DataArray still owns its coordinate's attributes."""
    with layoutkit.open(four_layouts[layout]) as variant, layoutkit.open(four_layouts["source"]) as source:
        shot = variant.shots[0]
        tree, want = variant.shot(shot), source.shot(shot)
        by_dim: dict[str, list] = {}
        for node in tree.subtree:
            for name, da in node.dataset.data_vars.items():
                by_dim.setdefault(da.dims[0], []).append(da)
                np.testing.assert_array_equal(da[da.dims[0]].values, want[node.path][name][da.dims[0]].values)
                assert da[da.dims[0]].attrs == want[node.path][name][da.dims[0]].attrs
        first, second = next(arrays for arrays in by_dim.values() if len(arrays) > 1)[:2]
        before = dict(second[second.dims[0]].attrs)
        first.coords[first.dims[0]].attrs["changed"] = 1
        assert second[second.dims[0]].attrs == before


@pytest.mark.parametrize("layout", ["source", "reorder", "shot-major", "signal-major", "shot-packed"])
def test_text_attributes_that_are_not_utf8_come_back_as_bytes(edge_archive: Path, tmp_path: Path, layout: str) -> None:
    """Stored losslessly as "base64:..." text (JSON has no bytes), read back as the bytes."""
    path = {
        "source": lambda: edge_archive,
        "reorder": lambda: reorder(edge_archive, tmp_path / "r.h5", ReorderOptions(by="shot")) and tmp_path / "r.h5",
        "shot-major": lambda: convert(edge_archive, tmp_path / "m.zarr") and tmp_path / "m.zarr",
        "signal-major": lambda: convert(edge_archive, tmp_path / "s.zarr", ConvertOptions(layout="signal-major")) and tmp_path / "s.zarr",
        "shot-packed": lambda: convert(edge_archive, tmp_path / "p.zarr", ConvertOptions(layout="shot-packed")) and tmp_path / "p.zarr",
    }[layout]()
    with layoutkit.open(path) as archive:
        assert archive.read("1", "ip").attrs["probe_units"] == b"\xb5m"
        assert archive.read("1", "ip").attrs["units"] == "A"
        assert "probe_units" not in archive.read("2", "ip").attrs


def test_shot_keeps_the_shot_attributes(four_layouts: dict[str, Path]) -> None:
    for path in four_layouts.values():
        with layoutkit.open(path) as archive:
            tree = archive.shot(archive.shots[0])
            assert tree.attrs["shot"] == int(archive.shots[0]) and "comment" in tree.attrs


def test_a_shot_tree_is_the_tree_xarray_builds_from_its_nodes(four_layouts: dict[str, Path]) -> None:
    """The shot tree links its nodes without xarray's alignment check: it must be the tree
    the public constructor gives, and behave as one (paths, parents, a node added later)."""
    import xarray as xr

    from layoutkit.readers.base import _adopt

    for path in four_layouts.values():
        with layoutkit.open(path) as archive:
            tree = archive.shot(archive.shots[0])
        public = xr.DataTree.from_dict({f"/{name}": node.to_dataset() for name, node in tree.children.items()},
                                       name=tree.name)
        public.attrs = dict(tree.attrs)
        xr.testing.assert_identical(tree, public)
        for name, node in tree.children.items():
            assert node.parent is tree and node.path == f"/{name}" and tree[name] is node
        assert len(list(tree.subtree)) == len(tree.children) + 1
        tree["extra"] = xr.DataTree(xr.Dataset({"x": ("n", [1, 2])}))
        assert tree["extra"].parent is tree and "extra" in tree.children
    # never over a parent that holds something, nor a node that has a parent already
    full = xr.DataTree(xr.Dataset({"x": ("n", [1, 2])}))
    assert not _adopt(full, {"a": xr.DataTree()})
    taken = xr.DataTree(children={"a": xr.DataTree()})
    assert not _adopt(xr.DataTree(), {"b": taken["a"]})
    assert taken["a"].parent is taken


def test_a_node_built_without_the_copy_is_the_node_xarray_builds() -> None:
    """_node skips DataTree's copy of a dataset nothing else holds: the node must equal
    the constructor's, with the dataset's own variables, and behave as one."""
    import numpy as np
    import xarray as xr

    from layoutkit.readers.base import _node

    def dataset() -> xr.Dataset:
        return xr.Dataset({"ip": (("time", "ch"), np.arange(6.0).reshape(3, 2), {"units": "A"})},
                          coords={"time": ("time", [0.1, 0.2, 0.3], {"units": "s"})}, attrs={"shot": 7})

    ours, public = _node(dataset()), xr.DataTree(dataset())
    xr.testing.assert_identical(ours, public)
    assert ours.parent is None and ours.name is None and not ours.children
    assert ours.xindexes.keys() == public.xindexes.keys() == {"time"}
    ours["extra"] = xr.DataTree(xr.Dataset({"x": ("n", [1, 2])}))
    ours.name = "shot"
    assert ours["extra"].parent is ours and ours.name == "shot" and ours.dataset["ip"].sel(time=0.2).sum() == 5.0


def test_every_stored_array_scans(four_layouts: dict[str, Path]) -> None:
    """blocks() covers every stored array once, and read_block reads each unit."""
    with layoutkit.open(four_layouts["signal-major"]) as archive:
        arrays = archive.arrays()
        blocks = archive.blocks()
        assert {p for p, _ in blocks} == {p for p, (shape, _) in arrays.items() if 0 not in shape}
        assert "/signals/ip/data" in arrays and "/shots/1160930001/signals/ip" not in arrays
        total = sum(archive.read_block(p, sel).size for p, sel in blocks)
        assert total == sum(int(np.prod(shape)) for shape, _ in arrays.values())


def test_open_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        layoutkit.open(tmp_path / "nothing")
    (tmp_path / "folder").mkdir()
    with pytest.raises(NotAnArchiveError, match="not a Zarr store"):
        layoutkit.open(tmp_path / "folder")
    (tmp_path / "text.h5").write_text("not hdf5")
    with pytest.raises(NotAnArchiveError):
        layoutkit.open(tmp_path / "text.h5")
    future = tmp_path / "future.zarr"
    zarr.open_group(future, mode="w").attrs["layoutkit_layout"] = {"name": "signal-major", "version": 99}
    with pytest.raises(NotAnArchiveError, match="version 99"):
        layoutkit.open(future)
    other = tmp_path / "other.zarr"
    zarr.open_group(other, mode="w").attrs["layoutkit_layout"] = {"name": "diagonal", "version": 1}
    with pytest.raises(NotAnArchiveError, match="diagonal"):
        layoutkit.open(other)


@pytest.mark.parametrize("consolidate", [True, False])
def test_open_reads_the_consolidated_document_once_and_parses_arrays_when_used(
    shot_file: Path, tmp_path: Path, consolidate: bool
) -> None:
    """With consolidated metadata, open is one request and lists every array with zarr's
    own shape and dtype; without it, zarr's group is used; either way the reads agree."""
    store = tmp_path / "shots.zarr"
    convert(shot_file, store, ConvertOptions(consolidate=consolidate))
    group = zarr.open_group(store, mode="r", use_consolidated=consolidate)
    expected = {"/" + name: (tuple(a.shape), a.dtype) for name, a in group.arrays()}
    expected.update({"/" + path: (tuple(a.shape), a.dtype) for path, a in group.members(max_depth=None)
                     if isinstance(a, zarr.Array)})
    with layoutkit.open(store) as archive:
        if consolidate:
            assert archive.counter.requests == 1  # the root document, nothing per array
        got = archive.arrays()
        assert got == {p: (shape, np.dtype(dtype)) for p, (shape, dtype) in expected.items()}
        with layoutkit.open(shot_file) as source:
            assert_same_reads(source, archive, slices=True)


def test_requests_in_flight_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One signal of many shots of a shot-major store is an object per shot: they go out
    concurrently, but at most MAX_IN_FLIGHT at a time (sent all at once from a bucket,
    20,000 of them failed with "Too many open files")."""
    import h5py
    from conftest import Rounds

    from layoutkit.storage import counting
    from layoutkit.storage.counting import LatencyModel

    src = tmp_path / "shots.h5"
    with h5py.File(src, "w") as f:
        for shot in range(1, 61):
            f.create_dataset(f"shots/{shot}/signals/ip", data=np.full(3, shot, dtype="f4"))
    convert(src, tmp_path / "shots.zarr")
    monkeypatch.setattr(counting, "MAX_IN_FLIGHT", 8)
    rounds = Rounds()
    with layoutkit.open(tmp_path / "shots.zarr", model=LatencyModel(latency=0.01), sleep=rounds.sleep) as archive:
        archive.counter.reset()
        got = archive.signal("ip")
        assert archive.counter.requests >= 60
    assert rounds.most_in_flight == 8  # concurrent, and capped
    assert [float(a[0]) for a in got.values()] == list(range(1, 61))
