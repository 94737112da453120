"""convert --order shot-packed: each shot's datasets packed as bytes into one array."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from roundtrip import LayoutRoundTrip
from typer.testing import CliRunner

import layoutkit
from layoutkit.cli import app
from layoutkit.convert import ConvertOptions, convert
from layoutkit.errors import UnsupportedFeatureError
from layoutkit.reorder import ReorderOptions, reorder
from layoutkit.verify.equality import compare_variant

PACKED = ConvertOptions(layout="shot-packed")
runner = CliRunner()


class TestZarrShotPackedRoundTrip(LayoutRoundTrip):
    """The shared round trips for ``convert --layout shot-packed``: files that are not
    shot archives are refused, naming the template."""

    layout = "zarr-shot-packed"
    options = PACKED


@pytest.fixture(scope="module")
def packed_store(tmp_path_factory) -> tuple[Path, Path]:
    from layoutkit.sample import write_sample

    root = tmp_path_factory.mktemp("packed")
    src = root / "shots.h5"
    write_sample(src, shots=6, signals=12, seed=3)
    convert(src, root / "packed.zarr", PACKED)
    return src, root / "packed.zarr"


def test_a_shot_is_one_object(packed_store: tuple[Path, Path]) -> None:
    """Every numeric dataset of a shot is in the shot's index, its bytes end to end in the
    shot's one packed array, stored as one object (a shard)."""
    src, store = packed_store
    with h5py.File(src, "r") as f:
        for shot in f["shots"]:
            numeric: dict[str, h5py.Dataset] = {}

            def note(name: str, obj: object, found: dict[str, h5py.Dataset] = numeric) -> None:
                if isinstance(obj, h5py.Dataset):
                    found[name] = obj

            f[f"shots/{shot}"].visititems(note)
            packed = store / "shots" / shot / "_packed" / "zarr.json"
            doc = json.loads(packed.read_text())["attributes"]["layoutkit_shot_packed"]
            assert doc["version"] == 3 and set(doc["names"]) == set(numeric)
            entries = sorted(zip(doc["start"], doc["shape"], doc["dtype"], strict=True))
            ends = [start + int(np.prod(shape)) * np.dtype(dtype).itemsize for start, shape, dtype in entries]
            assert [start for start, _, _ in entries] == [0, *ends[:-1]]
            for rel, shape, dtype in zip(doc["names"], doc["shape"], doc["dtype"], strict=True):
                assert np.dtype(dtype) == numeric[rel].dtype and tuple(shape) == numeric[rel].shape
            objects = [p for p in (store / "shots" / shot / "_packed").rglob("*") if p.is_file() and p.name != "zarr.json"]
            assert len(objects) == 1, objects


def test_groups_the_index_implies_are_not_written(packed_store: tuple[Path, Path]) -> None:
    """A group inside a shot without attributes that holds packed datasets only is not
    a node of its own (one object fewer per shot); the reader still finds it."""
    src, store = packed_store
    with h5py.File(src, "r") as f:
        shot = next(iter(f["shots"]))
        inside = [name for name, g in f[f"shots/{shot}"].items() if isinstance(g, h5py.Group)]
        assert inside and not any(f[f"shots/{shot}/{name}"].attrs for name in inside)
    assert (store / "shots" / shot / "zarr.json").is_file()
    for name in inside:
        assert not (store / "shots" / shot / name / "zarr.json").exists(), name
    with layoutkit.open(store) as archive:  # the hierarchy the comparator walks
        assert set(inside) <= set(archive.children(f"/shots/{shot}"))
        assert all(archive.exists(f"/shots/{shot}/{name}") for name in inside)
    assert compare_variant(src, store) == []


