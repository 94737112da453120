"""``advise --workload`` (issue 67): a traced program's reads made on every candidate,
each sample making the reads that stand for them there, predicted at full size, and the
reads that cost each candidate the most named."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from layoutkit.advise.subset import array_part, shot_part, shots_of, spread, write_part
from layoutkit.advise.workload import resembles, sample_workload
from layoutkit.cli import app
from layoutkit.hdf5.inventory import read_inventory
from layoutkit.templates import match_template, natural_key

TEMPLATE = "/shots/{shot}/signals/{signal}"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "three_signals.py"
runner = CliRunner()


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A 16-shot archive and two samples of it as advise writes them: 4 and 8 shots spread
    over the archive, the smaller inside the larger."""
    from layoutkit.sample import write_sample

    work = tmp_path_factory.mktemp("workload")
    src = work / "shots.h5"
    write_sample(src, shots=16, signals=12, seed=7)
    inventory = read_inventory(src)
    shots = shots_of(inventory, TEMPLATE)
    large = spread(list(shots), 8)
    paths = [write_part(src, inventory, shot_part(inventory, shots, chosen), work / f"sample-{len(chosen)}.h5")
             for chosen in (large[::2], large)]
    return src, paths[0], paths[1]


def shapes(path: Path) -> dict[str, tuple[int, ...]]:
    return {a.path: a.shape for a in read_inventory(path).arrays}


def whole(path: str, shape: tuple[int, ...]) -> tuple[str, tuple[slice, ...]]:
    return path, tuple(slice(0, n, 1) for n in shape)


def test_three_signals_of_every_shot_read_the_same_share_of_each_sample(archive) -> None:
    """Reads of every shot stand for a share of the archive: each sample makes them on the
    same share of its own shots (4 of 4, 8 of 8), in the workload's order, on arrays of
    the sample, and the workload grows with the archive, like the signal pattern."""
    src, small, large = archive
    source = shapes(src)
    matched = match_template(list(source), TEMPLATE)
    by_shot = sorted({shot for shot, _ in matched.values()}, key=natural_key)
    every = set.intersection(*({n for p, (s, n) in matched.items() if s == shot} for shot in by_shot))
    signals = sorted(every)[:3]  # signals every shot holds (the sample gives shots different sets)
    assert len(signals) == 3
    items = [whole(p, source[p]) for shot in by_shot for p, (s, n) in matched.items() if s == shot and n in signals]
    sampled = sample_workload(items, source, (small, large), TEMPLATE, shot_archive=True, threads=1)
    assert sampled.grows and sampled.like == "signal" and sampled.shots == 16 and sampled.dropped == 0
    assert resembles(items, source, TEMPLATE) == "signal"
    for sample, made, count in ((small, sampled.small, 4), (large, sampled.large, 8)):
        here = shapes(sample)
        at = match_template([p for p, _ in made], TEMPLATE)
        assert all(p in here for p, _ in made)
        assert len({at[p][0] for p, _ in made}) == count and len(made) == 3 * count
        # a walk by shot stays a walk by shot: the stand-ins come in the sample's order
        walked = list(dict.fromkeys(at[p][0] for p, _ in made))
        assert walked == sorted(walked, key=natural_key)
        assert {at[p][1] for p, _ in made} == set(signals)
        assert all(sel == tuple(slice(0, n, 1) for n in here[p]) for p, sel in made)  # whole, as read


def test_reads_of_a_few_shots_are_the_same_reads_on_both_samples(archive) -> None:
    """Every signal of two shots is a fixed amount: both samples make all of it on the same
    two stand-in shots (of the smaller sample, which the larger holds), like the shot
    pattern; a selection past a stand-in's end is clipped to it."""
    src, small, large = archive
    source = shapes(src)
    matched = match_template(list(source), TEMPLATE)
    shots = sorted({shot for shot, _ in matched.values()}, key=natural_key)
    chosen = [shots[3], shots[11]]
    items = [whole(p, source[p]) for p, (s, _) in matched.items() if s in chosen]
    first = items[0][0]
    items.append((first, (slice(10**9, 10**9 + 5, 1),)))  # past any signal's end
    sampled = sample_workload(items, source, (small, large), TEMPLATE, shot_archive=True)
    assert not sampled.grows and sampled.like == "shot" and sampled.shots == 2
    assert sampled.small == sampled.large and len(sampled.large) == len(items) - sampled.dropped
    at = match_template([p for p, _ in sampled.large], TEMPLATE)
    small_shots = {shot for shot, _ in match_template(list(shapes(small)), TEMPLATE).values()}
    assert len({at[p][0] for p, _ in sampled.large}) == 2 and {at[p][0] for p, _ in sampled.large} <= small_shots
    here = shapes(large)
    path, (clipped,) = sampled.large[-1]
    assert clipped.stop == here[path][0] and clipped.start == here[path][0] - 1


