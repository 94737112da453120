"""``convert --layout signal-major``: the signal-major Zarr layout, read back exactly.

The edge cases are built here, small: a signal missing from some shots, a signal with
no samples in a shot, 2-D signals whose channel count changes, a signal whose dtype
changes across shots, shared, private, duplicated and global dimension scales, per-shot
attributes, and datasets the packing does not carry (text, scalars, arrays outside
the template), which are mirrored.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr
import zarr
from conftest import Rounds, assert_same_reads, build_edge_archive
from hypothesis import given
from hypothesis import strategies as st
from roundtrip import LayoutRoundTrip
from typer.testing import CliRunner

import layoutkit
from layoutkit.cli import app
from layoutkit.convert import ConvertOptions, convert, plan_convert
from layoutkit.errors import InvalidOptionError, UnsupportedFeatureError
from layoutkit.layouts.signal_major.compare import compare as compare_signal_major
from layoutkit.layouts.signal_major.plan import packed_pieces, plan_packed_chunks
from layoutkit.options import parse_chunks, parse_shards
from layoutkit.storage.counting import LatencyModel
from layoutkit.verify.equality import compare_variant

SHARDED = ConvertOptions(layout="signal-major", shards=parse_shards("auto"))


@pytest.fixture(scope="module")
def edge(edge_archive: Path) -> Path:
    return edge_archive


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(SHARDED, id="v3-sharded"),
        pytest.param(ConvertOptions(layout="signal-major", zarr_format=2), id="v2"),
        pytest.param(ConvertOptions(layout="signal-major", chunks=parse_chunks("7,-1"), scheduler="serial"), id="v3-chunks-7"),
    ],
)
def test_edge_cases_read_back_exactly(edge: Path, tmp_path: Path, options: ConvertOptions) -> None:
    dst = tmp_path / "edge.zarr"
    convert(edge, dst, options)
    with layoutkit.open(edge) as source, layoutkit.open(dst) as store:
        assert store.layout == "signal-major"
        assert_same_reads(source, store)
    assert compare_variant(edge, dst) == []


def test_parts_dedupe_and_mirrors(edge: Path, tmp_path: Path) -> None:
    """Version 2 (Zarr v3): the series attribute holds no per-shot list; the rows, the
    per-shot attributes and the repeated scales are index arrays; what lies inside shots
    is left out of the root's node listing and carried by each shot group's document."""
    dst = tmp_path / "edge.zarr"
    convert(edge, dst, SHARDED)
    root = zarr.open_group(dst, mode="r")
    layout = root.attrs["layoutkit_layout"]
    assert layout["name"] == "signal-major" and layout["version"] == 2
    assert layout["template"] == "/shots/{shot}/signals/{signal}"
    assert root.metadata.consolidated_metadata is None  # zarr reads node by node: it finds every node
    assert not any(path.startswith("shots/") for path in root.attrs["layoutkit_nodes"])
    assert [str(s) for s in root["_shots"][:]] == ["1", "2", "3", "10"]
    assert "ip" in layout["signal_names"] and "label" in layout["unpacked_signals"]
    doc = root["signals/profile"].attrs["layoutkit_series"]
    assert [p["shots"] for p in doc["parts"]] == [3, 1]
    np.testing.assert_array_equal(root["signals/profile/shot"][:], [1, 2, 3])  # 8 channels, then 6
    np.testing.assert_array_equal(root["signals/profile/shot_1"][:], [10])
    assert doc["parts"][0]["dims"] == [["timebases/t"], ["timebases/channel"]]
    assert root["signals/profile/data"].shape == (50 + 60 + 70, 8)
    assert root["signals/profile/data_1"].shape == (80, 6)
    np.testing.assert_array_equal(root["signals/counts/shot"][:], [1, 2, 10])  # int16, then float64
    np.testing.assert_array_equal(root["signals/counts/shot_1"][:], [3])
    assert not root["signals/ne"].attrs["layoutkit_series"]["parts"][0]["attrs"] and "attrs" not in root["signals/ne"]
    assert root["signals/ip"].attrs["layoutkit_series"]["parts"][0]["attrs"]
    assert [json.loads(a) for a in root["signals/ip/attrs"][:]] == [
        {"offset": 0.0, "probe_units": "base64:tW0="}, {"offset": 1.0}, {"offset": 2.0}, {"offset": 3.0}]
    assert dict(root["signals/ip/data"].attrs) == {"units": "A"}
    # the private time copy is stored once where it equals t, and on its own in shot 3
    ne_time = root["scales/timebases/ne_time"]
    assert ne_time.attrs["layoutkit_series"]["same_as"] == {"shots": 3, "sources": ["timebases/t"]}
    np.testing.assert_array_equal(ne_time["same_as_shot"][:], [1, 2, 10])
    assert [str(v) for v in ne_time["same_as"][:]] == ["timebases/t"] * 3
    np.testing.assert_array_equal(ne_time["shot"][:], [3])
    np.testing.assert_array_equal(root["signals/ip/shot"][:], [1, 2, 3, 10])
    np.testing.assert_array_equal(root["signals/ip/start"][:], [0, 50, 110, 180])
    np.testing.assert_array_equal(root["signals/empty_in_3/length"][:], [50, 60, 0, 80])
    # what the packing does not carry is mirrored at its own path, and listed
    for path in ("calibration/table", "shots/1/signals/label", "shots/2/signals/scalar", "shots/3/extra",
                 "common/ch"):
        assert isinstance(root[path], zarr.Array)
    listed = [str(p) for p in root["_mirrored"][:]]
    assert {"/shots/1/signals/label", "/shots/2/signals/scalar", "/shots/3/extra"} <= set(listed)
    shot_1 = root["shots/1"].attrs
    assert {k: v for k, v in shot_1.items() if k != "layoutkit_shot"} == {"shot": 0, "comment": "shot 1"}
    assert "signals/label" in shot_1["layoutkit_shot"]["mirrored"]
    # each shot's own index: its row in every series, its attributes beyond the part's, its repeated scales
    shot_3 = root["shots/3"].attrs["layoutkit_shot"]
    assert shot_3["rows"]["signals/ip"] == ["", 110, 70] and shot_3["attrs"]["signals/ip"] == {"offset": 2.0}
    assert root["shots/1"].attrs["layoutkit_shot"]["same_as"] == {"timebases/ne_time": "timebases/t"}
    assert "shots/2/timebases" not in root  # a group without attributes is implied by the index
    sidecar = json.loads((dst / "layoutkit.json").read_text())
    assert sidecar["layout"]["name"] == "signal-major"
    assert sidecar["merged_scales"] == 3  # ne_time, equal to t in three shots (tz lacks the rate)
    with layoutkit.open(dst) as store:  # and layoutkit hides what the layout adds
        assert store.read("1", "label").attrs == layoutkit.open(edge).read("1", "label").attrs


def test_zarr_v2_stores_keep_the_version_1_index(edge: Path, tmp_path: Path) -> None:
    """Zarr v2's consolidated metadata must list every node, so Zarr v2 stores keep the
    index of version 1: the whole index repeated in each series' attribute."""
    dst = tmp_path / "edge.zarr"
    convert(edge, dst, ConvertOptions(layout="signal-major", zarr_format=2))
    root = zarr.open_group(dst, mode="r")
    assert root.attrs["layoutkit_layout"]["version"] == 1
    doc = root["signals/profile"].attrs["layoutkit_series"]
    assert [p["shots"] for p in doc["parts"]] == [["1", "2", "3"], ["10"]]
    ip = root["signals/ip"].attrs["layoutkit_series"]["parts"][0]
    assert ip["shot_attrs"] == {"1": {"offset": 0.0, "probe_units": "base64:tW0="}, "2": {"offset": 1.0},
                                "3": {"offset": 2.0}, "10": {"offset": 3.0}}
    ne_time = root["scales/timebases/ne_time"].attrs["layoutkit_series"]
    assert ne_time["same_as"] == {"timebases/t": ["1", "2", "10"]}
    assert dict(root["shots/1"].attrs) == {"shot": 0, "comment": "shot 1"}
    assert compare_variant(edge, dst) == []