def test_a_shot_costs_fewer_requests_than_paged_hdf5_by_shot(packed_store: tuple[Path, Path], tmp_path: Path) -> None:
    """Reading a whole shot, opening included: the shot-packed store needs fewer requests
    than a paged HDF5 file ordered by shot read through a 64 MiB page buffer."""
    src, store = packed_store
    paged = tmp_path / "by-shot.h5"
    reorder(src, paged, ReorderOptions(by="shot"))
    with layoutkit.open(src) as source:
        shots = source.shots
    for shot in shots[::2]:
        with layoutkit.open(store) as archive:
            archive.shot(shot)
            zarr_requests = archive.counter.requests
        with layoutkit.open(paged, page_buffer=64 << 20) as archive:
            archive.shot(shot)
            hdf5_requests = archive.counter.requests
        # the root document, the shot's index (its packed array's metadata), its shard
        assert zarr_requests <= 3
        assert zarr_requests < hdf5_requests, (shot, zarr_requests, hdf5_requests)


def test_iterating_shots_fetches_the_next_one_ahead(packed_store: tuple[Path, Path], monkeypatch) -> None:
    """iter_shots gives the trees shot() gives, with the same requests, but the next
    shots' objects (up to AHEAD_SHOTS) are asked for before the current shot is handed
    over; a read that wants other objects than those fetched ahead fetches its own."""
    import xarray as xr

    from layoutkit.archive import Archive
    from layoutkit.readers.zarr_ import AHEAD_SHOTS

    _, store = packed_store
    with layoutkit.open(store) as archive:
        shots = archive.shots[:4]
        archive.counter.reset()
        ahead: list[list] = []
        fetch_ahead = archive._fetch_ahead
        archive._fetch_ahead = lambda reads: ahead.append(reads) or fetch_ahead(reads)
        trees = archive.iter_shots(shots)
        first, tree = next(trees)
        assert first == shots[0] and len(ahead) == AHEAD_SHOTS == 3  # shots 1, 2 and 3, started in order
        assert all(f"/{shot}/" in reads[0][0] for shot, reads in zip(shots[1:], ahead, strict=True))
        rest = list(trees)
        # each shot's index (fetched together), then its shard: nothing twice, nothing past the last
        assert archive.counter.requests == 2 * len(shots)
        for shot, got in [(first, tree), *rest]:
            xr.testing.assert_identical(got, archive.shot(shot))
        # bytes fetched ahead for one shot are never handed to a read of another
        want = archive.shot(shots[2])
        rows = list(archive._rows_of(archive._shot_paths(shots[1])[1]).values())
        archive._local.fetched = archive._fetch_ahead([(p, (slice(lo, hi),)) for p, lo, hi in archive._spans(rows)])
        xr.testing.assert_identical(archive.shot(shots[2]), want)
        assert list(Archive.iter_shots(archive, [shots[2]]))[0][0] == shots[2]
    # a shot larger than the budget is fetched ahead, not decoded ahead: the same trees
    monkeypatch.setattr("layoutkit.readers.zarr_.AHEAD_DECODED_BYTES", 0)
    with layoutkit.open(store) as archive:
        archive.counter.reset()
        for shot, got in archive.iter_shots(shots):
            xr.testing.assert_identical(got, archive.shot(shot))
        assert archive.counter.requests == 3 * len(shots)
    with layoutkit.open(store) as archive:
        monkeypatch.setattr(type(archive), "_fetch_ahead", lambda self, reads: None)
        archive.counter.reset()
        list(archive.iter_shots(shots))
        assert archive.counter.requests == 2 * len(shots)  # with nothing ahead, one GET each as it comes


def test_a_shot_read_views_its_packed_array_and_a_signal_read_copies(packed_store: tuple[Path, Path]) -> None:
    """A whole shot's arrays are views of the decoded packed array (aligned ones; nothing
    of it is wasted), a signal's arrays are copies: one signal must not keep every shot's
    packed array alive."""

    def owner(a: np.ndarray) -> np.ndarray:
        while isinstance(a.base, np.ndarray):
            a = a.base
        return a

    _, store = packed_store
    with layoutkit.open(store) as archive:
        tree = archive.shot(archive.shots[0])
        values = [node.dataset[name].values for node in tree.subtree for name in node.dataset.data_vars]
        assert all(v.flags.aligned for v in values)
        assert len({id(owner(v)) for v in values}) < len(values)  # views of a shared buffer
        for a in archive.signal("ip").values():
            assert owner(a.values).nbytes == a.values.nbytes  # its own copy


