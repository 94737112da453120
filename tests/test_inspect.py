"""`layoutkit inspect`: every number checked against an independent count (h5py's own
chunk index calls, h5stat, zarr-python, reorder's scale deduplication), on the real-world
corpus, the hard cases, the sample archive and Zarr stores; and the recommendations fire
where they should."""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
import subprocess
import warnings
from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr
from conftest import HARD_CASES, realdata_params
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.convert import ConvertOptions, convert
from layoutkit.hdf5.inventory import read_inventory
from layoutkit.inspect import SMALL_CHUNK_BYTES, InspectReport, inspect_path
from layoutkit.options import parse_chunks, parse_shards
from layoutkit.reorder import ReorderOptions, find_duplicate_scales, reorder
from layoutkit.templates import DEFAULT_TEMPLATE

runner = CliRunner()
requires_h5stat = pytest.mark.skipif(shutil.which("h5stat") is None, reason="needs Debian's hdf5-tools")
STANDARD_FILTERS = {"gzip": "GZIP", "shuffle": "SHUFFLE", "fletcher32": "FLETCHER32", "szip": "SZIP", "nbit": "NBIT",
                    "scaleoffset": "SCALEOFFSET"}


def chunk_sizes(ds: h5py.Dataset) -> list[int]:
    """The stored size of each chunk, one query per chunk: by its coordinates over the
    dataset's grid (a lookup; get_chunk_info by index walks the index from its start on
    each call, hours' worth on a file of 10,000-chunk datasets), by index where the grid
    is far larger than what is stored."""
    n = ds.id.get_num_chunks()
    grid = [range(0, extent, step) for extent, step in zip(ds.shape, ds.chunks)]
    if math.prod(map(len, grid)) > 4 * n + 64:
        return [ds.id.get_chunk_info(i).size for i in range(n)]
    infos = (ds.id.get_chunk_info_by_coord(tuple(origin)) for origin in itertools.product(*grid))
    sizes = [info.size for info in infos if info.byte_offset is not None]
    assert len(sizes) == n
    return sizes


def count_with_h5py(path: Path) -> dict:
    """The same quantities, counted another way: h5py's high-level walk and the chunk
    index read one chunk at a time (get_num_chunks, get_chunk_info_by_coord)."""
    counts = {"groups": 1, "arrays": 0, "chunks": 0, "small": 0, "stored": 0, "scales": 0}
    seen: set[int] = set()
    with h5py.File(path, "r") as f:
        def visit(name: str, obj) -> None:
            addr = h5py.h5o.get_info(obj.id).addr
            if addr in seen:
                return
            seen.add(addr)
            if isinstance(obj, h5py.Group):
                counts["groups"] += 1
            elif isinstance(obj, h5py.Dataset):
                counts["arrays"] += 1
                counts["scales"] += bool(h5py.h5ds.is_scale(obj.id))
                plist = obj.id.get_create_plist()
                if plist.get_layout() == h5py.h5d.CONTIGUOUS and plist.get_external_count():
                    return
                counts["stored"] += obj.id.get_storage_size()
                if obj.chunks is not None:
                    sizes = chunk_sizes(obj)
                    counts["chunks"] += len(sizes)
                    counts["small"] += sum(s < SMALL_CHUNK_BYTES for s in sizes)

        f.visititems(visit)
    return counts


def h5stat(path: Path, *flags: str) -> str:
    return subprocess.run(["h5stat", *flags, str(path)], capture_output=True, text=True, check=True).stdout


def number(text: str, label: str) -> int:
    m = re.search(re.escape(label) + r"\s*(\d+)", text)
    assert m, f"{label!r} not in h5stat output"
    return int(m.group(1))


def assert_matches_h5py(report: InspectReport, path: Path) -> None:
    want = count_with_h5py(path)
    assert (report.groups, report.arrays, report.scales) == (want["groups"], want["arrays"], want["scales"])
    assert report.chunks == want["chunks"] == sum(b.count for b in report.chunk_histogram)
    assert report.small_chunks == want["small"]
    assert report.stored_bytes == want["stored"] == sum(c.stored_bytes for c in report.codecs)
    assert sum(c.arrays for c in report.codecs) == report.arrays == sum(report.layouts.values())