def test_text_shot_names_are_text_ids(tmp_path: Path) -> None:
    src = build_edge_archive(tmp_path / "named.h5", ("run_a", "run_b", "007"))
    dst = tmp_path / "named.zarr"
    convert(src, dst, SHARDED)
    ids = zarr.open_group(dst, mode="r")["signals/ip/shot"][:]
    assert [str(s) for s in ids] == ["007", "run_a", "run_b"]
    with layoutkit.open(src) as source, layoutkit.open(dst) as store:
        assert store.shots == source.shots == ["007", "run_a", "run_b"]
        for shot in source.shots:
            xr.testing.assert_identical(store.shot(shot), source.shot(shot))


def test_sample_round_trip(shot_file: Path, tmp_path: Path) -> None:
    dst = tmp_path / "sample.zarr"
    convert(shot_file, dst, SHARDED)
    with layoutkit.open(shot_file) as source, layoutkit.open(dst) as store:
        assert_same_reads(source, store, slices=False)
    assert compare_signal_major(shot_file, dst) == []


def as_version_1(store: Path) -> None:
    """Rewrite a version-2 store as layoutkit wrote signal-major Zarr v3 stores before
    version 2: the whole index repeated in each series' attribute (shots, starts,
    lengths, per-shot attributes, the scales' same_as), every node in the root's
    consolidated metadata, no shot list, no list of what lies inside shots."""
    root = json.loads((store / "zarr.json").read_text())
    layout = root["attributes"]["layoutkit_layout"]
    assert layout["version"] == 2
    for key in ("shots", "mirrored"):
        if key in layout:
            shutil.rmtree(store / layout.pop(key))
    for key in ("index_chunk", "signal_names", "unpacked_signals"):
        layout.pop(key)
    layout["version"] = 1
    group = zarr.open_group(store, mode="r", use_consolidated=False)
    for meta in sorted(store.rglob("*/zarr.json")):
        doc = json.loads(meta.read_text())
        series = doc.get("attributes", {}).get("layoutkit_series")
        doc.get("attributes", {}).pop("layoutkit_shot", None)
        if series is not None:
            name = meta.parent.relative_to(store).as_posix()
            for part in series["parts"]:
                sfx = part["suffix"]
                ids = [str(v) for v in group[f"{name}/shot{sfx}"][:]]
                attrs = [json.loads(a) if a else {} for a in group[f"{name}/attrs{sfx}"][:]] if part["attrs"] else []
                part.update(shots=ids, starts=group[f"{name}/start{sfx}"][:].tolist(),
                            lengths=group[f"{name}/length{sfx}"][:].tolist(),
                            shot_attrs={shot: a for shot, a in zip(ids, attrs) if a})
                del part["attrs"]
            same: dict[str, list[str]] = {}
            if series["same_as"]["shots"]:
                for shot, other in zip(group[f"{name}/same_as_shot"][:], group[f"{name}/same_as"][:]):
                    same.setdefault(str(other), []).append(str(shot))
                for extra in ("same_as_shot", "same_as"):
                    shutil.rmtree(store / name / extra)
            series["same_as"] = same
            for part in series["parts"]:
                if (store / name / f"attrs{part['suffix']}").exists():
                    shutil.rmtree(store / name / f"attrs{part['suffix']}")
        meta.write_text(json.dumps(doc))
    nodes = {meta.parent.relative_to(store).as_posix(): json.loads(meta.read_text())
             for meta in sorted(store.rglob("*/zarr.json"))}
    for doc in nodes.values():
        if doc["node_type"] == "group":
            doc["consolidated_metadata"] = {"kind": "inline", "must_understand": False, "metadata": {}}
    del root["attributes"]["layoutkit_nodes"]
    root["consolidated_metadata"] = {"kind": "inline", "must_understand": False, "metadata": nodes}
    (store / "zarr.json").write_text(json.dumps(root))