def test_one_signal_of_a_shot_is_a_ranged_read(packed_store: tuple[Path, Path]) -> None:
    _, store = packed_store
    with layoutkit.open(store) as archive:
        shot = archive.shots[1]
        size = sum(archive.get(p).nbytes for p in archive.arrays() if f"/{shot}/" in p)
        archive.counter.reset()
        archive.read(shot, "ip")
        assert archive.counter.requests <= 2  # ip and its time base: the shard index, then one range
        assert archive.counter.bytes < size


def test_a_signal_of_many_shots_is_read_in_bounded_batches(packed_store: tuple[Path, Path], monkeypatch) -> None:
    """One signal of every shot, each shot's part a ranged read through zarr: read in
    batches of bounded working memory, the values are the source's and the traced peak
    is well under what all the reads at once hold (8 threads reading signals of 100 shots
    at once held 0.8 GB)."""
    import tracemalloc

    import layoutkit.layouts.shot_packed.read as packed_reader
    import layoutkit.readers.zarr_ as zarr_reader

    src, store = packed_store
    monkeypatch.setattr(packed_reader, "WHOLE_READ_BYTES", 0)  # every shot's part read as a range, not the packed array whole

    def peak_of_signal(batch_bytes: int) -> tuple[int, dict[str, np.ndarray], int]:
        monkeypatch.setattr(zarr_reader, "ZARR_BATCH_BYTES", batch_bytes)
        with layoutkit.open(store) as archive:
            archive.signal("ip")  # zarr's arrays opened, the index parsed
            archive.counter.reset()
            tracemalloc.start()
            try:
                got = archive.signal("ip")
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            return peak, {shot: a.values for shot, a in got.items()}, archive.counter.requests

    # the least of three runs: a traced peak also holds any one-off growth of the process's
    # own tables (3.8 MB allocated inside sys.intern, its table growing, landed in one read here)
    all_at_once, values, requests = min((peak_of_signal(1 << 40) for _ in range(3)), key=lambda r: r[0])
    one_by_one, batched_values, batched_requests = min((peak_of_signal(1) for _ in range(3)), key=lambda r: r[0])
    with layoutkit.open(src) as source:
        expected = {shot: a.values for shot, a in source.signal("ip").items()}
    assert len(expected) == 6
    for shot, want in expected.items():
        np.testing.assert_array_equal(values[shot], want)
        np.testing.assert_array_equal(batched_values[shot], want)
    assert batched_requests == requests  # the same reads, in more round trips
    assert one_by_one < all_at_once / 2, (one_by_one, all_at_once)


def test_a_changed_index_is_found(packed_store: tuple[Path, Path], tmp_path: Path) -> None:
    import shutil

    src, store = packed_store
    copy = tmp_path / "tampered.zarr"
    shutil.copytree(store, copy)
    shot = sorted(p.name for p in (copy / "shots").iterdir())[0]
    meta = copy / "shots" / shot / "_packed" / "zarr.json"
    doc = json.loads(meta.read_text())
    index = doc["attributes"]["layoutkit_shot_packed"]
    i = next(i for i, start in enumerate(index["start"]) if start > 0)
    name = index["names"][i]
    index["start"][i] -= 1
    meta.write_text(json.dumps(doc))
    found = compare_variant(src, copy)
    assert any(m.path.endswith(name) and m.what == "values" for m in found)
    assert any(m.what == "index" for m in found)


def test_refusals_are_one_sentence(shot_file: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["convert", str(shot_file), str(tmp_path / "o.zarr"), "--layout", "shot-packed",
                                 "--compressor", "source"])
    assert result.exit_code == 2 and "needs --layout shot-major" in " ".join(result.output.split())
    src = tmp_path / "reserved.h5"
    with h5py.File(src, "w") as f:
        f["shots/1/signals/ip"] = np.arange(4.0)
        f["shots/1/_packed"] = np.arange(3.0)
    with pytest.raises(UnsupportedFeatureError, match="_packed"):
        convert(src, tmp_path / "r.zarr", PACKED)
    assert not (tmp_path / "r.zarr").exists()