def assert_matches_h5stat(report: InspectReport, path: Path) -> None:
    summary = h5stat(path, "-S")
    fs = report.file_space
    assert fs is not None and fs.metadata_exact
    assert fs.metadata_bytes == number(summary, "File metadata:")
    assert fs.raw_bytes == number(summary, "Raw data:")
    assert fs.page_size == number(summary, "File space page size:")
    assert fs.strategy in summary.split("File space management strategy:")[1].split()[0]
    assert fs.unaccounted_bytes == number(summary, "Unaccounted space:")
    info = h5stat(path, "-f", "-d", "-F")
    assert report.groups == number(info, "# of unique groups:")
    assert report.arrays == number(info, "# of unique datasets:")
    assert fs.userblock_bytes == number(info, "User block:")
    if not report.arrays:  # h5stat prints no dataset section
        return
    layouts = report.layouts
    assert layouts.get("compact", 0) == number(info, "Dataset layout counts[COMPACT]:")
    assert layouts.get("contiguous", 0) + layouts.get("external", 0) == number(info, "Dataset layout counts[CONTIG]:")
    assert layouts.get("chunked", 0) == number(info, "Dataset layout counts[CHUNKED]:")
    for name, label in STANDARD_FILTERS.items():
        assert report.filters.get(name, 0) == number(info, f"{label} filter:"), name
    user_defined = sum(n for name, n in report.filters.items() if name not in STANDARD_FILTERS)
    assert user_defined == number(info, "USER-DEFINED filter:")
    no_filter = next((c.arrays for c in report.codecs if c.pipeline == "none"), 0)
    assert no_filter == number(info, "NO filter:")


# -- the real-world corpus ---------------------------------------------------------------


@pytest.mark.realdata
@pytest.mark.parametrize("src", realdata_params())
def test_realdata_counts_match_h5py(src: Path) -> None:
    report = inspect_path(src)
    assert_matches_h5py(report, src)
    assert report.recommendations  # always something to say, if only "nothing stands out"
    json.loads(report.to_json())


@pytest.mark.realdata
@requires_h5stat
@pytest.mark.parametrize("src", realdata_params())
def test_realdata_matches_h5stat(src: Path) -> None:
    assert_matches_h5stat(inspect_path(src), src)


# -- hard cases, the sample archive ----------------------------------------------------------


@pytest.mark.parametrize("case", sorted(HARD_CASES))
def test_hard_cases(case: str, hard_cases: dict[str, Path]) -> None:
    src = hard_cases[case]
    report = inspect_path(src)
    assert_matches_h5py(report, src)
    if shutil.which("h5stat"):
        assert_matches_h5stat(report, src)
    if case == "filters":
        assert {"gzip", "shuffle", "lzf", "fletcher32", "scaleoffset", "zstd", "blosc", "lz4", "bitshuffle"} <= set(report.filters)
        assert report.layouts == {"chunked": 10, "contiguous": 1, "compact": 1}
    if case == "userblock":
        assert report.file_space.userblock_bytes == 1024
    if case == "netcdf4":
        assert report.format == "netcdf4"
        assert any("cloud-netcdf" in r.action for r in report.recommendations)


def test_sample_archive(shot_file: Path) -> None:
    report = inspect_path(shot_file)
    assert_matches_h5py(report, shot_file)
    inventory = read_inventory(shot_file)
    merged = find_duplicate_scales(str(shot_file), inventory, DEFAULT_TEMPLATE)  # what reorder merges
    assert report.shot_duplicate_scales == len(merged) > 0
    assert report.duplicate_scales >= report.shot_duplicate_scales
    with h5py.File(shot_file, "r") as f:
        shots = list(f["shots"])
        signals = {s for shot in shots for s in f[f"shots/{shot}/signals"]}
        matched = sum(len(f[f"shots/{shot}/signals"]) for shot in shots)
    assert (report.shots, report.signals, report.template_matches) == (len(shots), len(signals), matched)
    actions = " ".join(r.action for r in report.recommendations)
    assert "cmod-signal" in actions and "--dedupe" in actions