def test_a_version_1_store_is_still_read(edge: Path, tmp_path: Path) -> None:
    """A Zarr v3 store written with the version-1 index (before the root stopped growing
    with the shots) opens, reads as the source, and is checked as equal to it."""
    new, old = tmp_path / "v2.zarr", tmp_path / "v1.zarr"
    convert(edge, new, SHARDED)
    shutil.copytree(new, old)
    as_version_1(old)
    assert zarr.open_group(old, mode="r").attrs["layoutkit_layout"]["version"] == 1
    assert compare_variant(edge, old) == []
    with layoutkit.open(edge) as source, layoutkit.open(old) as legacy, layoutkit.open(new) as current:
        assert legacy.shots == current.shots == source.shots
        assert legacy.signals == current.signals
        assert_same_reads(source, legacy)
        for name in ("ip", "label", "profile"):
            want, got = current.signal(name), legacy.signal(name)
            assert list(got) == list(want) and all(got[k].identical(want[k]) for k in want)


def test_xarray_reads_the_layout_without_layoutkit(shot_file: Path, tmp_path: Path) -> None:
    """What docs/formats/signal-major.md says: open a signal's group, slice shot k by start and length,
    and find its time base in the series its dims name."""
    dst = tmp_path / "sample.zarr"
    convert(shot_file, dst, SHARDED)
    ds = xr.open_zarr(dst, group="signals/ip", decode_cf=False, consolidated=False)  # node by node
    k = 1
    shot, start, length = int(ds["shot"][k]), int(ds["start"][k]), int(ds["length"][k])
    data = ds["data"][start : start + length].values
    doc = ds.attrs["layoutkit_series"]
    time_series = doc["parts"][0]["dims"][0][0]  # e.g. "timebases/t_10khz"
    tb = xr.open_zarr(dst, group=f"scales/{time_series}", decode_cf=False, consolidated=False)
    row = list(tb["shot"].values).index(shot)  # (a copy of another scale would be in same_as)
    time = tb["data"][int(tb["start"][row]) : int(tb["start"][row]) + int(tb["length"][row])].values
    with layoutkit.open(shot_file) as source:
        want = source.read(str(shot), "ip")
    np.testing.assert_array_equal(data, want.values)
    np.testing.assert_array_equal(time, want[time_series.rsplit("/", 1)[-1]].values)