def test_a_time_series_grows_with_a_cut_file_and_a_map_does_not(tmp_path: Path) -> None:
    """Another kind of file, cut along its first axis: the series at one point reads every
    row each sample kept, the map at one time one row: together they grow."""
    src = tmp_path / "era5.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("t2m", data=np.random.default_rng(0).random((400, 20, 30)), chunks=(10, 20, 30))
    inventory = read_inventory(src)
    small, large = (write_part(src, inventory, array_part(inventory, n), tmp_path / f"s{n}.h5")
                    for n in (400 * 600 * 8 // 4, 400 * 600 * 8 // 2))
    rows = {p: shapes(s)["/t2m"][0] for p, s in (("small", small), ("large", large))}
    assert rows["small"] < rows["large"] < 400
    series = ("/t2m", (slice(0, 400, 1), slice(5, 6, 1), slice(7, 8, 1)))
    one_map = ("/t2m", (slice(399, 400, 1), slice(0, 20, 1), slice(0, 30, 1)))
    sampled = sample_workload([series, one_map], shapes(src), (small, large), TEMPLATE, shot_archive=False)
    assert sampled.grows and sampled.like is None and sampled.shots == 0
    for made, kept in ((sampled.small, rows["small"]), (sampled.large, rows["large"])):
        (_, (time, *_)), (_, (when, *rest)) = made
        assert (time.start, time.stop) == (0, kept)
        assert when.stop - when.start == 1 and when.stop <= kept and rest == [slice(0, 20, 1), slice(0, 30, 1)]
    sampled = sample_workload([one_map], shapes(src), (small, large), TEMPLATE, shot_archive=False)
    assert not sampled.grows


@pytest.mark.parametrize("patterns", ["", "shot=1"])
def test_advise_ranks_candidates_by_a_traced_script(archive, tmp_path: Path, patterns: str) -> None:
    """The example analysis (three signals of every shot, h5py) traced, then advised on:
    the workload is a pattern of every candidate's prediction, alone or weighed beside
    the standard ones; the paged file ordered by signal reads it in the fewest requests,
    a paged file is recommended for it alone (which of the two is timing: a loaded run
    once put cmod-shot first), shot-major last; the costliest reads of each candidate are
    its signals, on the command line and in results.json."""
    src = archive[0]
    trace = tmp_path / "w.json"
    done = subprocess.run([sys.executable, "-m", "layoutkit", "-q", "trace", "--out", str(trace), "--",
                           sys.executable, str(EXAMPLE), str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "advice"
    args = ["advise", str(src), "--workload", str(trace), "--latency", "10ms", "--sample-shots", "8", "--sample", "2",
            "--repeat", "1", "--budget", "10min", "--out", str(out), "--candidates", "cmod-signal,cmod-shot,shot-major"]
    result = runner.invoke(app, [*args, *(["--patterns", patterns] if patterns else [])])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["weights"] == ({"workload": 1.0} if not patterns else {"shot": 1.0, "workload": 1.0})
    reads = json.loads(trace.read_text())["reads"]
    assert doc["workload"]["reads"] == len(reads) and doc["workload"]["grows"] and doc["workload"]["threads"] == 1
    assert doc["workload"]["shots"] == 16 and doc["workload"]["like"] == "signal"
    by_name = {c["name"]: c for c in doc["candidates"]}
    assert all(c["status"] == "measured" and "workload" in c["patterns"] for c in by_name.values()), result.output
    signals = {r["array"].rsplit("/", 1)[1] for r in reads}
    said = " ".join(result.output.split())
    for name, c in by_name.items():
        assert {w["reads_of"] for w in c["workload_costs"]} == signals
        assert f"{name}: the costliest reads" in said
        predicted = c["patterns"]["workload"]["predicted"]
        large = c["patterns"]["workload"]["large"]
        assert predicted["requests"] >= large["requests"] > 0 and math.isfinite(predicted["seconds"])
    requests = {n: c["patterns"]["workload"]["predicted"]["requests"] for n, c in by_name.items()}
    assert min(requests, key=requests.get) == "cmod-signal", requests
    if not patterns:  # the paged files read it from a few pages, shot-major a request a read (10 ms each)
        assert doc["recommended"] in ("cmod-signal", "cmod-shot") and doc["ranking"][-1] == "shot-major", result.output
    assert f"workload: {len(reads)} reads (16 shots of 16, growing with the archive)" in said


def test_advise_on_one_month_takes_that_month_s_reads_of_a_traced_climate_analysis(tmp_path: Path) -> None:
    """The ERA5-like analysis (xarray and dask over monthly files: a point through the
    months, then January's map) traced, then advised on January alone: the workload is
    January's reads (the program read February too), replayed on as many threads as dask
    read with, on candidates for a file that is not a shot archive."""
    from conftest import era5_files

    from layoutkit.trace.workload import load

    files = era5_files(tmp_path / "era5", 2)
    trace = tmp_path / "w.json"
    done = subprocess.run([sys.executable, "-m", "layoutkit", "-q", "trace", "--out", str(trace), "--", sys.executable,
                           str(EXAMPLE.parent / "era5_point_and_map.py"), *map(str, files)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    workload = load(trace)
    january = sum(r.count for r in workload.reads if r.source == str(files[0]))
    assert 0 < january < sum(r.count for r in workload.reads)
    out = tmp_path / "advice"
    result = runner.invoke(app, ["advise", str(files[0]), "--workload", str(trace), "--repeat", "1", "--budget", "10min",
                                 "--out", str(out), "--candidates", "shot-major,local-fast"])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["unit"] == "bytes" and doc["weights"] == {"workload": 1.0}
    assert doc["workload"]["reads"] == january and doc["workload"]["shots"] == 0 and doc["workload"]["like"] is None
    assert doc["workload"]["threads"] == workload.threads > 1  # dask's threads
    assert all(c["status"] == "measured" and c["patterns"]["workload"]["large"]["requests"] > 0 for c in doc["candidates"])
    assert {w["reads_of"] for c in doc["candidates"] for w in c["workload_costs"]} >= {"/t2m"}


def test_a_workload_pattern_without_a_workload_is_one_sentence(archive, tmp_path: Path) -> None:
    result = runner.invoke(app, ["advise", str(archive[0]), "--patterns", "workload=1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "give them with --workload FILE" in " ".join(result.output.split())
    missing = runner.invoke(app, ["advise", str(archive[0]), "--workload", str(tmp_path / "none.json"),
                                  "--out", str(tmp_path / "o")])
    assert missing.exit_code == 2 and "is not a workload file" in " ".join(missing.output.split())
    assert not (tmp_path / "o").exists()