def test_logical_bytes_and_ratio(shot_file: Path) -> None:
    report = inspect_path(shot_file)
    with h5py.File(shot_file, "r") as f:
        logical = []
        f.visititems(lambda n, o: logical.append(o.size * o.dtype.itemsize) if isinstance(o, h5py.Dataset) else None)
    assert report.logical_bytes == sum(logical)
    assert math.isclose(report.ratio, report.logical_bytes / report.stored_bytes)
    gzip = [c for c in report.codecs if "gzip" in c.pipeline]
    assert gzip and all(c.ratio > 1.2 for c in gzip)  # the sample compresses like measurements


def test_never_reads_data(tmp_path: Path) -> None:
    """A chunk that cannot be decoded does not matter: only the chunk index is read."""
    src = tmp_path / "broken.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("x", data=np.arange(100_000, dtype="f8"), chunks=(10_000,), compression="gzip")
    with h5py.File(src, "r") as f:
        offset = f["x"].id.get_chunk_info(3).byte_offset
    with open(src, "r+b") as fh:
        fh.seek(offset)
        fh.write(b"\xff" * 64)
    with h5py.File(src, "r") as f, pytest.raises(OSError):
        f["x"][30_000:40_000]
    report = inspect_path(src)
    assert report.chunks == 10 and report.arrays == 1


# -- recommendations -------------------------------------------------------------------------


def actions(report: InspectReport) -> str:
    return " ".join(f"{r.finding} {r.action}" for r in report.recommendations)


def test_tiny_and_huge_chunks(tmp_path: Path) -> None:
    src = tmp_path / "chunks.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("tiny", data=np.arange(200 * 128, dtype="f8"), chunks=(128,))  # 1 KiB chunks
        f.create_dataset("huge", data=np.ones(17 * 1024**2, dtype="u1"), chunks=(17 * 1024**2,))
    report = inspect_path(src)
    assert (report.small_chunks, report.large_chunks) == (200, 1)
    assert "--chunks auto" in actions(report) and "--chunk-size 4MiB" in actions(report)


def test_spread_metadata_then_reorder_gathers_it(tmp_path: Path) -> None:
    src = tmp_path / "spread.h5"
    rng = np.random.default_rng(0)
    with h5py.File(src, "w") as f:
        for i in range(40):  # header, data, header, data...: headers spread over 40 MiB
            f[f"g{i}/x"] = rng.random(128 * 1024)
    report = inspect_path(src)
    fs = report.file_space
    assert fs.header_regions > 2 * fs.min_header_regions
    assert "Metadata is spread" in actions(report) and "layoutkit reorder" in actions(report)
    dst = tmp_path / "gathered.h5"
    reorder(src, dst, ReorderOptions(by="group", page_size=1024**2))
    after = inspect_path(dst)
    assert after.file_space.strategy == "H5F_FSPACE_STRATEGY_PAGE"
    assert after.file_space.header_regions == 1
    assert "Metadata is spread" not in actions(after) and "Written by `layoutkit reorder`" in actions(after)
    assert after.written_by["recipe"]["by"] == "group"


def test_nothing_to_say(tmp_path: Path) -> None:
    src = tmp_path / "fine.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("x", data=np.arange(10.0))
    (rec,) = inspect_path(src).recommendations
    assert "Nothing stands out" in rec.finding


# -- Zarr --------------------------------------------------------------------------------------