# -- requests ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hundred_shots(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A 100-shot sample (two signals: the signal count does not change the counts per
    signal) as shot-major and as signal-major Zarr."""
    from layoutkit.sample import write_sample

    root = tmp_path_factory.mktemp("hundred")
    src = root / "shots.h5"
    write_sample(src, shots=100, signals=2, seed=2)
    convert(src, root / "shot.zarr")
    convert(src, root / "signal.zarr", SHARDED)
    return src, root / "shot.zarr", root / "signal.zarr"


def _requests(path: Path, method: str, name: str) -> int:
    with layoutkit.open(path) as archive:
        archive.counter.reset()
        getattr(archive, method)(name)
        return archive.counter.requests


def test_one_signal_of_every_shot_is_a_handful_of_requests(hundred_shots: tuple[Path, Path, Path]) -> None:
    _, shot_major, signal_major = hundred_shots
    for name in ("ip", "ne_bar"):
        packed = _requests(signal_major, "signal", name)
        mirrored = _requests(shot_major, "signal", name)
        # the index arrays of the signal and of its time base (3 each), then the two data shards
        assert packed <= 8, (name, packed)
        assert mirrored >= 100, (name, mirrored)


def test_a_signal_and_its_time_bases_are_fetched_in_one_round(hundred_shots: tuple[Path, Path, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The index, the data rows and the scale rows go out together: on object storage a
    round waited one more round trip per read (the time bases once; the data after the
    index, though a read of every shot takes the packed arrays whole)."""
    from layoutkit.layouts.signal_major.read import SignalMajorArchive

    rounds: list[list[str]] = []  # per read the reader makes: the paths it reads
    fetched: list[list[str]] = []  # per read: the objects fetched from the store during it
    real = SignalMajorArchive._iter_many

    def spy(self, reads):  # noqa: ANN001, ANN202
        rounds.append([path for path, _ in reads])
        fetched.append([])
        return real(self, reads)

    monkeypatch.setattr(SignalMajorArchive, "_iter_many", spy)
    _, _, signal_major = hundred_shots
    with layoutkit.open(signal_major) as archive:
        get = archive.store.get

        async def counted(key, prototype, byte_range=None):  # noqa: ANN001, ANN202
            fetched[-1].append(key)
            return await get(key, prototype, byte_range)

        archive.store.get = counted
        rounds.clear(), fetched.clear()
        got = archive.signal("ip")
        # version 2: the index of the signal and of its time base; then their rows, from the data fetched with it
        assert len(rounds) == 2, rounds
        assert all(p.rsplit("/", 1)[-1] in ("shot", "start", "length") for p in rounds[0]), rounds
        assert any(p.startswith("/scales/") for p in rounds[0]), rounds  # the time base's index with it
        assert any(p.startswith("/signals/ip/data") for p in rounds[1]), rounds
        assert any(p.startswith("/scales/") for p in rounds[1]), rounds  # the time base, in the same read
        assert any(k.startswith("signals/ip/data/") for k in fetched[0]), fetched  # the data, with the index
        assert any(k.startswith("scales/") and "/data/" in k for k in fetched[0]), fetched
        assert fetched[1] == [], fetched  # nothing left to wait for
        assert archive._kept() == {}  # nothing held after the read
        rounds.clear()
        archive.shot(archive.shots[0])
        assert len(rounds) == 1, rounds  # its data (after the shot's own document, its rows in every series)
    assert len(got) == 100 and all(a.dims and a.dims[0] in a.coords for a in got.values())
    with layoutkit.open(signal_major) as archive:
        packed = archive.signal_packed("ip")
    np.testing.assert_array_equal(packed["ip"].values, np.concatenate([got[s].values for s in packed.shot.values]))


