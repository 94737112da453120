"""`layoutkit verify`: equality is proven or the difference named (exit 1), bad input
is refused (exit 2), and the read patterns count what they read."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr
from typer.testing import CliRunner

from layoutkit.archive import open_archive
from layoutkit.cli import app
from layoutkit.errors import InvalidOptionError
from layoutkit.options import parse_bandwidths, parse_counts, parse_durations
from layoutkit.storage.counting import LatencyModel
from layoutkit.verify.patterns import ReadPlan, plan_reads, run_reads, split
from layoutkit.verify.run import (
    Condition,
    conditions_for,
    evict,
    read_share,
    warm,
)

runner = CliRunner()
FAST = ["--repeat", "1", "--sample", "2"]


def cli(*args: object):
    return runner.invoke(app, ["--quiet", *map(str, args)])


@pytest.fixture(scope="module")
def variants(shot_file: Path, tmp_path_factory) -> dict[str, Path]:
    """A shot archive and its three kinds of variant, written by the commands."""
    root = tmp_path_factory.mktemp("variants")
    out = {"zarr": root / "shots.zarr", "by-shot": root / "by-shot.h5", "by-signal": root / "by-signal.h5"}
    for args in (
        ("convert", shot_file, out["zarr"]),
        ("reorder", shot_file, out["by-shot"], "--by", "shot"),
        ("reorder", shot_file, out["by-signal"], "--by", "signal"),
    ):
        result = cli(*args)
        assert result.exit_code == 0, result.output
    return out


def copy_of(path: Path, tmp_path: Path) -> Path:
    import shutil

    dst = tmp_path / path.name
    (shutil.copytree if path.is_dir() else shutil.copy)(path, dst)
    return dst


def test_good_variants_are_equal_and_every_row_is_reported(shot_file, variants, tmp_path):
    out = tmp_path / "report"
    result = cli("verify", shot_file, *variants.values(), *FAST, "--page-buffer", "0,64MiB", "--out", out)
    assert result.exit_code == 0, result.output
    assert "all 3 variants hold exactly the data" in result.output
    rows = list(csv.DictReader(open(out / "results.csv")))
    patterns = ["open", "shot", "signal", "scan", "subset"]
    # the source and the Zarr store have one condition each; paged files two page buffers
    assert len(rows) == len(patterns) * (1 + 1 + 2 + 2)
    assert {r["pattern"] for r in rows} == set(patterns)
    for r in rows:
        assert int(r["requests"]) > 0 and int(r["bytes_read"]) > 0, r
        assert r["equal"] in ("True", ""), r
        assert int(r["peak_rss"]) > 10 * 2**20, r  # threads: this process's peak over the row's runs
    paged = [r for r in rows if r["variant"] == "by-shot.h5" and r["pattern"] == "shot"]
    with_pb = next(r for r in paged if r["page_buffer"] != "0")
    without = next(r for r in paged if r["page_buffer"] == "0")
    assert float(with_pb["meta_hit_rate"]) > 0.5
    assert int(with_pb["requests"]) < int(without["requests"])
    # the shot and signal patterns read the same logical bytes from every variant
    for pattern in ("shot", "signal", "subset"):
        logical = {r["logical_bytes"] for r in rows if r["pattern"] == pattern}
        assert len(logical) == 1, (pattern, logical)
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["results"]) == len(rows) and doc["mismatches"] == {}
    for png in ("time_by_pattern.png", "requests_by_pattern.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    said = " ".join(result.output.split())
    assert said.index("The answer: the fastest layout for each read") < said.index("every measurement")
    assert (out / "summary.md").read_text().count("\n| ") == 5 + 1  # the header and one row per pattern


def flip_first_chunk_zarr(store: Path, at: int | None = None) -> str:
    arr = zarr.open_group(store, mode="r")["shots"]
    shot = sorted(arr.group_keys())[0]
    chunk = next((store / "shots" / shot / "signals" / "ip" / "c").rglob("*"))
    while chunk.is_dir():
        chunk = next(chunk.iterdir())
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2 if at is None else at] ^= 0xFF
    chunk.write_bytes(bytes(data))
    return f"/shots/{shot}/signals/ip"


def test_a_flipped_byte_in_a_zarr_chunk_is_named(shot_file, tmp_path):
    store = tmp_path / "raw.zarr"
    assert cli("convert", shot_file, store, "--compressor", "none").exit_code == 0
    path = flip_first_chunk_zarr(store)
    result = cli("verify", shot_file, store, *FAST, "--patterns", "signal")
    assert result.exit_code == 1, result.output
    assert f"{path}: values: first difference at index" in result.output.replace("\n", "")
    assert "NO" in result.output  # the measurements still ran, marked unequal


def test_a_chunk_that_no_longer_decodes_is_named(shot_file, variants, tmp_path):
    store = copy_of(variants["zarr"], tmp_path)
    path = flip_first_chunk_zarr(store, at=0)  # zstd's magic number: the frame no longer decodes
    result = cli("verify", shot_file, store, *FAST, "--patterns", "open,scan", "--out", tmp_path / "r")
    assert result.exit_code == 1, result.output
    assert f"{path}: values: cannot be read" in result.output.replace("\n", "")
    # the scan meets the broken chunk too: its row says it failed, and why
    rows = {r["pattern"]: r for r in csv.DictReader(open(tmp_path / "r" / "results.csv")) if r["variant"] == store.name}
    assert rows["scan"]["error"] and not rows["open"]["error"]
    assert "failed" in result.output


def test_a_flipped_byte_in_an_hdf5_chunk_is_named(shot_file, variants, tmp_path):
    variant = copy_of(variants["by-signal"], tmp_path)
    with h5py.File(variant, "r") as f:
        path = "/" + next(n for n in _datasets(f) if "/signals/" in n and f[n].chunks)
        info = f[path].id.get_chunk_info(0)
    with open(variant, "r+b") as fh:
        fh.seek(info.byte_offset + info.size // 2)
        b = fh.read(1)
        fh.seek(info.byte_offset + info.size // 2)
        fh.write(bytes([b[0] ^ 0xFF]))
    result = cli("verify", shot_file, variant, *FAST, "--patterns", "open")
    assert result.exit_code == 1, result.output
    assert f"{path}: values:" in result.output


def _datasets(f: h5py.File) -> list[str]:
    names: list[str] = []
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    return sorted(names)


def test_a_changed_attribute_is_named(shot_file, variants, tmp_path):
    variant = copy_of(variants["by-shot"], tmp_path)
    with h5py.File(variant, "r+") as f:
        path = "/" + next(n for n in _datasets(f) if n.endswith("/signals/ip"))
        f[path].attrs["units"] = "kA"
    result = cli("verify", shot_file, variant, *FAST, "--patterns", "open")
    assert result.exit_code == 1, result.output
    assert f"{path}: attribute: 'units'" in result.output


def test_a_missing_array_is_named(shot_file, variants, tmp_path):
    variant = copy_of(variants["by-shot"], tmp_path)
    with h5py.File(variant, "r+") as f:
        path = "/" + next(n for n in _datasets(f) if n.endswith("/signals/ne_bar"))
        del f[path]
    result = cli("verify", shot_file, variant, *FAST, "--patterns", "open")
    assert result.exit_code == 1, result.output
    assert f"{path}: missing" in result.output


def test_a_missing_zarr_array_is_named(shot_file, variants, tmp_path):
    import shutil

    store = copy_of(variants["zarr"], tmp_path)
    shot = sorted(p.name for p in (store / "shots").iterdir() if p.is_dir())[-1]
    shutil.rmtree(store / "shots" / shot / "signals" / "h_alpha")
    result = cli("verify", shot_file, store, *FAST, "--patterns", "open")
    assert result.exit_code == 1, result.output
    assert f"/shots/{shot}/signals/h_alpha: missing" in result.output


def assert_refused(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    text = result.output
    assert "Traceback" not in text and text.strip().startswith("error:"), text
    assert len(text.strip().splitlines()) <= 3, text
    for w in words:
        assert w in text.replace("\n", " "), text


@pytest.mark.parametrize(
    ("args", "words"),
    [
        pytest.param(["--workers", "0"], ["--workers", "1 or more", "'0'"], id="workers-0"),
        pytest.param(["--latency", "-1"], ["latencies of 0 or more", "'-1'"], id="latency-negative"),
        pytest.param(["--patterns", "shot,everything"], ["open, list, shot, signal, scan, subset, axis", "everything"],
                     id="pattern"),
        pytest.param(["--engine", "gpu"], ["serial, threads, processes, distributed", "gpu"], id="engine"),
        pytest.param(["--cache", "lukewarm"], ["cold, warm"], id="cache"),
        pytest.param(["--bandwidth", "fast"], ["100MB/s", "fast"], id="bandwidth"),
        pytest.param(["--page-buffer", "lots"], ["page buffer size", "lots"], id="page-buffer"),
        pytest.param(["--repeat", "0"], ["--repeat of 1 or more"], id="repeat"),
        pytest.param(["--patterns", "axis"], ["does not apply", "open, shot, signal, scan, subset"], id="axis-on-shots"),
    ],
)
def test_bad_options_are_refused_with_what_is_allowed(shot_file, variants, args, words):
    assert_refused(cli("verify", shot_file, variants["zarr"], *args), *words)


def test_bad_variants_are_refused(shot_file, variants, tmp_path, hard_cases):
    assert_refused(cli("verify", shot_file, tmp_path / "nope.zarr"), "nope.zarr", "does not exist")
    text = tmp_path / "notes.txt"
    text.write_text("not data")
    assert_refused(cli("verify", shot_file, text), "notes.txt", "not an HDF5 file or a Zarr store")
    folder = tmp_path / "folder"
    folder.mkdir()
    assert_refused(cli("verify", shot_file, folder), "not a Zarr store")
    # a variant of another file: every array missing is one clear error, not a list
    other = tmp_path / "other.zarr"
    assert cli("convert", hard_cases["dtypes"], other).exit_code == 0
    assert_refused(cli("verify", shot_file, other, *FAST), "other.zarr", "another file")


# -- the parts, by counts rather than by timing --------------------------------------


def test_request_counts_match_a_hand_count(tmp_path):
    # a Zarr store with consolidated metadata: opening reads the root document only
    # (1 request); a scan reads each of the 4 chunk objects once
    store = tmp_path / "tiny.zarr"
    root = zarr.open_group(store, mode="w")
    a = root.create_array("x", shape=(40,), chunks=(10,), dtype="i4", compressors=None)
    a[:] = np.arange(40)
    zarr.consolidate_metadata(store)
    assert read_share(str(store), "/{shot}/{signal}", "open", [None], 0, 0, 0)["requests"] == 1
    with open_archive(store) as archive:
        blocks = archive.blocks()
    assert blocks == [("/x", (slice(0, 10),)), ("/x", (slice(10, 20),)), ("/x", (slice(20, 30),)), ("/x", (slice(30, 40),))]
    out = read_share(str(store), "/{shot}/{signal}", "scan", blocks, 0, 0, 0)
    assert out["requests"] == 1 + 4
    assert out["bytes"] - read_share(str(store), "/{shot}/{signal}", "open", [None], 0, 0, 0)["bytes"] == 160
    assert out["logical"] == 160


def test_the_probe_counts_rounds_of_requests_and_the_estimate_charges_them(tmp_path, monkeypatch):
    """verify's expected duration: a probe read counts rounds (requests in flight
    together wait together), not requests, and each row is costed at its latency."""
    from layoutkit.verify import run as run_module
    from layoutkit.verify.run import PROBE_LATENCY, Variant, _union, expected_seconds, probe

    assert _union([(0, 1), (0.5, 2), (3, 4)]) == 3 and _union([]) == 0
    store = tmp_path / "tiny.zarr"
    root = zarr.open_group(store, mode="w")
    a = root.create_array("x", shape=(40,), chunks=(10,), dtype="i4", compressors=None)
    a[:] = np.arange(40)
    zarr.consolidate_metadata(store)
    v = Variant("tiny.zarr", store, "zarr", "zarr", "zarr", None)
    blocks = [("/x", (slice(i, i + 10),)) for i in range(0, 40, 10)]
    # rounds are read from the waits' wall-clock overlap: at 20 ms a wait, not the probe's 1 ms, a
    # loaded machine's scheduling (a few ms late now and then) does not blur one round into two
    monkeypatch.setattr(run_module, "PROBE_LATENCY", 0.02)
    _, one_by_one = probe(v, "scan", blocks, "/{shot}/{signal}")  # the root document, then a chunk per block
    _, together = probe(v, "subset", [("/x", (slice(0, 40),))], "/{shot}/{signal}")  # its 4 chunks in one round
    assert one_by_one >= 4 and together < one_by_one - 1.5
    _, unwaited = probe(v, "scan", blocks, "/{shot}/{signal}", False)  # no row charges latency: no waits
    assert unwaited == 0
    assert PROBE_LATENCY <= 0.002
    plan = ReadPlan("scan", tuple(blocks))

    def at(latency: float):  # noqa: ANN202
        return lambda _: [Condition("threads", 1, None, "warm", latency, 0)]

    # the arithmetic on a probe's answer, fixed (a probe's own rounds vary by a round from run to run)
    monkeypatch.setattr(run_module, "probe", lambda *_: (0.01, 5.0))
    base = expected_seconds([v], [plan], at(0), 3, "/{shot}/{signal}")  # 0.01 s a run, 3 runs
    slow = expected_seconds([v], [plan], at(0.5), 3, "/{shot}/{signal}")  # 2.51 s a run: 3 s in 2 runs
    assert base == pytest.approx(3 * 0.01) and slow == pytest.approx(2 * (0.01 + 5 * 0.5))


def test_latency_is_charged_per_request_and_byte(shot_file, variants):
    slept: list[float] = []
    model = LatencyModel(latency=0.010, bandwidth=1e6)
    for path in (variants["by-signal"], variants["zarr"]):
        slept.clear()

        async def record_async(s: float) -> None:
            slept.append(s)

        sleep = record_async if path.is_dir() else slept.append
        with open_archive(path, model=model, sleep=sleep, page_buffer=0) as archive:
            run_reads(archive, "signal", ["ip"])
            requests, nbytes = archive.counter.requests, archive.counter.bytes
        assert archive.counter.delayed == pytest.approx(requests * 0.010 + nbytes / 1e6)
        if path.is_dir():  # zarr's requests each wait in their own task: they overlap as the tasks do
            assert len(slept) == requests > 3
            assert sum(slept) == pytest.approx(requests * 0.010 + nbytes / 1e6)
        else:  # HDF5 is read in GETs of whole blocks, a round of them waited for once
            assert 1 <= len(slept) <= requests and all(s >= 0.010 for s in slept)
            assert sum(slept) <= requests * 0.010 + nbytes / 1e6 + 1e-9


def test_plans_are_the_same_for_the_same_seed_and_stay_in_bounds(shot_file):
    with open_archive(shot_file) as source:
        a = plan_reads("subset", source, 5, seed=3)
        b = plan_reads("subset", source, 5, seed=3)
        c = plan_reads("subset", source, 5, seed=4)
        shapes = source.arrays()
        shots = plan_reads("shot", source, 2, seed=0).items
        assert set(shots) <= set(source.shots) and len(shots) == 2
    assert a == b and a != c and len(a.items) == 20
    for path, sel in a.items:
        for s, n in zip(sel, shapes[path][0]):
            assert 0 <= s.start < s.stop <= n
    assert split(list(range(5)), 2) == [[0, 2, 4], [1, 3]]
    assert split([], 3) == [[]]


def test_axis_reads_a_line_along_every_axis(hard_cases):
    with open_archive(hard_cases["scales"]) as source:
        plan = plan_reads("axis", source, 10, seed=0)
        arrays = source.arrays()
    assert plan.items
    for path, sel in plan.items:
        ndim = len(arrays[path][0])
        assert ndim >= 2 and len(sel) == ndim
        assert sum(isinstance(s, slice) for s in sel) in (1, ndim - 1)


def test_conditions_collapse_where_they_do_not_apply():
    pb = (0, 64 << 20)
    assert {c.page_buffer for c in conditions_for("hdf5-paged", ["threads"], [1], pb, ["cold"], [0], [0])} == set(pb)
    assert [c.page_buffer for c in conditions_for("hdf5", ["threads"], [1], pb, ["cold"], [0], [0])] == [0]
    assert [c.page_buffer for c in conditions_for("zarr", ["threads"], [1], pb, ["cold"], [0], [0])] == [None]
    serial = conditions_for("zarr", ["serial", "threads"], [1, 2], pb, ["cold"], [0, 0.01], [0])
    assert {(c.engine, c.workers) for c in serial} == {("serial", 1), ("threads", 1), ("threads", 2)}
    assert len(serial) == 3 * 2
    assert Condition("threads", 1, None, "cold", 0.01, 0).model == LatencyModel(0.01, 0)


def test_sweep_parsers():
    assert parse_durations("0,10ms,0.5s,250us") == (0.0, 0.01, 0.5, 0.00025)
    assert parse_bandwidths("100MB/s,0") == (1e8, 0.0)
    assert parse_counts("1,2,2,4", "--workers") == (1, 2, 4)
    with pytest.raises(InvalidOptionError):
        parse_counts("1,x", "--workers")
    for bad in ("-1ms", "soon", ""):
        with pytest.raises(InvalidOptionError, match="Expected latencies of 0 or more"):
            parse_durations(bad)


def test_cache_control_runs_on_files_and_stores(variants):
    for path in variants.values():
        warm(path)
        evict(path)  # posix_fadvise(DONTNEED) on every file; must not raise


def test_processes_count_their_own_opens_and_threads_share_one(shot_file, variants, tmp_path):
    """Each worker process opens the HDF5 file itself; thread workers share one open file,
    so they read its metadata once: fewer requests for the same reads, counted in both."""
    out = {}
    for engine in ("threads", "processes"):
        result = cli(
            "verify", shot_file, variants["by-signal"], "--no-check", *FAST, "--patterns", "signal",
            "--engine", engine, "--workers", "2", "--page-buffer", "64MiB", "--out", tmp_path / engine,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        out[engine] = {(r["variant"], r["pattern"]): r["requests"] for r in csv.DictReader(open(tmp_path / engine / "results.csv"))}
    assert out["threads"].keys() == out["processes"].keys() and len(out["threads"]) == 2
    assert all(0 < int(out["threads"][k]) < int(out["processes"][k]) for k in out["threads"])


def test_distributed_runs_on_a_running_cluster(shot_file, variants, tmp_path):
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=":0") as cluster:
        result = cli(
            "verify", shot_file, variants["zarr"], "--no-check", *FAST, "--patterns", "shot",
            "--engine", "distributed", "--scheduler", cluster.scheduler_address, "--workers", "2",
            "--out", tmp_path,
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert {(r["engine"], r["workers"]) for r in rows} == {("distributed", "2")}
    assert "not checked" in result.output  # --no-check: the variant's rows do not claim equality
    assert all(int(r["requests"]) > 0 for r in rows)


# -- exit codes, failed patterns, bounded subsets ---------------------------------------------


def test_a_pattern_that_cannot_run_is_exit_3_with_its_reason(shot_file, variants, tmp_path):
    """Without the equality check nothing catches the damage first: chunks that no
    longer decode make the subset reads fail, the reason is printed under the table, and
    the exit status is 3."""
    store = copy_of(variants["zarr"], tmp_path)
    for chunk in store.rglob("c/*"):
        if chunk.is_file():
            chunk.write_bytes(b"not zstd")
    result = cli("verify", shot_file, store, "--no-check", "--repeat", "1", "--sample", "3", "--patterns", "subset")
    assert result.exit_code == 3, result.output
    reasons = [line for line in result.output.splitlines() if line.startswith("failed:")]
    assert reasons and "pattern 'subset' could not run" in reasons[0] and ":" in reasons[0].split("could not run")[1]


def test_exit_codes_are_documented_in_help():
    text = " ".join(runner.invoke(app, ["verify", "--help"]).output.split())
    for words in ("0 every variant equal and every pattern ran", "1 a variant's data differ",
                  "2 bad input", "3 a read pattern could not run"):
        assert words in text, words


def test_no_progress_is_drawn_before_the_input_is_refused(shot_file, tmp_path):
    result = runner.invoke(app, ["verify", str(shot_file), str(tmp_path / "missing.zarr")])
    assert result.exit_code == 2
    assert result.output.strip().startswith("error:") and "equality" not in result.output


def test_subset_hyperslabs_are_bounded_in_bytes(tmp_path):
    """A 2^30-element array (1 GiB, stored sparse in a few kB): every hyperslab holds at
    most SUBSET_MAX_BYTES, together at most the data, so subset never out-reads scan."""
    from layoutkit.verify.patterns import SUBSET_MAX_BYTES, bounded_extents

    path = tmp_path / "huge.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("huge", shape=(2**30,), dtype="u1", chunks=(2**20,), compression="gzip")
        f.create_dataset("plane", shape=(4096, 4096), dtype="f8", chunks=(512, 512))
        f.create_dataset("tiny", data=np.arange(6, dtype="i2"))
    with open_archive(path) as source:
        plan = plan_reads("subset", source, 10, seed=1)
        arrays = source.arrays()
    total = sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in arrays.values())
    sizes = []
    for name, sel in plan.items:
        shape, dtype = arrays[name]
        extent = [s.stop - s.start for s in sel]
        assert all(0 <= s.start < s.stop <= n for s, n in zip(sel, shape))
        sizes.append(int(np.prod(extent)) * dtype.itemsize)
    assert len(sizes) == 40 and max(sizes) <= SUBSET_MAX_BYTES and sum(sizes) <= total
    assert bounded_extents([10, 10], 8, 80) == [5, 2] or int(np.prod(bounded_extents([10, 10], 8, 80))) * 8 <= 80
    assert bounded_extents([3], 4, 1) == [1]  # one element is the least a hyperslab holds


def test_subset_skips_netcdf_dimension_only_scales(tmp_path):
    """netCDF's dimension-only scales are not data (converted stores keep them as
    dimensions only): subset never draws them, so it runs on every variant."""
    import netCDF4

    src = tmp_path / "dims.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("theta", 64)
        nc.createDimension("ky", 8)
        v = nc.createVariable("phi", "f4", ("ky", "theta"))
        v[:] = np.ones((8, 64), "f4")
    with open_archive(src) as source:
        assert "/theta" in source.arrays() and source.dimension_only("/theta")
        drawn = {p for p, _ in plan_reads("subset", source, 10, seed=0).items}
    assert drawn == {"/phi"}
    store = tmp_path / "dims.zarr"
    assert cli("convert", src, store).exit_code == 0
    result = cli("verify", src, store, *FAST, "--patterns", "subset")
    assert result.exit_code == 0, result.output


# -- the report: the answer first, plots by what varies ------------------------------------


def _result(variant, pattern, seconds, requests, latency=0.0, workers=1, page_buffer=None, error=None):
    from layoutkit.verify.run import Result

    return Result(variant=variant, format="hdf5", layout="x", pattern=pattern, engine="threads", workers=workers,
                  page_buffer=page_buffer, cache="cold", latency=latency, bandwidth=0.0, seconds=seconds,
                  seconds_min=seconds, seconds_max=seconds, repeats=1, requests=requests, bytes_read=1,
                  logical_bytes=1, mb_per_s=1.0, meta_hit_rate=None, raw_hit_rate=None, equal=True, error=error)


def test_the_answer_names_the_fastest_layout_and_what_it_beats():
    from layoutkit.verify import report

    rows = [
        _result("src.h5", "shot", 4.0, 400, latency=0.01), _result("src.h5", "shot", 0.4, 400),
        _result("paged.h5", "shot", 2.0, 300, latency=0.01, page_buffer=0),
        _result("paged.h5", "shot", 0.5, 8, latency=0.01, page_buffer=64 << 20),  # its best page buffer
        _result("paged.h5", "shot", 0.3, 300),
        _result("mirror.zarr", "shot", 8.0, 900, latency=0.01), _result("mirror.zarr", "shot", 0.2, 90),
        _result("broken.zarr", "shot", 0.01, 1, latency=0.01, error="KeyError: x"),  # failed: takes no part
    ]
    answers = {a.condition: a for a in report.answers(rows, "src.h5")}
    slow = answers["10 ms"]
    assert (slow.best, slow.seconds, slow.requests) == ("paged.h5", 0.5, 8)
    assert slow.vs_source == 8.0 and (slow.worst, slow.vs_worst, slow.worst_requests) == ("mirror.zarr", 16.0, 900)
    fast = answers["0 ms"]
    assert (fast.best, fast.vs_source, fast.worst) == ("mirror.zarr", 2.0, "src.h5")  # the source is slowest here
    md = report.answer_markdown(rows, "src.h5")
    assert "| shot | 10 ms | paged.h5 | 0.500 s | 8 | **8.0x** (source: 400 requests) | 16.0x (mirror.zarr, 900 requests) |" in md
    assert md.startswith("Conditions: engine threads, 1 worker, cold cache.")
    assert report.too_small_to_matter(rows) is None  # 0.2 s against 0.4 s: well over the noise


def test_no_variant_slower_than_the_source_is_called_fastest():
    from layoutkit.verify import report

    rows = [_result("src.h5", "signal", 0.30, 9), _result("a.zarr", "signal", 0.50, 40),
            _result("b.h5", "signal", 0.45, 12), _result("src.h5", "shot", 0.30, 9), _result("a.zarr", "shot", 0.10, 4)]
    answers = {a.pattern: a for a in report.answers(rows, "src.h5")}
    assert answers["signal"].best == "src.h5" and answers["signal"].vs_source == 1.0
    assert answers["shot"].best == "a.zarr"
    md = report.answer_markdown(rows, "src.h5")
    assert "| signal | src.h5 (the source: no variant reads it faster) |" in md


def test_an_archive_too_small_for_its_layout_to_matter_is_said_so():
    """Every layout within the noise of every other (the spread of the repeats, at least
    5 ms): the summary says the archive is too small, and from about what size a read
    would show the differences; a difference over the noise says nothing."""
    from dataclasses import replace

    from layoutkit.verify import report

    def near(variant, pattern, seconds):
        return replace(_result(variant, pattern, seconds, 10), seconds_min=seconds - 0.002, seconds_max=seconds + 0.002,
                       logical_bytes=1_000_000)

    rows = [near("src.h5", "shot", 0.010), near("a.zarr", "shot", 0.012), near("src.h5", "signal", 0.020),
            near("a.zarr", "signal", 0.021)]
    said = report.too_small_to_matter(rows)
    assert said and "too small for its layout to matter" in said
    assert "at about 2.4 MiB per read (this one reads at most 976.6 KiB)" in said, said  # 5 ms / 2 ms x 1 MB
    assert report.too_small_to_matter([*rows[:3], near("a.zarr", "signal", 0.060)]) is None


@pytest.mark.parametrize("vary, plots", [
    (None, {"time_by_pattern.png", "requests_by_pattern.png"}),
    ("workers", {"time_by_pattern.png", "requests_by_pattern.png", "time_vs_workers.png"}),
    ("latency", {"time_by_pattern.png", "requests_by_pattern.png", "time_vs_latency.png"}),
])
def test_plots_follow_what_varies(tmp_path, vary, plots):
    from layoutkit.verify import report

    values = [1, 2, 4] if vary == "workers" else ([0.0, 0.01] if vary == "latency" else [None])
    rows = []
    for v in values:
        kw = {vary: v} if vary else {}
        for k, variant in enumerate(("src.h5", "a.zarr", "b.h5")):
            rows += [_result(variant, p, 0.1 * (k + 1), 10 * (k + 1), **kw) for p in ("open", "shot", "signal")]
    made = report.plot(rows, tmp_path)
    assert {p.name for p, _ in made} == plots
    for path, caption in made:
        assert path.read_bytes()[:4] == b"\x89PNG" and caption.startswith(path.name + ": ")


def test_memory_freed_by_a_condition_goes_back_to_the_system() -> None:
    """Page buffers freed in the middle of glibc's heaps stay in the process (free() only
    returns the top); verify trims after each condition, so a sweep peaks at its largest
    cell, not their sum. Here 190 MB is freed below surviving blocks, then trimmed."""
    import subprocess
    import sys

    code = (
        "import psutil\n"
        "from layoutkit.verify.run import release_freed_memory\n"
        "big, keep = [], []\n"
        "for _ in range(3000):\n"
        "    big.append(bytearray(64 << 10))  # under the mmap threshold: from the heap\n"
        "    keep.append(bytearray(1 << 10))  # a survivor above each: free() cannot return it\n"
        "del big\n"
        "before = psutil.Process().memory_info().rss\n"
        "release_freed_memory()\n"
        "print(before - psutil.Process().memory_info().rss)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(done.stdout) > 100 * 2**20, done.stdout


def test_peak_rss_is_measured_per_row_from_a_reset():
    """verify's per-row peak RSS starts over at each row: a 200 MB array allocated and
    freed after a reset shows in the peak, and is gone from it after the next reset. In
    a process of its own: the peak is the whole process's, and a test worker's other
    threads (a pool still fetching, a kept store's client) move it by tens of MB."""
    code = (
        "import numpy as np\n"
        "from layoutkit.verify.run import peak_rss, reset_peak_rss\n"
        "assert reset_peak_rss()\n"
        "base = peak_rss()\n"
        "block = np.ones(200 * 2**20, dtype=np.uint8)  # touched: resident\n"
        "del block\n"
        "grown = peak_rss()\n"
        "assert reset_peak_rss()\n"
        "print(base, grown, peak_rss())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    base, grown, after = map(int, done.stdout.split())
    assert grown >= base + 190 * 2**20, (base, grown)
    assert after < grown - 150 * 2**20, (grown, after)


def test_measure_warms_up_untimed_and_repeats_short_rows_to_a_time_floor(shot_file, monkeypatch):
    """``warmup`` runs are not timed; ``min_seconds`` repeats a short row past ``repeat``,
    at most MAX_REPEAT_FACTOR x ``repeat`` times; a long row stops at ``repeat``."""
    from types import SimpleNamespace

    from layoutkit.verify import run as vrun

    calls: list[float] = []
    clock = [0.0]  # the wall clock the rows are timed by: a stall of this machine cannot move it

    def fake_share(*args):  # noqa: ANN002, ANN202 - stands in for read_share
        delay = 0.05 if not calls else 0.01  # the first call (the warm-up) is slow
        calls.append(delay)
        clock[0] += delay
        return {"logical": 1, "requests": 1, "bytes": 1, "page_buffer": None, "error": None}

    monkeypatch.setattr(vrun, "read_share", fake_share)
    monkeypatch.setattr(vrun, "time", SimpleNamespace(perf_counter=lambda: clock[0], process_time=time.process_time))
    variant = vrun.describe(shot_file, "src", True, "/shots/{shot}/signals/{signal}")
    plan = ReadPlan("shot", ("1",))
    cond = Condition("serial", 1, None, "warm", 0.0, 0.0)
    (row,) = vrun.measure([variant], [plan], lambda _: [cond], 2, warmup=1, min_seconds=10.0)
    assert len(calls) == 1 + 2 * vrun.MAX_REPEAT_FACTOR  # capped, not 10 s of runs
    assert row.repeats == 2 * vrun.MAX_REPEAT_FACTOR
    assert row.seconds_max == pytest.approx(0.01)  # the slow warm-up is not among the timed runs
    calls.clear()
    (row,) = vrun.measure([variant], [plan], lambda _: [cond], 3, min_seconds=0.001)
    assert row.repeats == 3 and len(calls) == 3


def test_measure_interleaved_times_rows_in_turn_until_each_has_its_floor(shot_file, tmp_path, monkeypatch):
    """``interleave=True``: every row is warmed up, then the rows run one repetition each
    per round; a row with ``repeat`` runs adding up to ``min_seconds`` sits the later
    rounds out. Each row keeps its own times, counts and CPU seconds."""
    import shutil
    from types import SimpleNamespace

    from layoutkit.verify import run as vrun

    slow = tmp_path / "slow.h5"
    shutil.copyfile(shot_file, slow)
    calls: list[str] = []
    clock = [0.0]  # the wall clock the rows are timed by: a stall of this machine cannot move it

    def fake_share(path, *args):  # noqa: ANN001, ANN002, ANN202 - stands in for read_share
        calls.append(Path(path).name)
        sum(range(20_000))  # some CPU in this process
        clock[0] += 0.02 if path == str(slow) else 0.001
        return {"logical": 1, "requests": 2 if path == str(slow) else 1, "bytes": 1, "page_buffer": None,
                "error": None}

    monkeypatch.setattr(vrun, "read_share", fake_share)
    monkeypatch.setattr(vrun, "time", SimpleNamespace(perf_counter=lambda: clock[0], process_time=time.process_time))
    fast_v = vrun.describe(shot_file, "fast", True, "/shots/{shot}/signals/{signal}")
    slow_v = vrun.describe(slow, "slow", True, "/shots/{shot}/signals/{signal}")
    cond = Condition("serial", 1, None, "warm", 0.0, 0.0)
    rows = vrun.measure([fast_v, slow_v], [ReadPlan("shot", ("1",))], lambda _: [cond], 2, warmup=1,
                        min_seconds=0.05, interleave=True)
    fast, slow_row = shot_file.name, slow.name
    # warm-ups first, then in turn: the slow row has its 0.05 s after 3 runs, the fast one runs on alone
    assert calls[:2] == [fast, slow_row]
    assert calls[2:8] == [fast, slow_row] * 3
    assert set(calls[8:]) == {fast}
    assert [r.variant for r in rows] == ["fast", "slow"]
    assert rows[1].repeats == 3 and rows[0].repeats == 2 * vrun.MAX_REPEAT_FACTOR
    assert [r.requests for r in rows] == [1, 2]
    assert rows[1].seconds_min == pytest.approx(0.02) and rows[0].seconds_max == pytest.approx(0.001)
    assert all(r.cpu and r.cpu > 0 for r in rows) and all(r.peak_rss is None for r in rows)
    calls.clear()
    vrun.measure([fast_v, slow_v], [ReadPlan("shot", ("1",))], lambda _: [cond], 2)
    assert calls == [fast, fast, slow_row, slow_row]  # without: one row after the other


def test_each_timed_run_starts_with_the_last_ones_garbage_collected_and_the_heap_frozen(shot_file, monkeypatch):
    """The cyclic garbage a run leaves is collected before the next timed run, outside
    the timing; the caller's heap is frozen meanwhile (collections walk only what the
    runs made) and thawed afterwards."""
    import gc
    import weakref

    from layoutkit.verify import run as vrun

    class Node:
        pass

    left: list[weakref.ref] = []
    seen: list[tuple[bool, int]] = []

    def fake_share(*args):  # noqa: ANN002, ANN202 - stands in for read_share
        seen.append((bool(left) and left[-1]() is not None, gc.get_freeze_count()))
        node = Node()
        node.self = node  # a cycle: only the cyclic collector frees it
        left.append(weakref.ref(node))
        return {"logical": 1, "requests": 1, "bytes": 1, "page_buffer": None, "error": None}

    monkeypatch.setattr(vrun, "read_share", fake_share)
    variant = vrun.describe(shot_file, "src", True, "/shots/{shot}/signals/{signal}")
    cond = Condition("serial", 1, None, "warm", 0.0, 0.0)
    gc.disable()  # no collection but measure's own
    try:
        vrun.measure([variant], [ReadPlan("shot", ("1",))], lambda _: [cond], 3, warmup=1)
    finally:
        gc.enable()
    assert len(seen) == 4
    assert [alive for alive, _ in seen[1:]] == [False] * 3  # the warm-up's and each timed run's cycle: gone
    assert all(frozen > 0 for _, frozen in seen)
    assert gc.get_freeze_count() == 0


def test_verify_options_repeat_a_short_row_to_a_time_floor(shot_file, tmp_path) -> None:
    """VerifyOptions.min_seconds reaches measure: a short row with repeat=1 is repeated
    (MAX_REPEAT_FACTOR times at most), and without it runs once."""
    import shutil
    from dataclasses import replace

    from layoutkit.verify import run as vrun

    copy = tmp_path / "copy.h5"
    shutil.copyfile(shot_file, copy)
    base = vrun.VerifyOptions(patterns="open", sample=1, repeat=1, caches=("warm",), check=False)
    once = vrun.verify(shot_file, [copy], base).results
    floored = vrun.verify(shot_file, [copy], replace(base, min_seconds=60.0)).results
    assert len(once) == len(floored) == 2
    assert [r.repeats for r in once] == [1, 1] and [r.repeats for r in floored] == [vrun.MAX_REPEAT_FACTOR] * 2


def test_thread_workers_share_one_open_hdf5_file_and_its_page_buffer(variants, shot_file, monkeypatch):
    """Thread workers on an HDF5 variant read through one open file, with the condition's
    page buffer: one file per process, whatever the worker count, and the same data read
    as with a file per worker (processes do that; Zarr stores are opened per worker)."""
    from layoutkit.verify import run as vrun

    opened: list[int] = []
    real = vrun.open_archive

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        opened.append(kwargs.get("page_buffer", 0))
        return real(*args, **kwargs)

    monkeypatch.setattr(vrun, "open_archive", spy)
    paged = vrun.describe(variants["by-shot"], "by-shot.h5", True, "/shots/{shot}/signals/{signal}")
    with real(shot_file) as source:
        plans = [plan_reads(p, source, 4, 0) for p in ("shot", "signal")]
    page_buffer = 64 * 2**20
    opened.clear()
    rows = vrun.measure([paged], plans, lambda _: [Condition("threads", 3, page_buffer, "warm", 0.0, 0.0)], 2)
    assert opened == [page_buffer] * 2 * 2  # one open per run: 2 patterns x 2 repetitions
    assert all(r.error is None and r.meta_hit_rate is not None and r.requests > 0 for r in rows)
    # the same reads, a file per worker (as each worker process opens its own)
    shares = [(str(paged.path), "/shots/{shot}/signals/{signal}", "shot", s, 0.0, 0.0, page_buffer, ())
              for s in split(plans[0].items, 3)]
    assert len(shares) > 1
    assert sum(vrun.read_share(*s)["logical"] for s in shares) == rows[0].logical_bytes
    zarr_v = vrun.describe(variants["zarr"], "shots.zarr", True, "/shots/{shot}/signals/{signal}")
    opened.clear()
    vrun.measure([zarr_v], plans[:1], lambda _: [Condition("threads", 3, None, "warm", 0.0, 0.0)], 1)
    assert len(opened) == len(shares)  # Zarr: each worker opens the store itself


def test_a_rows_peak_rss_leaves_out_the_cyclic_garbage_left_before_it(shot_file, monkeypatch):
    """Garbage in reference cycles (as the shot trees of the last row are) is collected
    before a row starts its peak: 300 MiB of it held by a cycle does not count in the row."""
    import gc

    from layoutkit.memory import peak_rss, reset_peak_rss
    from layoutkit.verify import run as vrun

    if not reset_peak_rss():
        pytest.fail("this test needs Linux's /proc/self/clear_refs (the CI machines have it)")
    monkeypatch.setattr(vrun, "read_share", lambda *a: {"logical": 1, "requests": 1, "bytes": 1, "page_buffer": None,
                                                         "error": None})
    variant = vrun.describe(shot_file, "src", True, "/shots/{shot}/signals/{signal}")
    cond = Condition("serial", 1, None, "warm", 0.0, 0.0)
    gc.disable()  # the cycle stays until someone collects it
    try:
        cycle: list = [np.ones(300 * 2**20, dtype=np.uint8)]
        cycle.append(cycle)
        del cycle
        reset_peak_rss()
        held = peak_rss()
        (row,) = vrun.measure([variant], [ReadPlan("shot", ("1",))], lambda _: [cond], 1)
    finally:
        gc.enable()
    assert row.peak_rss < held - 250 * 2**20, (held, row.peak_rss)


def test_a_failed_worker_on_a_shared_file_leaves_it_open_for_the_others(variants, shot_file, monkeypatch):
    """A thread worker that fails on the shared HDF5 file does not close it under the
    others: they finish their reads on the open file, and the row names the failure."""
    import threading

    from layoutkit.verify import run as vrun

    real = vrun.run_reads
    failed = threading.Event()
    seen_open: list[bool] = []

    def run_reads(archive, pattern, items):  # noqa: ANN001, ANN202
        if not failed.is_set():
            failed.set()
            raise ValueError("a damaged dataset")
        time.sleep(0.3)  # still reading after the first worker failed
        seen_open.append(bool(archive.f.id.valid))
        return real(archive, pattern, items)

    monkeypatch.setattr(vrun, "run_reads", run_reads)
    paged = vrun.describe(variants["by-shot"], "by-shot.h5", True, "/shots/{shot}/signals/{signal}")
    with open_archive(shot_file) as source:
        plan = plan_reads("shot", source, 4, 0)
    (row,) = vrun.measure([paged], [plan], lambda _: [Condition("threads", 3, 0, "warm", 0.0, 0.0)], 1)
    assert seen_open and all(seen_open), seen_open
    assert row.error == "ValueError: a damaged dataset"


def test_open_is_opening_and_list_lists(tmp_path):
    """``open`` costs what opening costs (a signal-major store: its root document, one
    GET, as its format page says); listing every array is the ``list`` pattern, asked by
    name (on signal-major it reads the series' indexes)."""
    import layoutkit
    from layoutkit.sample import write_sample
    from layoutkit.templates import DEFAULT_TEMPLATE

    src = write_sample(tmp_path / "shots.h5", shots=4, signals=4, seed=3).path
    store = tmp_path / "signal-major.zarr"
    layoutkit.convert(src, store, layoutkit.ConvertOptions(layout="signal-major"))
    opened = read_share(str(store), DEFAULT_TEMPLATE, "open", [None], 0, 0, 0)
    listed = read_share(str(store), DEFAULT_TEMPLATE, "list", [None], 0, 0, 0)
    assert opened["requests"] == 1 and opened["logical"] == 0
    assert listed["requests"] > 1 and listed["logical"] > 0
    result = cli("verify", src, store, *FAST, "--patterns", "open,list", "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(open(tmp_path / "r" / "results.csv")))
    assert {r["pattern"] for r in rows} == {"open", "list"}
    default = cli("verify", src, store, *FAST, "--out", tmp_path / "d")
    assert "list" not in {r["pattern"] for r in csv.DictReader(open(tmp_path / "d" / "results.csv"))}
    assert default.exit_code == 0


def test_conditions_of_reads_from_a_bucket_say_the_requests_are_real():
    """The demo's picture said "no simulated latency" under a caption of 10 ms per
    request: the reads were real requests through a proxy that held each 10 ms."""
    from dataclasses import replace

    from layoutkit.verify import report

    local = [_result("a.h5", "shot", 0.1, 1), _result("b.zarr", "shot", 0.2, 1)]
    remote = [replace(r, remote=True) for r in local]
    assert "no simulated latency" in report.conditions_text(local)
    assert "real requests to a bucket, no latency simulated" in report.conditions_text(remote)
    simulated = [replace(r, latency=0.01) for r in remote]
    assert "10 ms per request simulated, over real requests" in report.conditions_text(simulated)


def test_repeats_scale_with_the_data():
    """A row stops repeating once its runs add up to ROW_SECONDS (a run of seconds is its
    own median); short rows still get every repetition asked for."""
    from layoutkit.verify.run import ROW_SECONDS, _Row

    def row(times):  # noqa: ANN001, ANN202
        r = _Row.__new__(_Row)
        r.times = list(times)
        return r

    assert row([ROW_SECONDS + 0.5]).done(3, 0.0)
    assert not row([0.2, 0.3]).done(3, 0.0) and row([0.2, 0.3, 0.2]).done(3, 0.0)
    assert not row([ROW_SECONDS + 0.5]).done(3, 10.0)  # min_seconds asked: advise's rows repeat as asked


def test_verify_says_up_front_how_long_the_timed_runs_will_take(shot_file, variants):
    """Not quiet: one line before the timed runs, from the probe; quiet: no probe, no line."""
    args = ["verify", str(shot_file), str(variants["zarr"]), "--repeat", "1", "--sample", "1",
            "--patterns", "open,signal", "--latency", "5ms"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "the read patterns: expected to take about" in said
    assert said.index("expected to take about") < said.index("The answer")
    quiet = runner.invoke(app, ["--quiet", *args])
    assert quiet.exit_code == 0 and "expected to take" not in quiet.output


def test_the_probe_waits_on_an_hdf5_file_whatever_its_variant_says(tmp_path, monkeypatch):
    """The probe's wait is awaited by Zarr readers and slept by HDF5's: an HDF5 file probed
    under a variant that does not say "hdf5" (a set of sources, a repository named without
    its prefix) handed HDF5 a coroutine it never awaited, so no latency was charged."""
    import warnings

    import layoutkit
    from layoutkit.sample import write_sample
    from layoutkit.verify import run as run_module
    from layoutkit.verify.run import Variant, probe

    src = write_sample(tmp_path / "s.h5", shots=2, signals=2, seed=1).path
    monkeypatch.setattr(run_module, "PROBE_LATENCY", 0.02)
    with layoutkit.open(src) as archive:
        shot = archive.shots[0]
    for said in ("hdf5", "zarr"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # "coroutine ... was never awaited"
            _, rounds = probe(Variant("s.h5", src, said, "hdf5", "hdf5", None), "shot", [shot], "/shots/{shot}/signals/{signal}")
        assert rounds >= 1, said


def _rows(text: str, title: str) -> list[dict[str, str]]:
    """Each row of the table printed under ``title``, by column name."""
    lines = text[text.index(title):].splitlines()
    head: list[str] = []
    out = []
    for line in lines[1:]:
        if line.startswith("┃") and not head:
            head = [c.strip() for c in line.strip("┃").split("┃")]
        elif line.startswith("│"):
            out.append(dict(zip(head, (c.strip() for c in line.strip("│").split("│")))))
        elif out and line.startswith("└"):
            break
    return out


def test_the_answers_numbers_are_the_measurements_and_its_columns_are_explained(shot_file, variants):
    """The answer's "vs the source" says whose requests it shows (it printed the source's
    count beside the winner's speed-up: "8.5x (824 requests)"), and every number in the
    answer is the measurement table's: the winner's seconds and requests, the source's
    requests, each speed-up the ratio of the table's seconds. Under each table, what its
    columns mean; with no latency simulated, what that favours (issue 66)."""
    result = cli("verify", shot_file, *variants.values(), "--patterns", "shot,signal", "--repeat", "1")
    assert result.exit_code == 0, result.output
    text = result.output
    measured = {(r["variant"], r["pattern"]): r for r in _rows(text, "every measurement")}
    answers = _rows(text, "The answer")
    assert {a["read"] for a in answers} == {"shot", "signal"}
    for a in answers:
        mine, source = measured[a["fastest"], a["read"]], measured[shot_file.name, a["read"]]
        assert a["seconds"] == mine["seconds"] and a["requests"] == mine["requests"]
        m = re.fullmatch(r"([\d.]+)x \(source: ([\d,]+) requests?\)", a["vs the source"])
        assert m and m.group(2) == source["requests"], a
        ratio = float(source["seconds"]) / float(a["seconds"])
        assert abs(float(m.group(1)) - ratio) <= 0.05 * ratio + 0.06, (a, ratio)
        slowest = re.fullmatch(r"([\d.]+)x \((.+): ([\d,]+) requests?\)", a["vs the slowest"])
        assert a["vs the slowest"] == "-" or (slowest and measured[slowest.group(2), a["read"]]["requests"]
                                              == slowest.group(3)), a
    flat = " ".join(text.split())
    for column in ("page buf", "spread", "requests", "hits m/r", "equal", "vs the source", "vs the slowest"):
        assert f"{column}: " in flat, column
    assert "No latency was simulated" in flat and "w 1" not in flat and "1 worker" in flat