def _index_docs(store: Path) -> tuple[dict, dict[Path, dict]]:
    root = json.loads((store / "zarr.json").read_text())
    shots = {p: json.loads(p.read_text()) for p in sorted((store / "shots").glob("*/zarr.json"))}
    return root, shots


def as_version_2(store: Path) -> None:
    """Rewrite a version-3 store as layoutkit wrote shot-packed Zarr v3 stores before
    version 3: each shot's index an attribute of its shot group, its attributes and scales
    rows of tables in the root's layout attribute, and every node, the shots' included, in
    the root's consolidated metadata (no shot list, no signal list)."""
    import shutil

    root = json.loads((store / "zarr.json").read_text())
    layout = root["attributes"]["layoutkit_layout"]
    assert layout["version"] == 3
    tables: dict[str, list] = {"attrs": [], "scales": []}

    def row(table: str, value: object) -> int:
        if value not in tables[table]:
            tables[table].append(value)
        return tables[table].index(value)

    shutil.rmtree(store / layout.pop("shots"))
    del layout["signals"]
    nodes = {meta.parent.relative_to(store).as_posix(): json.loads(meta.read_text())
             for meta in sorted(store.rglob("*/zarr.json"))}
    for key, doc in list(nodes.items()):
        group, _, name = key.rpartition("/")
        if name != "_packed":
            continue
        index = doc["attributes"].pop("layoutkit_shot_packed")
        nodes[group]["attributes"]["layoutkit_shot_packed"] = {
            "version": 2, **{k: index[k] for k in ("names", "start", "dtype", "shape", "fill_value")},
            "attrs": [row("attrs", a) for a in index["attrs"]], "scales": [row("scales", sc) for sc in index["scales"]]}
    for key, doc in nodes.items():
        (store / key / "zarr.json").write_text(json.dumps(doc))
        if doc["node_type"] == "group":
            doc["consolidated_metadata"] = {"kind": "inline", "must_understand": False, "metadata": {}}
    layout.update(version=2, **tables)
    del root["attributes"]["layoutkit_nodes"]  # the nodes outside shots: consolidated with the rest
    root["consolidated_metadata"] = {"kind": "inline", "must_understand": False, "metadata": nodes}
    (store / "zarr.json").write_text(json.dumps(root))


def test_the_version_2_index_writes_each_distinct_attribute_set_once(shot_file: Path, tmp_path: Path) -> None:
    """Zarr v2 stores keep the version-2 index (their consolidated metadata lists every
    node): the shots repeat their signals' attributes, the root's tables hold each
    distinct set once, and each shot's index points every dataset at the row of its own."""
    src, store = shot_file, tmp_path / "v2.zarr"
    convert(src, store, ConvertOptions(layout="shot-packed", zarr_format=2))
    root = json.loads((store / ".zattrs").read_text())
    shots = {p: json.loads(p.read_text()) for p in sorted((store / "shots").glob("*/.zattrs"))}
    tables = root["layoutkit_layout"]
    assert tables["version"] == 2
    distinct: set[str] = set()
    with h5py.File(src, "r") as f:
        for meta, attrs in shots.items():
            index = attrs["layoutkit_shot_packed"]
            for name, row in zip(index["names"], index["attrs"], strict=True):
                ds = f[f"shots/{meta.parent.name}/{name}"]
                want = {k: (v.decode() if isinstance(v, bytes) else v.tolist() if hasattr(v, "tolist") else v)
                        for k, v in ds.attrs.items() if k not in ("DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME")}
                got = tables["attrs"][row]
                assert {k: got[k] for k in want} == want, name
                distinct.add(json.dumps(got, sort_keys=True))
    assert len(tables["attrs"]) == len(distinct) < sum(len(a["layoutkit_shot_packed"]["names"]) for a in shots.values())
    assert "attrs" not in json.loads((store / "layoutkit.json").read_text())["layout"]
    assert compare_variant(src, store) == []