def test_one_signal_of_every_shot_is_one_round_after_opening(hundred_shots: tuple[Path, Path, Path]) -> None:
    """Simulated latency, requests in flight together counted as one round: opening is
    one (the root), one signal of every shot one more, in either form."""
    _, _, signal_major = hundred_shots
    for method in ("signal", "signal_packed"):
        rounds = Rounds()
        with layoutkit.open(signal_major, model=LatencyModel(latency=0.02), sleep=rounds.sleep) as archive:
            rounds.rounds = 0
            getattr(archive, method)("ip")
        assert rounds.rounds == 1, method


def test_a_signal_with_per_shot_attributes_is_one_round(edge: Path, tmp_path: Path) -> None:
    """The index arrays of a signal (its per-shot attributes' text array too, which zarr
    decodes) and of its time bases go out in one round, and the data with them: the text
    array once waited for a round of its own, and the data for another."""
    dst = tmp_path / "edge.zarr"
    convert(edge, dst, SHARDED)
    assert "attrs" in zarr.open_group(dst, mode="r")["signals/ip"]
    rounds = Rounds()
    with layoutkit.open(dst, model=LatencyModel(latency=0.02), sleep=rounds.sleep) as archive:
        rounds.rounds = 0
        got = archive.signal("ip")
    assert rounds.rounds == 1
    assert got["3"].attrs["offset"] == 2.0 and "t" in got["3"].coords


def test_one_shot_costs_twice_the_shot_major_requests_and_its_index(hundred_shots: tuple[Path, Path, Path]) -> None:
    src, shot_major, signal_major = hundred_shots
    with layoutkit.open(src) as source:
        shots = source.shots[::34]
    root = zarr.open_group(signal_major, mode="r")
    parts = sum(len(node["attributes"]["layoutkit_series"]["parts"]) for node in root.attrs["layoutkit_nodes"].values()
                if "layoutkit_series" in node.get("attributes", {}))
    for shot in shots:
        packed = _requests(signal_major, "shot", shot)
        mirrored = _requests(shot_major, "shot", shot)
        # version 2 adds the shot's index chunk of each part (shot, start, length) and the shot's own document
        assert packed <= 2 * mirrored + 3 * parts + 1, (shot, packed, mirrored, parts)


def test_latency_is_counted_per_request(hundred_shots: tuple[Path, Path, Path]) -> None:
    _, _, signal_major = hundred_shots
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    with layoutkit.open(signal_major, model=LatencyModel(latency=0.01), sleep=record) as archive:
        waits.clear()
        archive.counter.reset()
        archive.signal("ip")
        assert len(waits) == archive.counter.requests and sum(waits) == pytest.approx(0.01 * len(waits))


# -- bounded memory -------------------------------------------------------------------