def zarr_arrays(store: Path) -> list[zarr.Array]:
    root = zarr.open_group(store, mode="r", use_consolidated=False)
    with warnings.catch_warnings():  # layoutkit.json is not a Zarr node
        warnings.simplefilter("ignore")
        return [a for _, a in root.members(max_depth=None) if isinstance(a, zarr.Array)]


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_zarr_store_counts_match_zarr(zarr_format: int, shot_file: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    convert(shot_file, store, ConvertOptions(zarr_format=zarr_format))
    report = inspect_path(store)
    arrays = zarr_arrays(store)
    assert report.format == f"zarr v{zarr_format}" and report.consolidated is True
    assert report.arrays == len(arrays)
    assert report.chunks == sum(a.nchunks_initialized for a in arrays)
    assert report.logical_bytes == sum(a.nbytes for a in arrays)
    chunk_files = [p for p in store.rglob("*") if p.is_file() and p.name not in
                   ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata", "layoutkit.json")
                   and p.relative_to(store).parts[0] != "layoutkit.sources"]  # the log of sources: documents
    assert report.stored_bytes == sum(p.stat().st_size for p in chunk_files)
    assert report.total_bytes == sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    assert report.written_by["command"] == "convert"
    assert report.template_matches == inspect_path(shot_file).template_matches


def test_sharded_zarr_counts_inner_chunks(tmp_path: Path) -> None:
    store = tmp_path / "sharded.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=3)
    rng = np.random.default_rng(1)
    a = root.create_array("a", shape=(1000, 30), chunks=(100, 10), shards=(400, 30), dtype="f8")
    a[...] = rng.random((1000, 30))
    b = root.create_array("b", shape=(5000,), chunks=(1000,), dtype="i4", compressors=None)
    b[...] = np.arange(1, 5001)
    report = inspect_path(store)
    assert report.layouts == {"sharded": 1, "chunked": 1}
    assert report.chunks == 10 * 3 + 5  # inner chunks of a, chunks of b
    assert report.consolidated is False and report.written_by is None
    assert report.logical_bytes == a.nbytes + b.nbytes
    none = next(c for c in report.codecs if c.pipeline == "none")
    assert none.stored_bytes == b.nbytes and none.ratio == 1.0


def test_zarr_recommendations(tmp_path: Path) -> None:
    src = tmp_path / "small.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("x", data=np.arange(20_000, dtype="f4"), chunks=(100,))
    store = tmp_path / "small.zarr"
    convert(src, store, ConvertOptions(chunks=parse_chunks("source")))
    report = inspect_path(store)
    assert report.small_chunks == report.chunks == 200
    assert "--chunks auto" in actions(report) and "re-convert" in actions(report)
    sharded = tmp_path / "sharded.zarr"
    convert(src, sharded, ConvertOptions(shards=parse_shards("auto")))
    assert inspect_path(sharded).layouts == {"chunked": 1}  # one chunk: not sharded


# -- the command line ------------------------------------------------------------------------


def test_cli_screen_and_json(shot_file: Path) -> None:
    screen = runner.invoke(app, ["inspect", str(shot_file)], env={"COLUMNS": "140"})
    assert screen.exit_code == 0, screen.output
    report = inspect_path(shot_file)
    for text in (f"{report.arrays:,} arrays", "recommendations", "cmod-signal", f"{report.chunks:,} chunks",
                 f"{report.file_space.metadata_bytes:,} B"):
        assert text in screen.output, text
    as_json = runner.invoke(app, ["inspect", str(shot_file), "--json"])
    assert as_json.exit_code == 0
    doc = json.loads(as_json.output)
    want = json.loads(report.to_json())
    doc.pop("seconds"), want.pop("seconds")
    assert doc == want


@pytest.mark.parametrize("make, words", [
    (lambda p: p, "does not exist"),
    (lambda p: (p.mkdir(), p)[1], "not a Zarr store"),
    (lambda p: (p.write_text("shot,signal\n"), p)[1], "not an HDF5 file"),
])
def test_cli_refuses_in_one_line(make, words: str, tmp_path: Path) -> None:
    target = make(tmp_path / "thing")
    result = runner.invoke(app, ["inspect", str(target)])
    assert result.exit_code == 2
    assert result.output.startswith("error:") and words in result.output and "Traceback" not in result.output


def test_a_worker_count_below_one_is_refused_in_one_line(shot_file: Path) -> None:
    result = runner.invoke(app, ["inspect", str(shot_file), "--workers", "0"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: Expected --workers of 1 or more. Got 0."


def test_codec_totals_agree_with_the_header(tmp_path: Path) -> None:
    """Edge chunks count by their part inside the array: a dataset of 10 values in a
    chunk of 1000 holds 10 values of data, in the header and in the compression table."""
    path = tmp_path / "edges.h5"
    with h5py.File(path, "w") as f:
        for k in range(5):
            f.create_dataset(f"small{k}", data=np.arange(10.0), chunks=(1000,), maxshape=(None,), compression="gzip")
        f.create_dataset("full", data=np.arange(4000.0).reshape(40, 100), chunks=(16, 64), compression="gzip")
    report = inspect_path(path)
    assert sum(c.logical_bytes for c in report.codecs) == report.logical_bytes == (5 * 10 + 4000) * 8


def test_a_netcdf4_file_without_ncproperties_is_called_netcdf4(tmp_path: Path) -> None:
    """Older netCDF-C wrote no _NCProperties; its variables' own attributes say what it is."""
    import netCDF4

    path = tmp_path / "old.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 4)
        nc.createVariable("v", "f4", ("x",), zlib=True, complevel=0)[:] = np.arange(4)
    with h5py.File(path, "a") as f:
        del f.attrs["_NCProperties"]
    assert inspect_path(path).format == "netcdf4"
    screen = runner.invoke(app, ["inspect", str(path)], env={"COLUMNS": "200"})
    text = " ".join(screen.output.split())
    assert "netcdf4," in text and "stretch(es)" not in text and "template" not in text


def assert_progress(reported: list[tuple[int, int]], datasets: int) -> None:
    """Progress rises to every dataset read, against the one total the walk found."""
    done = [d for d, _ in reported]
    assert reported and done == sorted(done) and len(set(done)) == len(done)
    assert {t for _, t in reported} == {datasets} and done[-1] == datasets


@pytest.mark.parametrize("case", ["sample", "filters", "links", "scales", "netcdf4"])
def test_walkers_report_what_one_process_reports(case: str, shot_file: Path, hard_cases: dict[str, Path],
                                                 tmp_path: Path, monkeypatch) -> None:
    """With spawned walkers (the threshold lowered to 1 dataset) the report is the serial
    one, field for field: counts, codecs, histogram, missing filters, netCDF-4's hints on
    the first datasets, scales and their duplicates; and the walkers did read the
    datasets."""
    from layoutkit.hdf5.walkers import Walkers
    from layoutkit.inspect import hdf5 as inspect_module

    src = shot_file if case == "sample" else hard_cases[case]
    if case == "netcdf4":  # as older netCDF-C wrote it: only its variables' attributes say what it is
        src = Path(shutil.copy(src, tmp_path / "old.nc"))
        with h5py.File(src, "a") as f:
            del f.attrs["_NCProperties"]
    reported: list[tuple[int, int]] = []
    serial = inspect_path(src, workers=1, progress=lambda done, total: reported.append((done, total)))
    assert_progress(reported, serial.arrays)
    monkeypatch.setattr(inspect_module, "PARALLEL_MIN_DATASETS", 1)
    mapped: list[int] = []
    walker_map = Walkers.map

    def counted(self, fn, source, items, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        mapped.append(len(items))
        return walker_map(self, fn, source, items, *args, **kwargs)

    monkeypatch.setattr(Walkers, "map", counted)
    reported.clear()
    parallel = inspect_path(src, workers=2, progress=lambda done, total: reported.append((done, total)))
    assert mapped == [serial.arrays] and serial.arrays > 0
    assert_progress(reported, serial.arrays)
    step = -(-serial.arrays // 8)  # four parts per walker, of whole datasets
    assert len(reported) == -(-serial.arrays // step)  # a report as each part comes back
    assert replace(parallel, seconds=0.0) == replace(serial, seconds=0.0)
    if case == "sample":
        assert serial.duplicate_scales > 0 and serial.shot_duplicate_scales > 0
    if case == "netcdf4":
        assert parallel.format == "netcdf4"


def _small_chunk_advice(report: InspectReport) -> list[str]:
    return [f"{r.finding} -> {r.action}" for r in report.recommendations if "under 16 KiB" in r.finding]


def test_a_recommendation_applied_changes_what_it_found_and_a_store_is_never_advised_what_it_is(tmp_path):
    """inspect's advice is tested by applying it: the rerun it names must change what it
    said was wrong. A store written with --chunks auto was told to rerun with --chunks
    auto; now it is told what would change it (issue 66)."""
    rng = np.random.default_rng(0)
    src, tiny = tmp_path / "s.h5", tmp_path / "tiny.h5"
    with h5py.File(src, "w") as f:  # 2,000-byte chunks of 80 kB signals
        for s, j in itertools.product(range(6), range(8)):
            f.create_dataset(f"shots/{s}/signals/x{j}", data=rng.standard_normal(20_000).astype("f4"), chunks=(500,))
    with h5py.File(tiny, "w") as f:  # signals of 4 kB: small whatever their chunks
        for s, j in itertools.product(range(12), range(8)):
            f.create_dataset(f"shots/{s}/signals/x{j}", data=rng.standard_normal(1000).astype("f4"))

    kept = tmp_path / "kept.zarr"
    convert(src, kept, ConvertOptions(chunks=parse_chunks("source")))
    (advice,) = _small_chunk_advice(inspect_path(kept))
    assert "`layoutkit convert --chunks auto`" in advice
    applied = tmp_path / "auto.zarr"
    convert(src, applied, ConvertOptions(chunks=parse_chunks("auto")))
    assert _small_chunk_advice(inspect_path(applied)) == [] and inspect_path(applied).small_chunks == 0

    auto = tmp_path / "tiny-auto.zarr"
    convert(tiny, auto, ConvertOptions())  # --chunks auto, the default
    (advice,) = _small_chunk_advice(inspect_path(auto))
    assert "--chunks auto`" not in advice and "--recipe shot-packed" in advice, advice
    result = runner.invoke(app, ["-q", "convert", str(tiny), str(tmp_path / "packed.zarr"), "--recipe", "shot-packed"])
    assert result.exit_code == 0, result.output
    packed = inspect_path(tmp_path / "packed.zarr")
    assert _small_chunk_advice(packed) == [] and packed.small_chunks < inspect_path(auto).small_chunks


def test_a_virtual_repository_is_its_own_size_on_disk(tmp_path):
    """On disk is what the repository holds, not the sizes its keys report (a virtual
    chunk's is the range it points to in a source: a repository of 1.6 MB was "21.2 MiB
    on disk"); the data stays counted, said to lie in the sources (issue 66)."""
    from layoutkit.sample import write_sample
    from layoutkit.storage.local import disk_usage

    src, repo = tmp_path / "s.h5", tmp_path / "v.icechunk"
    write_sample(src, shots=2, signals=4, seed=0)
    result = runner.invoke(app, ["-q", "convert", str(src), str(repo), "--layout", "virtual"])
    assert result.exit_code == 0, result.output
    report = inspect_path(repo)
    assert report.total_bytes == disk_usage(repo) < report.stored_bytes
    shown = runner.invoke(app, ["inspect", str(repo)])
    assert shown.exit_code == 0 and "in the sources its references point to" in " ".join(shown.output.split())


def test_the_screen_and_the_api_count_the_same_chunks_for_every_kind_of_input(tmp_path):
    """The CLI's counts are the report's (issue 66: "4 chunks on the CLI where
    ``inspect_path(...).chunks`` says 0"): for an HDF5 file, a Zarr v2 and v3 store, a
    sharded store and a virtual repository named with and without ``icechunk:``, the
    screen's "N chunks" and its JSON are what the API returns for the same name."""
    from layoutkit.sample import write_sample

    src = tmp_path / "s.h5"
    write_sample(src, shots=2, signals=4, seed=0)
    names = {"hdf5": str(src)}
    for name, extra in {"v3.zarr": [], "v2.zarr": ["--zarr-format", "2"], "sharded.zarr": ["--shards", "auto"],
                        "v.icechunk": ["--layout", "virtual"]}.items():
        result = runner.invoke(app, ["-q", "convert", str(src), str(tmp_path / name), *extra])
        assert result.exit_code == 0, result.output
        names[name] = str(tmp_path / name)
    names["icechunk:v.icechunk"] = f"icechunk:{tmp_path / 'v.icechunk'}"
    for kind, name in names.items():
        report = inspect_path(name)
        assert report.chunks > 0, kind
        screen = runner.invoke(app, ["inspect", name], env={"COLUMNS": "200"})
        assert screen.exit_code == 0, screen.output
        assert f"{report.chunks:,} chunks, {report.small_chunks:,} under" in screen.output, (kind, screen.output)
        as_json = json.loads(runner.invoke(app, ["inspect", name, "--json"]).output)
        assert (as_json["chunks"], as_json["small_chunks"]) == (report.chunks, report.small_chunks), kind
