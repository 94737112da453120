"""``layoutkit advise``: the samples it writes, its cost model, its refusals, and the
proof on a small archive (the recommendation follows the patterns; the predicted
requests match what the full-size layouts make)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import HARD_CASES, build_edge_archive, realdata_params
from typer.testing import CliRunner

from layoutkit.advise.candidates import Candidate, candidates
from layoutkit.advise.model import Observation, fit_concurrency, full_counts, local_seconds, predict, weighted
from layoutkit.advise.run import opening_plan, parse_budget, parse_weights, typical_plan
from layoutkit.advise.subset import array_part, read_sizes, shot_part, shots_of, spread, typical_items, write_part
from layoutkit.archive import open_archive
from layoutkit.cli import app
from layoutkit.errors import InvalidOptionError, LayoutkitError
from layoutkit.hdf5.inventory import read_inventory
from layoutkit.recipes import load_recipe
from layoutkit.storage import disk_usage
from layoutkit.verify.equality import compare_variant
from layoutkit.verify.patterns import SHOT_ARCHIVE_PATTERNS, ReadPlan
from layoutkit.verify.run import Condition, describe, measure

TEMPLATE = "/shots/{shot}/signals/{signal}"
FIELDS = ("shape", "dtype", "chunks", "filters", "fill_value", "attrs", "dims", "dim_scales", "is_scale",
          "storage_bytes", "layout")  # fmt: skip


def assert_same_arrays(sample: Path, source: Path, rows: dict[str, int] | None = None) -> int:
    """Every array of the sample is the source's array, or its first ``rows``: storage,
    attributes, scales, values."""
    rows = rows or {}
    got, want = read_inventory(sample), {a.path: a for a in read_inventory(source).arrays}
    with h5py.File(sample) as s, h5py.File(source) as f:
        for a in got.arrays:
            theirs = want[a.path]
            cut = rows.get(a.path)
            # vlen: rewritten; cut: fewer chunks, and dimension names, which the inventory disambiguates by
            # length, may change (the scales themselves are checked)
            skip = {"storage_bytes"} if a.dtype.kind == "O" else {"storage_bytes", "dims"} if cut else set()
            for name in set(FIELDS) - skip - {"shape"}:
                # unnamed axes are numbered across the whole file: phony_dim_3 may become phony_dim_2
                same = [re.sub(r"phony_dim_\d+", "phony_dim", str(getattr(x, name))) for x in (a, theirs)]
                assert same[0] == same[1], (a.path, name)
            assert a.shape == ((cut, *theirs.shape[1:]) if cut else theirs.shape), a.path
            if a.kind in ("numeric", "bool") and not a.null_space and a.nbytes <= 64 * 1024**2:  # huge: by storage
                np.testing.assert_array_equal(s[a.path][()], f[a.path][:cut] if cut else f[a.path][()])
    return len(got.arrays)


# -- samples ------------------------------------------------------------------------------


def test_spread_takes_first_and_last():
    assert spread(list("abcdefghij"), 4) == ["a", "d", "g", "j"]
    assert spread(list("abc"), 5) == ["a", "b", "c"]
    assert spread(list("abcde"), 1) == ["c"]


def test_typical_items_are_the_k_whose_mean_is_the_whole_sources():
    # the sample holds a, b, c; the source also d: its mean shot is 8 (1, 4, 7, 20)
    sizes = {"a": 1, "b": 4, "c": 7, "d": 20}
    assert typical_items(["a", "b", "c"], sizes, 2, 0, "shot") == ("b", "c")  # 5.5: closer than 4 or 2.5
    assert typical_items(["a", "b", "c"], sizes, 1, 0, "shot") == ("c",)
    assert typical_items(["c", "a", "b"], sizes, 5, 0, "shot") == ("c", "a", "b")  # K past the items: all of them
    assert typical_items(["x"], sizes, 2, 0, "shot") == ()  # no size known: nothing to choose from


def test_typical_items_among_many_draws_are_seeded_and_near_the_mean():
    sizes = {f"s{i}": i * 1000 for i in range(1, 41)}  # 40 shots, mean 20,500: 9,880 sets of 3, so drawn
    names = list(sizes)
    picked = typical_items(names, sizes, 3, 0, "shot")
    assert picked == typical_items(names, sizes, 3, 0, "shot") and len(set(picked)) == 3
    assert abs(sum(sizes[n] for n in picked) / 3 - 20_500) <= 200
    assert typical_items(names, sizes, 3, 1, "shot") != picked  # another seed, other draws


def test_read_sizes_are_the_bytes_the_reads_deliver(tmp_path):
    """What :func:`read_sizes` says a shot or signal read delivers is what verify's read of
    it counts, shot by shot and signal by signal (scales shared by signals included)."""
    from layoutkit.sample import write_sample
    from layoutkit.verify.patterns import run_reads

    src = tmp_path / "shots.h5"
    write_sample(src, shots=4, signals=6, seed=2)
    sizes = read_sizes(read_inventory(src), TEMPLATE)
    with open_archive(src, template=TEMPLATE) as archive:
        assert sorted(sizes["shot"]) == sorted(archive.shots) and sorted(sizes["signal"]) == sorted(archive.signals)
        for shot in archive.shots:
            assert sizes["shot"][shot] == run_reads(archive, "shot", [shot]), shot
        for signal in archive.signals:
            assert sizes["signal"][signal] == run_reads(archive, "signal", [signal]), signal
    assert len(set(sizes["shot"].values())) > 1  # shots differ in size: the choice matters


def test_opening_is_measured_with_one_open_per_worker_the_patterns_use(tmp_path):
    from layoutkit.convert import ConvertOptions, convert
    from layoutkit.sample import write_sample
    from layoutkit.verify.patterns import OPEN_ONLY

    two, three, scan = ReadPlan("shot", ("1", "2")), ReadPlan("signal", ("a", "b", "c")), ReadPlan("scan", (), True)
    assert opening_plan([two, three], 2).items == (0, 1)
    assert opening_plan([ReadPlan("shot", ("1",))], 4).items == (0,)  # one item: one worker reads, one opens
    assert opening_plan([ReadPlan("shot", ("1",)), scan], 4).items == (0, 1, 2, 3)
    # and verify opens once per share of it (a Zarr store: every worker opens its own)
    src, dst = tmp_path / "shots.h5", tmp_path / "shots.zarr"
    write_sample(src, shots=3, signals=4, seed=1)
    convert(src, dst, ConvertOptions())
    cond = Condition("threads", 2, None, "warm", 0.0, 0.0)
    variant = describe(dst, dst.name, True, TEMPLATE)
    one, both = (measure([variant], [ReadPlan(OPEN_ONLY, items)], lambda _: [cond], 1, TEMPLATE)[0]
                 for items in ((0,), (0, 1)))
    assert one.requests > 0 and both.requests == 2 * one.requests and both.logical_bytes == 0


def test_resharded_counts_the_arrays_a_larger_archive_shards(archive, tmp_path):
    from layoutkit.advise.run import _resharded

    full = read_inventory(archive)
    shots = shots_of(full, TEMPLATE)
    one = write_part(archive, full, shot_part(full, shots, list(shots)[:1]), tmp_path / "one.h5")
    small = read_inventory(one)
    assert _resharded(Candidate("cmod-shot", "cmod-shot"), TEMPLATE, (small, full)) is None  # not a Zarr store
    assert _resharded(Candidate("shot-major", "shot-major"), TEMPLATE, (small, full)) == 0  # a shot's arrays stay
    signal = Candidate("signal-major", "signal-major")
    assert _resharded(signal, TEMPLATE, (full, full)) == 0
    # one shot's worth of each signal is stored whole; thirty shots' worth is sharded
    grown = _resharded(signal, TEMPLATE, (small, full))
    assert grown is not None and grown > 0


def test_shot_sample_keeps_shots_scales_and_everything_outside(tmp_path):
    src = build_edge_archive(tmp_path / "edge.h5")
    inventory = read_inventory(src)
    shots = shots_of(inventory, TEMPLATE)
    assert list(shots) == ["1", "2", "3", "10"]  # natural order
    part = shot_part(inventory, shots, ["2", "10"])
    sample = write_part(src, inventory, part, tmp_path / "part.h5")
    n = assert_same_arrays(sample, src)
    got = {a.path for a in read_inventory(sample).arrays}
    assert any(p.startswith("/shots/10/") for p in got) and not any(p.startswith("/shots/3/") for p in got)
    outside = {a.path for a in inventory.arrays if not a.path.startswith("/shots/")}
    assert outside and outside <= got
    assert n == len(got) and part.scale == 2


@pytest.mark.parametrize("case", sorted(set(HARD_CASES) - {"links", "userblock"}))
def test_array_sample_of_every_hard_case_is_faithful(hard_cases, tmp_path, case):
    src = hard_cases[case]
    inventory = read_inventory(src)
    part = array_part(inventory, 1 << 40)  # everything
    assert_same_arrays(write_part(src, inventory, part, tmp_path / "all.h5"), src)
    small = array_part(inventory, 1)  # every array cut to its first row
    sample = write_part(src, inventory, small, tmp_path / "one.h5")
    assert assert_same_arrays(sample, src, dict(small.rows)) == len(inventory.arrays)
    assert all(n == 1 for _, n in small.rows)


@pytest.mark.parametrize("path", realdata_params())
def test_array_sample_of_real_files_is_faithful(path, tmp_path):
    inventory = read_inventory(path)
    part = array_part(inventory, 64 * 1024**2)
    try:
        sample = write_part(path, inventory, part, tmp_path / "part.h5")
    except LayoutkitError as exc:  # a dataset HDF5 itself cannot read: named, and truly unreadable
        unreadable = re.search(r"Dataset '([^']+)'", str(exc)).group(1)
        with h5py.File(path) as f, pytest.raises(OSError):
            f[unreadable][()]
        return
    assert_same_arrays(sample, path, dict(part.rows))


def test_a_big_array_is_cut_along_its_shared_dimension_with_chunks_copied_as_stored(tmp_path):
    src = tmp_path / "climate.h5"
    with h5py.File(src, "w") as f:
        time = f.create_dataset("time", data=np.arange(1000.0), chunks=(100,))
        time.make_scale("time")
        temp = f.create_dataset("temp", data=np.random.default_rng(0).normal(size=(1000, 8)), chunks=(64, 8),
                                compression="gzip", shuffle=True, maxshape=(None, 8), fillvalue=-1.0)
        temp.dims[0].attach_scale(time)
        plain = f.create_dataset("plain", data=np.arange(1000, dtype="i4"))  # contiguous
        plain.dims[0].attach_scale(time)
        f.create_dataset("table", data=np.arange(20.0).reshape(4, 5))  # a dimension of its own
    inventory = read_inventory(src)
    part = array_part(inventory, sum(a.storage_bytes for a in inventory.arrays) // 4)
    rows = dict(part.rows)
    assert rows["/time"] == rows["/temp"] == rows["/plain"] and 200 <= rows["/time"] <= 300  # one cut for "time"
    sample = write_part(src, inventory, part, tmp_path / "part.h5")
    assert_same_arrays(sample, src, rows)
    with h5py.File(sample) as s, h5py.File(src) as f:
        assert s["temp"].maxshape == (None, 8) and s["temp"].dims[0][0].name == "/time"
        for offset in ((0, 0), (128, 0)):
            assert s["temp"].id.read_direct_chunk(offset) == f["temp"].id.read_direct_chunk(offset)
        assert s["temp"].id.get_num_chunks() == -(-rows["/temp"] // 64)


# -- the cost model -----------------------------------------------------------------------


def obs(scale, requests, nbytes, seconds, cpu=0.0):
    return Observation(scale, requests, nbytes, seconds, cpu)


def test_counts_extend_along_the_samples_never_falling():
    small, large = obs(4, 40, 4e6, 0.1), obs(8, 80, 8e6, 0.2)
    assert full_counts(small, large, 100, "signal") == (1000, 100e6)
    assert full_counts(obs(4, 50, 4e6, 0), obs(8, 40, 8e6, 0), 100, "scan")[0] == 40
    # a fixed-size read grows with log(size): 40 more per doubling
    assert full_counts(small, large, 32, "shot")[0] == pytest.approx(80 + 2 * 40)
    assert full_counts(small, obs(8, 40, 8e6, 0.1), 1000, "subset")[0] == 40


def test_local_time_grows_by_opening_and_per_request():
    small, large = obs(4, 30, 3e6, 0.30), obs(8, 40, 3.3e6, 0.40)
    open_small, open_large = obs(4, 2, 1000, 0.10), obs(8, 2, 2000, 0.12)
    requests = 40 + 10 * 25
    got = local_seconds(small, large, 108, requests, 3.3e6, open_small, open_large)
    opening = 0.12 + 100 * 0.005  # the open line: 0.02 s per 4 shots
    per_request = min((0.28 - 0.20) / 10, 0.28 / 40)  # reads: 0.20 s at 30 requests, 0.28 s at 40
    assert got == pytest.approx(opening + 0.28 + per_request * 250)
    assert local_seconds(small, large, 8, 40, 3.3e6) == pytest.approx(0.40)  # at the larger sample's size: as measured


def test_local_time_grows_with_bytes_when_requests_stay():
    # a signal-major signal read: the same 8 requests, each object holding more shots as the archive grows
    small, large = obs(7, 8, 7e6, 0.024), obs(13, 8, 13e6, 0.035)
    per_byte = min((0.035 - 0.024) / 6e6, 0.035 / 13e6)
    assert local_seconds(small, large, 40, 8, 40e6) == pytest.approx(0.035 + per_byte * 27e6)
    # the same medians from runs whose ranges overlap: noise, not growth; the bytes add nothing
    noisy_small = Observation(7, 8, 7e6, 0.024, 0.0, 0.020, 0.036)
    noisy_large = Observation(13, 8, 13e6, 0.035, 0.0, 0.030, 0.041)
    assert local_seconds(noisy_small, noisy_large, 40, 8, 40e6) == pytest.approx(0.035)
    apart = Observation(13, 8, 13e6, 0.035, 0.0, 0.0365, 0.041)
    assert local_seconds(noisy_small, apart, 40, 8, 40e6) == pytest.approx(0.035 + per_byte * 27e6)
    # bytes that grow less than requests: the requests' growth counts
    small, large = obs(4, 30, 3e6, 0.30), obs(8, 40, 3.3e6, 0.40)
    assert local_seconds(small, large, 108, 290, 3.4e6) == pytest.approx(0.40 + 0.01 * 250)


def test_concurrency_and_prediction_by_hand():
    large = obs(8, 100, 0, 0.5)
    c = fit_concurrency(large, 0.5 + 100 * 0.01 / 4, 0.01, 0)
    assert c == pytest.approx(4)
    p = predict(obs(4, 50, 0, 0.3), large, 16, 0.01, 0, c, pattern="signal")
    assert p.requests == 200
    # local: 0.5 s plus 100 more requests at min(0.2 s / 50, 0.5 s / 100) each
    assert p.local_seconds == pytest.approx(0.5 + 100 * 0.004)
    assert p.network_seconds == pytest.approx(200 * 0.01 / 4)
    assert fit_concurrency(large, 0.4, 0.01, 0) == 256  # no time spent waiting: the cap
    assert fit_concurrency(large, 10, 0.01, 0) == 1  # slower than sequential: at least 1
    assert weighted({"shot": 1.0, "signal": 3.0}, {"shot": 3, "signal": 1}) == pytest.approx(1.5)


# -- options and refusals -----------------------------------------------------------------


def test_parse_weights_and_budget():
    assert parse_weights("shot=0.7, signal=0.3", SHOT_ARCHIVE_PATTERNS) == {"shot": 0.7, "signal": 0.3}
    assert parse_weights("signal", SHOT_ARCHIVE_PATTERNS) == {"signal": 1.0}
    assert parse_budget("2min") == 120 and parse_budget("90s") == 90 and parse_budget("1h") == 3600
    for bad in ("shot=0", "shot=-1", "shot=x", "shot=nan", "walk=1", ""):
        with pytest.raises(InvalidOptionError):
            parse_weights(bad, SHOT_ARCHIVE_PATTERNS)
    with pytest.raises(InvalidOptionError, match="does not apply"):
        parse_weights("axis=1", SHOT_ARCHIVE_PATTERNS)
    for bad in ("0", "soon", "-3s"):
        with pytest.raises(InvalidOptionError):
            parse_budget(bad)


def test_grid_candidates_are_unique_recipes():
    recipes = candidates("recipes", TEMPLATE)
    grid = candidates("grid", TEMPLATE)
    assert [c.name for c in recipes] == [c.name for c in grid[: len(recipes)]]
    assert len(grid) > 3 * len(recipes)
    seen = [repr(sorted(c.recipe_values(TEMPLATE).items())) for c in grid]
    assert len(seen) == len(set(seen))
    knobs = {k for c in grid for k, _ in c.overrides}
    assert {"chunk_size", "shards", "compressor", "page_size", "layout"} <= knobs
    with pytest.raises(InvalidOptionError):
        candidates("all", TEMPLATE)


runner = CliRunner()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--patterns", "walk=1"], "Expected --patterns"),
        (["--patterns", "shot=0"], "positive number"),
        (["--patterns", "shot=-2,signal=1"], "positive number"),
        (["--patterns", "axis=1"], "does not apply"),
        (["--budget", "soon"], "Expected a --budget"),
        (["--budget", "0.2s"], "too small to build one candidate"),
        (["--candidates", "all"], "Expected --candidates"),
        (["--latency", "fast"], "Expected latencies"),
    ],
)
def test_bad_input_is_one_sentence_and_leaves_nothing(shot_file, tmp_path, args, message):
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    result = runner.invoke(app, ["advise", str(shot_file), "--out", str(out), "--tmpdir", str(work), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not out.exists() and not any(work.iterdir())


def test_refuses_a_source_that_is_not_hdf5_and_an_existing_out(tmp_path, shot_file):
    text = tmp_path / "notes.h5"
    text.write_text("not HDF5")
    result = runner.invoke(app, ["advise", str(text)])
    assert result.exit_code == 2 and "not an HDF5 file" in result.output
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{}")
    result = runner.invoke(app, ["advise", str(shot_file), "--out", str(out)])
    assert result.exit_code == 2 and "--overwrite" in result.output


# -- the proof on a small archive ---------------------------------------------------------


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    from layoutkit.sample import write_sample

    # 30 shots: on 10, shot-major Zarr's one concurrent batch of GETs read a signal of
    # every shot as fast as signal-major's 3 GETs (a coin toss, and one CI run lost it);
    # at 30 it takes 62 GETs, and signal-major's predicted time is 40% under it (measured)
    path = tmp_path_factory.mktemp("advise") / "shots.h5"
    write_sample(path, shots=30, signals=12, seed=3)
    return path


def run_advise(archive: Path, tmp: Path, patterns: str, repeat: int = 3, shots: int = 4,
               candidates: str = "recipes") -> tuple[dict, str, Path]:
    out, work = tmp / f"out-{patterns}", tmp / f"work-{patterns}"
    work.mkdir()
    result = runner.invoke(app, [
        "advise", str(archive), "--patterns", patterns, "--latency", "10ms", "--workers", "2",
        "--sample-shots", str(shots), "--sample", "2", "--out", str(out), "--tmpdir", str(work), "--budget", "10min",
        "--repeat", str(repeat), "--candidates", candidates,
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert not any(work.iterdir())  # nothing left behind but --out
    return json.loads((out / "results.json").read_text()), result.output, out


@pytest.mark.parametrize("patterns, orders", [
    ("signal=1", {"signal-major", "hdf5-paged by signal"}), ("shot=1", {"hdf5-paged by shot", "shot-packed"}),
])
def test_recommends_a_layout_ordered_for_the_pattern(archive, tmp_path, patterns, orders):
    # medians of 3: what the noise of a loaded machine ties is ranked by what the reads take at
    # 10 ms and 100 MB/s, counts that do not depend on the run (medians of 5 did not keep a
    # loaded run from tying six candidates and ranking 9 GETs of 48 MiB before 10 of 2.2 MiB)
    doc, output, out = run_advise(archive, tmp_path, patterns, repeat=3)
    by_name = {c["name"]: c for c in doc["candidates"]}
    assert all(c["status"] == "measured" for c in doc["candidates"]), output
    # the archive is small enough that references into it (no rewrite) may read a
    # pattern in as few requests as any copy: then the verdict says no rewrite is needed,
    # and the best rewritten layout is the one ordered for the pattern
    rewritten = [n for n in doc["ranking"] if by_name[n]["recipe"].get("layout") != "virtual"]
    if by_name[doc["recommended"]]["recipe"].get("layout") == "virtual":
        assert "no rewrite needed" in doc["rewrite"], output
    best = by_name[rewritten[0]]
    layout = best["recipe"]["layout"] + (f" by {best['recipe']['by']}" if "by" in best["recipe"] else "")
    assert layout in orders, output
    assert {c["name"] for c in doc["candidates"]} == {c.name for c in candidates("recipes", TEMPLATE)}
    assert doc["sample"] == {"small": 2.0, "large": 4.0, "full": 30.0, "reads_per_pattern": 1}
    # the shot or signal read is the one of typical size among the smaller sample's
    pattern = patterns.split("=")[0]
    sizes = read_sizes(read_inventory(archive), TEMPLATE)
    mean = sum(sizes[pattern].values()) / len(sizes[pattern])
    (item,) = doc["read_items"][pattern]
    with open_archive(archive, template=TEMPLATE) as source:
        names = source.shots if pattern == "shot" else source.signals
    sample_items = [n for n in names if pattern == "signal" or n in spread(names, 4)[::2]]
    assert abs(sizes[pattern][item] - mean) == min(abs(sizes[pattern][n] - mean) for n in sample_items)
    recipe = load_recipe(out / "recommended.toml")
    assert recipe.values["template"] == TEMPLATE and (out / "advise.png").stat().st_size > 0
    # the last line is the command that writes it: run it, and the layout holds the source's data
    words = shlex.split(output.strip().splitlines()[-1])
    assert words[0] == "layoutkit" and words[-2:] == ["--recipe", str(out / "recommended.toml")]
    dst = tmp_path / Path(words[3]).name
    result = runner.invoke(app, ["-q", words[1], words[2], str(dst), *words[4:]])
    assert result.exit_code == 0, result.output
    assert compare_variant(archive, dst) == []  # as printed: a virtual repository needs no icechunk: either


def test_predicted_requests_match_the_full_size_layouts(archive, tmp_path):
    # samples of 4 and 8 shots: on 2 and 4, signal-major Zarr's requests per shot read were
    # still growing (25, then 36: a tiny sample holds fewer distinct time-base series), and
    # the log line through them predicted 68 for 38 measured (+79%); on 4 and 8 it predicts
    # 80 for 76. That model miss surfaced only when timing put signal-major in the top two.
    # one run a cell: what is checked is counted (requests, bytes, sizes), not timed; and four
    # candidates, each then written at full size: a Zarr layout of each order, shot-packed and a
    # paged file (it was all eight, and the two fastest of them checked: the slowest test here,
    # and which were checked turned on timing). The virtual candidate is not held to this: its
    # samples reference the sample files advise writes, not the source, whose own layout decides
    # its requests at full size (a 2-shot read predicted 6 GETs, 4 measured; issue 66's note)
    doc, _, _ = run_advise(archive, tmp_path, "shot=1,signal=1", shots=8, repeat=1,
                           candidates="signal-major,shot-major,shot-packed,cmod-shot")
    for c in doc["candidates"]:  # a paged file's pages are counted from its geometry (pages.py), no other's
        if c["status"] == "measured":
            paged = c["command"] == "reorder"
            assert all((f["extra_pages"] is not None) == paged for f in c["patterns"].values()), c["name"]
    ranked = [c for c in doc["candidates"] if c["status"] == "measured"]
    # each at full size; the paged file's pages come from its geometry, read by one page buffer (thread
    # workers share the file), and signal-major's shot reads grow with the samples
    assert sorted(c["name"] for c in ranked) == ["cmod-shot", "shot-major", "shot-packed", "signal-major"]
    sizes = read_sizes(read_inventory(archive), TEMPLATE)
    for c in ranked:
        candidate = Candidate(c["name"], c["name"])
        dst = tmp_path / (c["name"] + (".zarr" if candidate.command == "convert" else ".h5"))
        runner.invoke(app, ["-q", candidate.command, str(archive), str(dst), "--recipe", c["name"]])
        # its size: a paged file's to the page (its data pages from its geometry, its metadata in pages of
        # its own; on the samples' sizes alone it was predicted 32 MiB for 24), the rest within 30%
        predicted, stored = c["stored_bytes_predicted"], disk_usage(dst)
        page = candidate.options(TEMPLATE).page_size if candidate.command == "reorder" else 0
        assert abs(predicted - stored) <= (page or 0.3 * stored), (c["name"], predicted, stored)
        for pattern, fit in c["patterns"].items():
            with open_archive(archive, template=TEMPLATE) as source:  # K of typical size, as advise reads
                plan = typical_plan(pattern, source, doc["sample"]["reads_per_pattern"], 0, sizes)
            page_buffer = 64 * 1024**2 if candidate.command == "reorder" else None
            cond = Condition("threads", 2, page_buffer, "warm", 0.0, 0.0)
            (r,) = measure([describe(dst, dst.name, True, TEMPLATE)], [plan], lambda _, cond=cond: [cond], 1, TEMPLATE)
            predicted = fit["predicted"]["requests"]
            assert abs(predicted - r.requests) <= 0.3 * r.requests, (c["name"], pattern, predicted, r.requests)
            if candidate.command == "convert" and pattern == "shot":  # K shots fetch what their chunks hold
                nbytes = fit["predicted"]["bytes"]
                assert abs(nbytes - r.bytes_read) <= 0.3 * r.bytes_read, (c["name"], nbytes, r.bytes_read)


def test_candidates_written_to_and_read_from_a_bucket(archive, tmp_path):
    """--target: the candidates live in a bucket (a real S3 endpoint on loopback) and
    their requests are real; the bucket is empty again afterwards."""
    import boto3

    from layoutkit.testing import S3Endpoint

    server = S3Endpoint(buckets=("scratch",))
    try:
        endpoint = server.url
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                          region_name="us-east-1")
        env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}
        out = tmp_path / "out"
        result = runner.invoke(app, [
            "advise", str(archive), "--patterns", "signal=1", "--latency", "0", "--sample-shots", "8",
            "--sample", "1", "--candidates", "signal-major,shot-major", "--target", "s3://scratch/advise",
            "--storage-option", f"endpoint_url={endpoint}", "--out", str(out), "--repeat", "1",
        ], env=env)  # fmt: skip
        assert result.exit_code == 0, result.output
        doc = json.loads((out / "results.json").read_text())
        assert [c["name"] for c in doc["candidates"]] == ["signal-major", "shot-major"]
        for c in doc["candidates"]:
            assert c["status"] == "measured" and c["stored_bytes_samples"][0] > 0
            assert c["patterns"]["signal"]["large"]["requests"] > 0
        # with no latency the two are close in time; the requests are what differs, and they are counted
        assert doc["recommended"] in ("signal-major", "shot-major")
        # a signal of 8 shots: signal-major reads its index and its time base's, then both in one
        # object each (constant in the shots); shot-major a signal and a time base per shot
        requests = {c["name"]: c["patterns"]["signal"]["large"]["requests"] for c in doc["candidates"]}
        assert requests["signal-major"] < requests["shot-major"]
        assert s3.list_objects_v2(Bucket="scratch").get("KeyCount", 0) == 0
        bad = runner.invoke(app, ["advise", str(archive), "--target", "s3://no-such-bucket/x", "--storage-option",
                                  f"endpoint_url={endpoint}", "--out", str(tmp_path / "o2")], env=env)
        assert bad.exit_code == 2 and "no-such-bucket" in bad.output and "Traceback" not in bad.output
        # the source in a bucket too: the samples are copied out of it, and the command
        # printed writes the recommended layout beside it, in its bucket
        s3.create_bucket(Bucket="archive")
        s3.upload_file(str(archive), "archive", "campaign/shots.h5")
        before = s3.head_object(Bucket="archive", Key="campaign/shots.h5")["ETag"]
        out = tmp_path / "from-bucket"
        result = runner.invoke(app, [
            "advise", "s3://archive/campaign/shots.h5", "--patterns", "signal=1", "--latency", "10ms",
            # three runs per cell, their median: one run slowed by a busy machine (the whole suite on
            # two cores) made the shot layout look faster once
            "--sample-shots", "8", "--sample", "1", "--candidates", "signal-major,shot-major", "--repeat", "3",
            "--storage-option", f"endpoint_url={endpoint}", "--storage-option", "secret_access_key=test",
            "--out", str(out),
        ], env=env)  # fmt: skip
        assert result.exit_code == 0, result.output
        doc = json.loads((out / "results.json").read_text())
        assert doc["source"] == "s3://archive/campaign/shots.h5" and doc["recommended"] == "signal-major"
        command = " ".join(result.output.split()).rsplit("Write it with: ", 1)[1]
        assert command.startswith("layoutkit convert s3://archive/campaign/shots.h5 "
                                  "s3://archive/campaign/shots-signal-major.zarr --recipe ")
        assert f"--storage-option endpoint_url={endpoint}" in command and "secret" not in command
        assert s3.head_object(Bucket="archive", Key="campaign/shots.h5")["ETag"] == before
        assert [o["Key"] for o in s3.list_objects_v2(Bucket="archive")["Contents"]] == ["campaign/shots.h5"]
    finally:
        server.close()



def test_a_file_that_is_not_a_shot_archive_gets_the_array_patterns(hard_cases, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["advise", str(hard_cases["netcdf4"]), "--out", str(out), "--latency", "10ms",
                                 "--repeat", "1", "--budget", "5min"])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["unit"] == "bytes" and doc["weights"] == {"scan": 1.0, "subset": 1.0}
    status = {c["name"]: c["status"] for c in doc["candidates"]}
    assert {n for n, s in status.items() if s == "measured"} == {"cloud-netcdf", "local-fast", "shot-major", "virtual"}
    assert all(s == "not applicable" for n, s in status.items() if n in ("cmod-shot", "signal-major", "shot-packed"))
    assert "order)" not in result.output and load_recipe(out / "recommended.toml").target == "zarr"


def test_samples_that_show_no_growth_are_flagged():
    """A read that grows with the archive, with the same requests and bytes on both
    samples (a paged file's pages hold both), is predicted flat: the table marks it and
    results.json says so; a fixed-size read, or counts that differ, are not marked."""
    from rich.console import Console

    from layoutkit.advise.model import Prediction, samples_alike
    from layoutkit.advise.run import AdviseOptions, AdviseResult, PatternFit, Trial, to_json
    from layoutkit.cli.advise import advice_table

    alike_small, alike_large = obs(7, 14, 50e6, 0.1), obs(13, 14, 50e6, 0.16)
    assert samples_alike(alike_small, alike_large, "signal")
    assert not samples_alike(alike_small, alike_large, "shot")  # a fixed-size read may well stay
    assert not samples_alike(alike_small, obs(13, 15, 58e6, 0.16), "signal")
    pred = Prediction(14, 50e6, 0.16, 0.14, 0.1, 1.0)

    def trial(name, small, large):  # noqa: ANN001, ANN202
        t = Trial(name, "reorder", {"by": "signal"}, patterns={"signal": PatternFit(small, large, 0.2, 0.3, pred)})
        t.weighted_seconds = pred.seconds
        return t

    result = AdviseResult("shots.h5", AdviseOptions(), {"signal": 1.0}, "shots", (7, 13, 40), 3,
                          [trial("flat", alike_small, alike_large), trial("grows", alike_small, obs(13, 19, 92e6, 0.2))],
                          1.0)
    console = Console(width=250, record=True)
    console.print(advice_table(result))
    text = console.export_text()
    # the flat prediction (with its uncertainty) and the caption's footnote
    assert re.search(r"0\.3 ± [0-9.e+-]+\*", text) and text.count("*") == 2, text
    assert "the time may be low" in text
    flags = {c["name"]: c["patterns"]["signal"]["samples_alike"] for c in to_json(result)["candidates"]}
    assert flags == {"flat": True, "grows": False}


def test_advise_weighs_not_rewriting_at_all(tmp_path):
    """The virtual layout is a candidate like the others (written from the samples as an
    Icechunk repository, proven equal, measured), and the verdict says whether a rewrite
    pays, from the same predictions the table shows."""
    from layoutkit.sample import write_sample

    src = write_sample(tmp_path / "shots.h5", shots=4, signals=6, seed=2).path
    out = tmp_path / "advice"
    # named, so that a slow machine's budget cannot stop before the virtual candidate (for
    # shot=1,signal=1 the cheap model orders it last of the recipes)
    result = runner.invoke(app, ["advise", str(src), "--patterns", "shot=1,signal=1", "--budget", "2min",
                                 "--candidates", "shot-packed,signal-major,virtual", "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    trials = {t["name"]: t for t in doc["candidates"]}
    assert set(trials) == {"shot-packed", "signal-major", "virtual"}
    assert trials["virtual"]["status"] == "measured", trials["virtual"]
    assert 0 < trials["virtual"]["stored_bytes_samples"][1] < min(t["stored_bytes_samples"][1] for n, t in trials.items()
                                                          if n != "virtual" and t["status"] == "measured")
    measured = [t for t in trials.values() if t["status"] == "measured"]
    for t in measured:  # the seconds to build it, measured on both samples, extended to the whole source
        assert 0 < t["build_seconds_samples"][0] and 0 < t["build_seconds_samples"][1] <= t["build_seconds_predicted"]
    verdict = doc["rewrite"]
    said = " ".join(result.output.split())
    assert verdict and verdict in said
    assert ("no rewrite needed" in verdict) != (": rewrite (" in verdict)
    assert "(building it: about" in verdict and "to rewrite)" in verdict
    assert " build " in said or "│ build" in result.output


def test_candidates_within_the_uncertainty_are_ranked_by_what_their_requests_and_bytes_take():
    """The finding of #51: shot-major 0.0863 s and 76 GETs against signal-major 0.0913 s,
    27 GETs and 35% smaller, inside the noise: signal-major first, and the text says why.
    Apart by more than the uncertainty, time decides."""
    from layoutkit.advise.model import Prediction
    from layoutkit.advise.run import RUN_NOISE, AdviseOptions, AdviseResult, PatternFit, Trial

    def trial(name: str, seconds: float, spread: float, requests: float, nbytes: float, read: float = 1e6) -> Trial:
        obs = Observation(10, requests, read, 0.05, 0.01, 0.05 * (1 - spread / 2), 0.05 * (1 + spread / 2))
        fit = PatternFit(obs, obs, 0.05, 0.05, Prediction(requests, read, seconds, 0.0, 0.01, 1.0))
        return Trial(name, "convert", {}, patterns={"signal": fit}, predicted_bytes=nbytes, weighted_seconds=seconds,
                     weighted_uncertainty=fit.uncertainty, weighted_requests=requests, weighted_bytes_read=read)

    def result(*trials: Trial) -> AdviseResult:
        return AdviseResult("shots.h5", AdviseOptions(), {"signal": 1.0}, "shots", (6, 12, 12), 3, list(trials), 1.0)

    shot_major = trial("shot-major", 0.0863, 0.15, 76, 3.0e6)
    signal_major = trial("signal-major", 0.0913, 0.15, 27, 1.95e6)
    tied = result(shot_major, signal_major)
    assert [t.name for t in tied.ranked] == ["signal-major", "shot-major"]
    assert abs(shot_major.weighted_uncertainty - 0.0863 * 0.15) < 1e-9
    note = tied.tie_note()
    assert note and ("ranked by what their requests and bytes read take at 10 ms a request and 100 MB/s, then by "
                     "requests, then by bytes stored") in " ".join(note.split()), note
    assert "signal-major (27 weighted GETs reading 976.6 KiB, 1.9 MiB stored)" in " ".join(note.split()), note
    # CI's run of test_recommends_a_layout_ordered_for_the_pattern (signal=1, 10 ms): six candidates
    # tied, and cmod-shot's 9 GETs reading 48 MiB came before signal-major's 10 reading 2.2 MiB
    cmod_shot = trial("cmod-shot", 0.185, 1.6, 9, 48e6, read=48e6)
    signal_major = trial("signal-major", 0.0566, 1.6, 10, 31.8e6, read=2.2e6)
    virtual = trial("virtual", 0.121, 0.8, 2, 0.3e6, read=53.3e6)
    ci = result(cmod_shot, signal_major, virtual)
    assert len(ci.tied) == 3 and [t.name for t in ci.ranked] == ["signal-major", "virtual", "cmod-shot"]
    assert abs(ci.transfer_seconds(cmod_shot) - (9 * 0.010 + 48e6 / 100e6)) < 1e-9
    wider = AdviseResult("shots.h5", AdviseOptions(latency=0.1, bandwidth=1e9), {"signal": 1.0}, "shots", (6, 12, 12),
                         3, [cmod_shot, signal_major, virtual], 1.0)
    assert [t.name for t in wider.ranked] == ["virtual", "cmod-shot", "signal-major"]  # at 100 ms, GETs decide
    # every number the sentence gives a candidate is in that candidate's row of the table (issue 66:
    # "cmod-shot (6 GETs...) before cmod-signal (7 GETs...)", numbers that appeared nowhere in it)
    from rich.console import Console

    from layoutkit.cli.advise import advice_table

    console = Console(width=400, record=True)
    console.print(advice_table(tied))
    rows = {line.split("│")[2].strip(): [c.strip() for c in line.split("│")] for line in console.export_text().splitlines()
            if line.count("│") > 5}
    said = re.findall(r"(\S+) \(([\d,]+) weighted GETs reading ([\d.]+ \S+), ([\d.]+ \S+) stored\)", note)
    times = dict(re.findall(r"([\w.-]+) ([\d.]+ ± [\d.e-]+) s\b", note))
    assert len(said) == 2 and len(times) == 2, note
    for name, gets, read, stored in said:
        assert {gets, read, stored, times[name]} <= set(rows[name]), (name, rows[name], note)
    apart = result(trial("shot-major", 0.0863, 0.02, 76, 3.0e6), trial("signal-major", 0.1013, 0.02, 27, 1.95e6))
    assert [t.name for t in apart.ranked] == ["shot-major", "signal-major"] and apart.tie_note() is None
    # a few percent apart is the noise between runs, however tight each run's own spread (two runs
    # of one advise put cmod-signal first by 0.210 against 0.218 s, a third signal-major): counts decide
    close = result(trial("cmod-signal", 0.210, 0.01, 30, 40e6, read=8e6), trial("signal-major", 0.218, 0.01, 10, 30e6, read=2e6))
    assert close.tied and [t.name for t in close.ranked] == ["signal-major", "cmod-signal"]
    assert abs(close.trials[0].weighted_uncertainty - 0.210 * RUN_NOISE) < 1e-9
    same_requests = result(trial("a", 0.0863, 0.15, 27, 3.0e6), trial("b", 0.0900, 0.15, 27, 1.0e6))
    assert same_requests.recommended.name == "b"  # then fewer bytes stored
    # CI's finding: paged by shot and signal-major both 10 GETs for a signal, the paged
    # file reading its whole 8 MiB pages (50 MB) against 2.3 MB: bytes read before stored
    pages = result(trial("cmod-shot", 0.123, 0.7, 10, 16.8e6, read=50.3e6),
                   trial("signal-major", 0.0427, 0.9, 10, 33.3e6, read=2.3e6))
    assert [t.name for t in pages.ranked] == ["signal-major", "cmod-shot"]


def test_the_verdict_agrees_with_the_ranking_inside_the_uncertainty():
    """The demo's finding: virtual 0.0795 ± 0.03 s and 8 GETs ranked first among layouts
    it cannot be told from (the fastest 0.0634 ± 0.04 s), while the verdict compared the
    bare times (1.2x) and said "rewrite". Inside the uncertainty it says no rewrite is
    needed; apart by more than it, the rewrite still wins."""
    from layoutkit.advise.model import Prediction
    from layoutkit.advise.run import AdviseOptions, AdviseResult, PatternFit, Trial, rewrite_verdict

    def trial(name: str, seconds: float, spread: float, requests: float) -> Trial:
        obs = Observation(10, requests, 1e6, 0.05, 0.01, seconds * (1 - spread / 2), seconds * (1 + spread / 2))
        fit = PatternFit(obs, obs, 0.05, 0.05, Prediction(requests, 1e6, seconds, 0.0, 0.01, 1.0))
        return Trial(name, "convert", {"layout": name}, patterns={"shot": fit}, predicted_bytes=1e6,
                     weighted_seconds=seconds, weighted_uncertainty=seconds * spread, weighted_requests=requests)

    def result(*trials: Trial) -> AdviseResult:
        return AdviseResult("shots.h5", AdviseOptions(), {"shot": 1.0}, "shots", (6, 12, 12), 3, list(trials), 1.0)

    tied = result(trial("virtual", 0.0795, 0.4, 8), trial("shot-packed", 0.0656, 0.6, 18),
                  trial("shot-major", 0.0634, 0.6, 97))
    assert tied.recommended.name == "virtual"
    verdict = rewrite_verdict(tied)
    assert verdict and "no rewrite needed" in verdict and "shot-major" in verdict and "1.3x" in verdict
    apart = result(trial("virtual", 0.0795, 0.05, 8), trial("shot-packed", 0.0656, 0.05, 18))
    assert apart.recommended.name == "shot-packed"
    assert ": rewrite" in (rewrite_verdict(apart) or "")
    # tied, but ranked below a rewrite for its requests (advise on 12 shots, signal=1: "no rewrite
    # needed" above "recommended: signal-major"): the verdict says what the recommendation gains
    below = result(trial("signal-major", 0.178, 0.5, 29), trial("virtual", 0.159, 0.3, 66))
    assert below.recommended.name == "signal-major"
    verdict = rewrite_verdict(below) or ""
    assert "no rewrite needed" not in verdict and "as fast as signal-major" in verdict and "66 weighted GETs to its 29" in verdict, verdict
    assert verdict.endswith("for fewer requests (what a bucket bills): rewrite.")


def test_the_likeliest_candidates_are_tried_first_and_three_runs_give_one_answer(tmp_path):
    """With a budget that lets only some candidates through, advise tries those its cheap
    model (what each layout puts together) makes likeliest to win the patterns asked, in
    that order, so every run tries the same ones as far as its budget goes (a 12-shot
    archive, signal=1, 10 ms: it recommended shot-major in two runs of three and a
    signal-ordered layout in the third, having tried 3 of 8 candidates, a different 3
    each time; issue 66). And with the four likeliest, each run trying all four, it
    recommends the same layout three times over at 100 ms a request: what the noise of
    a run ties is ranked by counts, which do not change between runs
    (``AdviseResult.ranked``). Not at 10 ms: there the four take 0.210-0.225 s by their
    counts, a toss-up, and on the suite's loaded machine runs recommended signal-major
    and cmod-signal in turn; nor with a budget that cuts: a run that fits one candidate
    fewer than the next may miss the one that wins (both seen here, issue 66's note)."""
    from layoutkit.advise.candidates import likeliest_first
    from layoutkit.sample import write_sample

    src = tmp_path / "s.h5"
    write_sample(src, shots=12, signals=10, seed=2)
    found = candidates("recipes", TEMPLATE)
    order = [c.name for c in likeliest_first(found, {"signal": 1.0}, TEMPLATE)]
    assert order[:2] == ["signal-major", "cmod-signal"]  # a signal of every shot in one series, or in adjacent pages
    assert [c.name for c in likeliest_first(found, {"shot": 1.0}, TEMPLATE)][:2] == ["shot-packed", "cmod-shot"]
    out = tmp_path / "out"
    result = runner.invoke(app, ["advise", str(src), "--patterns", "signal=1", "--latency", "10ms",
                                 "--sample-shots", "2", "--repeat", "1", "--budget", "25s", "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    tried = [c["name"] for c in doc["candidates"]]
    assert tried == order[: len(tried)] and len(tried) >= 2, (tried, order)
    assert doc["recommended"] in tried
    answers = []
    for run in range(3):
        out = tmp_path / f"out{run}"
        result = runner.invoke(app, ["advise", str(src), "--patterns", "signal=1", "--latency", "100ms",
                                     "--sample-shots", "2", "--repeat", "1", "--candidates", ",".join(order[:4]),
                                     "--out", str(out)])
        assert result.exit_code == 0, result.output
        doc = json.loads((out / "results.json").read_text())
        assert [c["name"] for c in doc["candidates"] if c["status"] == "measured"] == order[:4]
        answers.append(doc["recommended"])
    assert len(set(answers)) == 1, answers