def test_blocks_smaller_than_a_shot_and_spanning_shots(tmp_path: Path) -> None:
    """With a 1 MiB task budget, a packed write block covers less than one shot of a
    large signal and several shots of a small one; both assemble exactly."""
    src = tmp_path / "big.h5"
    rng = np.random.default_rng(0)
    with h5py.File(src, "w") as f:
        for shot in range(3):
            sig = f.create_group(f"shots/{shot}/signals")
            sig.create_dataset("big", data=rng.normal(size=(300_000,)), chunks=(40_000,), compression="gzip")
            sig["small"] = rng.normal(size=(1000 + shot,))
    options = ConvertOptions(layout="signal-major", memory_limit=8 << 20, chunk_bytes=64 << 10,
                             shards=parse_shards("256KiB"))
    _, plan = plan_convert(src, tmp_path / "big.zarr", options)
    big = next(a for a in plan.arrays if a.path == "/signals/big/data")
    assert big.shards[0] * 8 <= 1 << 20 < 300_000 * 8
    dst = tmp_path / "big.zarr"
    convert(src, dst, options)
    assert compare_variant(src, dst) == []


@given(st.lists(st.integers(0, 6), min_size=1, max_size=8), st.data())
def test_packed_pieces_cover_exactly_the_rows_asked(lengths: list[int], data: st.DataObject) -> None:
    starts = list(np.cumsum([0, *lengths[:-1]]))
    total = sum(lengths)
    lo = data.draw(st.integers(0, total))
    hi = data.draw(st.integers(lo, total))
    rows = [(k, i) for k, n in enumerate(lengths) for i in range(n)]  # brute force
    got = [(k, i) for k, first, stop, _ in packed_pieces(starts, lengths, lo, hi) for i in range(first, stop)]
    assert got == rows[lo:hi]
    at = [a for _, first, stop, a in packed_pieces(starts, lengths, lo, hi)]
    sizes = [stop - first for _, first, stop, _ in packed_pieces(starts, lengths, lo, hi)]
    assert at == list(np.cumsum([0, *sizes[:-1]])) if at else True


def test_packed_chunks_follow_the_shots() -> None:
    auto = parse_chunks("auto")
    # sharded: about one shot (the median), at least 64 KiB
    assert plan_packed_chunks((100_000,), 4, [20_000] * 5, auto, 4 << 20, True) == (20_000,)
    assert plan_packed_chunks((1_000, 16), 4, [100] * 10, auto, 4 << 20, True) == (1_000, 16)
    # unsharded: as large as --chunk-size allows
    assert plan_packed_chunks((10_000_000,), 4, [20_000] * 500, auto, 4 << 20, False) == (1 << 20,)
    assert plan_packed_chunks((100, 8), 4, [10] * 10, parse_chunks("7,-1"), 4 << 20, True) == (7, 8)


# -- refusals ---------------------------------------------------------------------------