def test_a_version_2_store_is_still_read(packed_store: tuple[Path, Path], tmp_path: Path) -> None:
    """A Zarr v3 store written with the version-2 index (before the root stopped growing
    with the shots) opens, reads as the source, and is checked as equal to it."""
    import shutil

    src, store = packed_store
    old = tmp_path / "v2.zarr"
    shutil.copytree(store, old)
    as_version_2(old)
    assert json.loads((old / "zarr.json").read_text())["attributes"]["layoutkit_layout"]["version"] == 2
    assert compare_variant(src, old) == []
    with layoutkit.open(store) as new, layoutkit.open(old) as legacy:
        assert legacy.shots == new.shots and legacy.signals == new.signals
        for shot in new.shots[:2]:
            assert new.shot(shot).identical(legacy.shot(shot))
        want, got = new.signal("ip"), legacy.signal("ip")
        assert list(got) == list(want) and all(got[k].identical(want[k]) for k in want)


def test_a_version_1_index_is_still_read(packed_store: tuple[Path, Path], tmp_path: Path) -> None:
    """A store written before the index had tables (a dict per dataset in every shot's
    index) opens and reads as the source, and is checked as equal to it."""
    import shutil

    src, store = packed_store
    old = tmp_path / "v1.zarr"
    shutil.copytree(store, old)
    as_version_2(old)
    root, shots = _index_docs(old)
    layout = root["attributes"]["layoutkit_layout"]
    tables = {"attrs": layout.pop("attrs"), "scales": layout.pop("scales")}
    layout["version"] = 1

    def v1(index: dict) -> dict:
        columns = zip(index["names"], index["start"], index["dtype"], index["shape"], index["fill_value"],
                      index["attrs"], index["scales"], strict=True)
        return {"version": 1, "members": {
            name: {"start": start, "dtype": dtype, "shape": shape, "fill_value": fill,
                   "attrs": tables["attrs"][a], "scales": tables["scales"][sc]}
            for name, start, dtype, shape, fill, a, sc in columns}}

    consolidated = root["consolidated_metadata"]["metadata"]
    for meta, doc in shots.items():
        key = meta.parent.relative_to(old).as_posix()
        doc["attributes"]["layoutkit_shot_packed"] = v1(doc["attributes"]["layoutkit_shot_packed"])
        consolidated[key]["attributes"]["layoutkit_shot_packed"] = doc["attributes"]["layoutkit_shot_packed"]
        meta.write_text(json.dumps(doc))
    (old / "zarr.json").write_text(json.dumps(root))
    assert compare_variant(src, old) == []
    with layoutkit.open(store) as new, layoutkit.open(old) as legacy:
        shot = new.shots[0]
        assert legacy.layout == "shot-packed"
        new_tree, old_tree = new.shot(shot), legacy.shot(shot)
        assert new_tree.identical(old_tree) and len(old_tree.children) > 1


def test_shots_on_their_way_stay_within_the_budget(packed_store: tuple[Path, Path], monkeypatch) -> None:
    """Beyond the next shot, a further one is fetched ahead only while the shots on their
    way hold less than AHEAD_DECODED_BYTES: with a budget just above one shot's arrays,
    never more than two are on their way (the next, and one more started under the
    budget)."""
    import xarray as xr

    import layoutkit.readers.zarr_ as zarr_reader

    _, store = packed_store
    with layoutkit.open(store) as archive:
        shots = archive.shots[:5]
        sizes = [sum(seg.length for seg in archive._segments[shot].values()) for shot in shots]
    assert 2 * min(sizes) > max(sizes) + 1
    monkeypatch.setattr(zarr_reader, "AHEAD_DECODED_BYTES", max(sizes) + 1)
    with layoutkit.open(store) as archive:
        started: list[int] = []
        fetch_ahead = archive._fetch_ahead
        archive._fetch_ahead = lambda reads: started.append(len(started)) or fetch_ahead(reads)
        on_their_way = []
        for i, (shot, tree) in enumerate(archive.iter_shots(shots)):
            on_their_way.append(len(started) - i)  # started for shots after this one
            xr.testing.assert_identical(tree, archive.shot(shot))
        assert max(on_their_way) == 2 and len(started) == len(shots) - 1, on_their_way