def test_a_file_that_is_not_a_shot_archive_is_refused_with_the_template_and_paths(
    hard_cases: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(InvalidOptionError) as err:
        convert(hard_cases["scales"], tmp_path / "x.zarr", ConvertOptions(layout="signal-major"))
    message = str(err.value)
    assert "/shots/{shot}/signals/{signal}" in message
    assert "/shot/signals/a" in message and "with layout shot-major" in message  # Python: no --options
    assert not (tmp_path / "x.zarr").exists()
    result = CliRunner().invoke(app, ["convert", str(hard_cases["scales"]), str(tmp_path / "x.zarr"), "--layout", "signal-major"])
    assert result.exit_code == 2
    assert "matches no dataset" in result.output and "/shot/time" in result.output


def test_bad_input(edge: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match="Expected layout shot-major, signal-major, shot-packed or virtual"):
        convert(edge, tmp_path / "a.zarr", ConvertOptions(layout="diagonal"))
    with pytest.raises(InvalidOptionError, match="before"):
        convert(edge, tmp_path / "a.zarr", ConvertOptions(layout="signal-major", template="/s/{signal}/{shot}"))
    with pytest.raises(InvalidOptionError, match="one {shot} and one {signal}"):
        convert(edge, tmp_path / "a.zarr", ConvertOptions(layout="signal-major", template="/shots/{shot}"))
    clash = tmp_path / "clash.h5"
    shutil.copy(edge, clash)
    with h5py.File(clash, "a") as f:
        f["signals/oops"] = np.zeros(3)  # where the layout keeps its packed signals
    with pytest.raises(UnsupportedFeatureError, match="/signals/oops"):
        convert(clash, tmp_path / "b.zarr", ConvertOptions(layout="signal-major"))
    assert not list(tmp_path.glob("*.zarr")) and not list(tmp_path.glob(".*.tmp"))


def test_cli_order_signal_and_dry_run(shot_file: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["convert", str(shot_file), str(tmp_path / "p.zarr"), "--layout", "signal-major",
                                 "--shards", "auto", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "convert plan" in result.output and not (tmp_path / "p.zarr").exists()
    result = runner.invoke(app, ["-q", "convert", str(shot_file), str(tmp_path / "p.zarr"), "--layout", "signal-major"])
    assert result.exit_code == 0, result.output
    assert layoutkit.open(tmp_path / "p.zarr").layout == "signal-major"


# -- the comparator catches what it claims to catch -------------------------------------


def _kinds(mismatches) -> set[tuple[str, str]]:  # noqa: ANN001
    return {(m.path, m.what) for m in mismatches}


def test_comparator_catches_values_attributes_and_shots(edge: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.zarr"
    convert(edge, good, SHARDED)
    assert compare_signal_major(edge, good) == []

    def corrupted(name: str, *changes) -> set[tuple[str, str]]:  # noqa: ANN002
        bad = tmp_path / name
        shutil.copytree(good, bad)
        root = zarr.open_group(bad, mode="r+", use_consolidated=False)
        for change in changes:
            change(root)
        return _kinds(compare_variant(edge, bad))

    def series(root: zarr.Group, name: str, edit) -> None:  # noqa: ANN001
        doc = root[name].attrs["layoutkit_series"]
        edit(doc["parts"][0])
        root[name].attrs["layoutkit_series"] = doc

    def value(root: zarr.Group) -> None:
        root["signals/ip/data"][55] = 1e6  # the sixth sample of shot 2

    def shot_attr(root: zarr.Group) -> None:  # shot 3 (the third row) gets another offset
        root["signals/ip/attrs"][2] = json.dumps({"offset": 7.0})

    def drop_shot(root: zarr.Group) -> None:  # shot 10 of ne vanishes from the index
        series(root, "signals/ne", lambda part: part.update(shots=part["shots"] - 1))

    def extra_shot(root: zarr.Group) -> None:  # raw claims a shot 99 instead of 10
        root["signals/raw/shot"][-1] = 99

    def shot_group_attr(root: zarr.Group) -> None:
        root["shots/1"].attrs["comment"] = "changed"

    def common_attr(root: zarr.Group) -> None:
        root["signals/ip/data"].attrs["units"] = "kA"

    found = corrupted("bad.zarr", value, shot_attr, drop_shot, extra_shot, shot_group_attr)
    assert ("/shots/2/signals/ip", "values") in found
    assert ("/shots/3/signals/ip", "attribute") in found and ("/shots/1/signals/ip", "attribute") not in found
    assert ("/shots/10/signals/ne", "missing") in found and ("/signals/ne/data", "index") in found
    assert ("/shots/99/signals/raw", "extra") in found and ("/shots/10/signals/raw", "missing") in found
    assert ("/shots/1", "attribute") in found
    assert ("/shots/1/signals/ip", "attribute") in corrupted("units.zarr", common_attr)

    def shot_document(root: zarr.Group) -> None:  # shot 2's own index points ip at another row
        doc = root["shots/2"].attrs["layoutkit_shot"]
        doc["rows"]["signals/ip"][1] += 1
        root["shots/2"].attrs["layoutkit_shot"] = doc

    assert ("/shots/2/signals/ip", "index") in corrupted("own.zarr", shot_document)


class TestZarrSignalRoundTrip(LayoutRoundTrip):
    """The shared round trips for ``convert --layout signal-major``: files that are not shot
    archives are refused, naming the template."""

    layout = "zarr-signal"
    options = SHARDED
