"""reorder: paged HDF5, ordered by shot, signal or hierarchy, faithful to the source."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
from conftest import HARD_CASES, REALDATA, without_provenance
from roundtrip import LayoutRoundTrip
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.equality.hdf5 import compare_hdf5
from layoutkit.errors import InvalidOptionError
from layoutkit.reorder import ReorderOptions, plan_reorder, reorder
from layoutkit.storage.counting import CountingFile
from layoutkit.templates import match_template


def h5diff(a: Path, b: Path) -> subprocess.CompletedProcess:
    """h5diff -r, with hdf5plugin's filters (zstd, blosc, lz4, bitshuffle) available to it.
    LZF is h5py's own filter with no HDF5 plugin, so h5diff cannot read it in the source:
    that dataset is left to compare_hdf5. The variant is compared without the one root
    attribute layoutkit adds (its recipe)."""
    import os

    import hdf5plugin

    env = {**os.environ, "HDF5_PLUGIN_PATH": hdf5plugin.PLUGIN_PATH}
    return subprocess.run(["h5diff", "-r", "--exclude-path", "/lzf", str(a), str(without_provenance(b))],
                          capture_output=True, text=True, env=env)


requires_h5tools = pytest.mark.skipif(shutil.which("h5diff") is None, reason="needs Debian's hdf5-tools")
requires_ncdump = pytest.mark.skipif(shutil.which("ncdump") is None, reason="needs Debian's netcdf-bin")


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """8 shots x 12 signals: enough shots for the ordering to matter."""
    from layoutkit.sample import write_sample

    path = tmp_path_factory.mktemp("reorder") / "archive.h5"
    write_sample(path, shots=8, signals=12, seed=3)
    return path


PAGE = 1024 * 1024  # the sample is small: 1 MiB pages give each shot and signal a few pages


@pytest.fixture(scope="module")
def ordered(archive: Path, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("ordered")
    files = {}
    for by in ("shot", "signal"):
        files[by] = out / f"{by}.h5"
        reorder(archive, files[by], ReorderOptions(by=by, page_size=PAGE))
    return files


@requires_h5tools
@pytest.mark.parametrize("case", sorted(HARD_CASES))
def test_h5diff_finds_no_difference(case: str, hard_cases: dict[str, Path], tmp_path: Path) -> None:
    dst = tmp_path / "out.h5"
    reorder(hard_cases[case], dst, ReorderOptions(by="group", dedupe=False))
    result = h5diff(hard_cases[case], dst)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert compare_hdf5(hard_cases[case], dst) == []


@requires_h5tools
def test_h5diff_on_archive_without_dedupe(archive: Path, tmp_path: Path) -> None:
    dst = tmp_path / "nodedupe.h5"
    summary = reorder(archive, dst, ReorderOptions(by="signal", dedupe=False))
    assert summary.merged_scales == 0
    result = h5diff(archive, dst)
    assert result.returncode == 0, result.stdout[-3000:]


@requires_h5tools
@pytest.mark.parametrize("by", ["shot", "signal"])
def test_paged_file_space(ordered: dict[str, Path], by: str) -> None:
    out = subprocess.run(["h5stat", "-S", str(ordered[by])], capture_output=True, text=True, check=True).stdout
    assert "H5F_FSPACE_STRATEGY_PAGE" in out
    assert f"File space page size: {PAGE} bytes" in out


@pytest.mark.parametrize("by", ["shot", "signal"])
def test_merged_scales_keep_every_value(archive: Path, ordered: dict[str, Path], by: str) -> None:
    inventory, plan = plan_reorder(archive, "unused.h5", ReorderOptions(by=by))
    assert plan.dedupe, "the sample has per-signal copies of shared time bases"
    assert compare_hdf5(archive, ordered[by], plan.dedupe, inventory) == []
    with h5py.File(archive, "r") as fs, h5py.File(ordered[by], "r") as fv:
        for path in match_template([a.path for a in inventory.arrays], "/shots/{shot}/signals/{signal}"):
            np.testing.assert_array_equal(fv[path][...], fs[path][...])
            for axis in range(fs[path].ndim):
                want = [s[...] for s in fs[path].dims[axis].values()]
                got = [s[...] for s in fv[path].dims[axis].values()]
                assert len(got) == len(want)
                for w, g in zip(want, got):
                    np.testing.assert_array_equal(g, w)
        # a merged copy is the same object as the kept one, at its own path
        dup, kept = next(iter(plan.dedupe.items()))
        assert h5py.h5o.get_info(fv[dup].id).addr == h5py.h5o.get_info(fv[kept].id).addr


def byte_ranges(f: h5py.File, path: str) -> list[tuple[int, int]]:
    ds = f[path]
    if ds.chunks:
        return [(i.byte_offset, i.size) for i in (ds.id.get_chunk_info(k) for k in range(ds.id.get_num_chunks()))]
    offset = ds.id.get_offset()
    return [] if offset is None else [(offset, ds.id.get_storage_size())]


def pages(f: h5py.File, paths: list[str], page: int) -> set[int]:
    out: set[int] = set()
    for p in paths:
        for offset, size in byte_ranges(f, p):
            out.update(range(offset // page, (offset + size - 1) // page + 1))
    return out


def pattern_pages(path: Path, page: int, scales: bool) -> dict[str, list[tuple[int, int]]]:
    """Per signal (all shots) and per shot (all signals): (pages touched, bound), with or
    without the dimension scales attached to what is read."""
    with h5py.File(path, "r") as f:
        cells = match_template([n for n in _datasets(f)], "/shots/{shot}/signals/{signal}")
        def with_scales(ps):
            if not scales:
                return ps
            return sorted({q for p in ps for q in [p, *(s.name for ax in f[p].dims for s in ax.values())]})
        out: dict[str, list[tuple[int, int]]] = {"signal": [], "shot": []}
        for key, index in (("signal", 1), ("shot", 0)):
            for value in sorted({c[index] for c in cells.values()}):
                members = with_scales([p for p, c in cells.items() if c[index] == value])
                nbytes = sum(size for p in members for _, size in byte_ranges(f, p))
                out[key].append((len(pages(f, members, page)), math.ceil(nbytes / page) + 1))
    return out


def _datasets(f: h5py.File) -> list[str]:
    names: list[str] = []
    f.visititems(lambda n, o: names.append("/" + n) if isinstance(o, h5py.Dataset) else None)
    return names


def test_the_order_is_real(ordered: dict[str, Path]) -> None:
    """Signal-ordered: one signal of every shot sits in ceil(bytes/page)+1 pages on
    average; shot-ordered: one shot's signals and scales do. The opposite pairing touches
    many more pages."""
    by_signal = pattern_pages(ordered["signal"], PAGE, scales=False)
    by_shot = pattern_pages(ordered["shot"], PAGE, scales=True)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    # Small signals share their pages with the time bases written beside them and with
    # the other signals of the same task, so at these 1 MiB pages one can straddle a page
    # more than its bytes need: on average within 10% of the bound (measured 1.04x).
    assert mean([p for p, _ in by_signal["signal"]]) <= 1.1 * mean([b for _, b in by_signal["signal"]])
    # HDF5 still fills the free tail of a shot's last page with a small piece of the next
    # shot when one fits (a 960-byte time base here), and that shot then touches one page
    # more; on average a shot stays within its bound
    assert mean([p for p, _ in by_shot["shot"]]) <= mean([b for _, b in by_shot["shot"]])
    assert all(p <= b + 1 for p, b in by_shot["shot"])
    # the worst case: signals read from the shot-ordered file, and vice versa
    signals_from_shot_file = pattern_pages(ordered["shot"], PAGE, scales=False)["signal"]
    shots_from_signal_file = pattern_pages(ordered["signal"], PAGE, scales=True)["shot"]
    assert mean([p for p, _ in signals_from_shot_file]) >= 2 * mean([p for p, _ in by_signal["signal"]])
    assert mean([p for p, _ in shots_from_signal_file]) >= 2 * mean([p for p, _ in by_shot["shot"]])


def count_requests(path: Path, page_buf: int, read) -> int:
    cf = CountingFile(path)
    with h5py.File(cf, "r", page_buf_size=page_buf) if page_buf else h5py.File(cf, "r") as f:
        cf.reset()
        read(f)
    return cf.requests


def test_page_buffer_requests(archive: Path, ordered: dict[str, Path]) -> None:
    def one_signal(f):
        for shot in f["shots"]:
            f[f"shots/{shot}/signals/ip"][...]

    def one_shot(f):
        shot = sorted(f["shots"])[2]
        for name in f[f"shots/{shot}/signals"]:
            f[f"shots/{shot}/signals/{name}"][...]

    src_signal = count_requests(archive, 0, one_signal)
    sig_signal = count_requests(ordered["signal"], 64 << 20, one_signal)
    shot_signal = count_requests(ordered["shot"], 64 << 20, one_signal)
    sig_shot = count_requests(ordered["signal"], 64 << 20, one_shot)
    shot_shot = count_requests(ordered["shot"], 64 << 20, one_shot)
    src_shot = count_requests(archive, 0, one_shot)
    assert sig_signal < shot_signal < src_signal
    assert shot_shot < sig_shot < src_shot


def test_template_that_matches_nothing(hard_cases: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match=r"template '/shots/\{shot\}/signals/\{signal\}' matches no dataset.*e\.g\. /"):
        reorder(hard_cases["filters"], tmp_path / "o.h5", ReorderOptions(by="shot"))
    result = CliRunner().invoke(app, ["reorder", str(hard_cases["filters"]), str(tmp_path / "o.h5"), "--by", "signal"])
    assert result.exit_code == 2 and "--by group" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o.h5").exists()


def test_custom_template(tmp_path: Path) -> None:
    src = tmp_path / "custom.h5"
    with h5py.File(src, "w") as f:
        for shot in ("s1", "s2"):
            for sig in ("a", "b"):
                f[f"data/{shot}/{sig}"] = np.arange(10) + len(shot + sig)
    inventory, plan = plan_reorder(src, tmp_path / "o.h5", ReorderOptions(by="signal", template="data/{shot}/{signal}"))
    assert plan.order == ("/data/s1/a", "/data/s2/a", "/data/s1/b", "/data/s2/b")
    _, by_shot = plan_reorder(src, tmp_path / "o.h5", ReorderOptions(by="shot", template="data/{shot}/{signal}"))
    assert [p.split("/")[2] for p in by_shot.order] == ["s1", "s1", "s2", "s2"]


@requires_ncdump
def test_netcdf_stays_netcdf(hard_cases: dict[str, Path], tmp_path: Path) -> None:
    src = hard_cases["netcdf4"]
    dst = tmp_path / "out.nc"
    reorder(src, dst, ReorderOptions(by="group", compress_threshold=0))
    header = lambda p: subprocess.run(["ncdump", "-h", str(p)], capture_output=True, text=True, check=True).stdout  # noqa: E731
    plain = without_provenance(dst)  # the one global attribute layoutkit adds
    assert header(plain).splitlines()[1:] == header(src).splitlines()[1:]
    for group in ("/", "/sub"):
        xr.testing.assert_identical(xr.open_dataset(src, engine="h5netcdf", group=group).load(),
                                    xr.open_dataset(plain, engine="h5netcdf", group=group).load())


def test_cli_reorder_summary(archive: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["reorder", str(archive), str(tmp_path / "o.h5"), "--by", "signal"])
    assert result.exit_code == 0, result.output
    assert "duplicate dimension scales merged" in " ".join(result.output.split())  # (as wrapped at 80 columns)
    dry = CliRunner().invoke(app, ["reorder", str(archive), str(tmp_path / "p.h5"), "--dry-run"])
    assert dry.exit_code == 0 and "write order" in dry.output and not (tmp_path / "p.h5").exists()


class TestHDF5PagedRoundTrip(LayoutRoundTrip):
    """The shared round trips for ``reorder`` (by signal; any file by group)."""

    layout = "hdf5-paged"
    options = ReorderOptions(by="signal")
    realdata_options = ReorderOptions(by="group")

    def compare(self, src: Path, place: Any) -> list[Any]:
        """verify's comparator; and a netCDF-4 source's header, as ncdump prints it, is the
        copy's (every real file is reordered by group here, once: test_realdata)."""
        mismatches = super().compare(src, place)
        if src.suffix == ".nc" and REALDATA in src.parents and shutil.which("ncdump"):
            h = lambda p: subprocess.run(["ncdump", "-h", str(p)], capture_output=True, text=True).stdout  # noqa: E731
            assert h(without_provenance(Path(place.location))).splitlines()[1:] == h(src).splitlines()[1:]
        return mismatches


def test_small_files_are_not_inflated(hard_cases: dict[str, Path], tmp_path: Path) -> None:
    """A small netCDF-4 file with an unlimited dimension: one chunk no larger than the
    data for each extendible dataset (not the source's kilobyte chunks of a few bytes),
    and a page that fits the file."""
    src = hard_cases["netcdf4"]
    summary = reorder(src, tmp_path / "small.h5", ReorderOptions(by="group"))
    assert summary.page_size <= 64 * 1024
    assert summary.dest_bytes <= max(2 * summary.source_bytes, 64 * 1024)
    with h5py.File(src, "r") as fs, h5py.File(tmp_path / "small.h5", "r") as fo:
        assert fs["time"].maxshape == (None,) and fo["time"].maxshape == (None,)
        assert fo["time"].chunks[0] <= max(1, fo["time"].shape[0]) < fs["time"].chunks[0]


@pytest.mark.parametrize("value", ["3", "1000", "100KiB", "0"])
def test_a_page_size_that_hdf5_cannot_use_is_refused_before_any_work(shot_file: Path, tmp_path: Path, value: str) -> None:
    from typer.testing import CliRunner

    from layoutkit.cli import app

    result = CliRunner().invoke(app, ["reorder", str(shot_file), str(tmp_path / "out.h5"), "--page-size", value])
    assert result.exit_code == 2, result.output
    assert "Expected a page size that is a power of two of at least 512 B" in " ".join(result.output.split())
    assert "Traceback" not in result.output and list(tmp_path.iterdir()) == []


class _ReadLog:
    """A file h5py reads through, which keeps where each read started and how long it was."""

    def __init__(self, path: Path) -> None:
        self.f = open(path, "rb")  # noqa: SIM115 - closed by the test
        self.reads: list[tuple[int, int]] = []

    def __getattr__(self, name: str):  # noqa: ANN204 - seek, tell and the rest, as the file has them
        return getattr(self.f, name)

    def readinto(self, buffer) -> int:  # noqa: ANN001
        self.reads.append((self.f.tell(), len(buffer)))
        return self.f.readinto(buffer)

    def taken(self) -> list[int]:
        """Where the reads since the last call started, but for those of a global heap
        collection (a variable-length string attribute's bytes: raw data to HDF5)."""
        heaps = []
        for offset, _ in self.reads:
            head = self._head(offset, 16)
            if head[:4] == b"GCOL":
                heaps.append((offset, offset + int.from_bytes(head[8:16], "little")))
        out = [offset for offset, _ in self.reads if not any(a <= offset < b for a, b in heaps)]
        self.reads.clear()
        return out

    def _head(self, offset: int, size: int) -> bytes:
        here = self.f.tell()
        self.f.seek(offset)
        head = self.f.read(size)
        self.f.seek(here)
        return head


def test_a_shots_metadata_lies_together_and_the_recipe_in_the_first_block(tmp_path: Path) -> None:
    """What a reader in a bucket pays a GET for: opening reads the first block alone (the
    superblock's extension was moved to the end of the metadata on closing while free
    space was persisted; the recipe was added last, and as a variable-length string
    in a global heap on a raw-data page), and one shot's groups, datasets and the
    attributes attaching their scales added lie together (they were made all groups,
    then all datasets, then attached: three places tens of MiB apart at 50,000 shots)."""
    import json
    import struct

    src, out = tmp_path / "s.h5", tmp_path / "by-shot.h5"
    with h5py.File(src, "w", libver="latest") as f:  # 120 shots of 5 signals on a time base of the shot's
        for k in range(120):
            g = f.create_group(f"shots/{1_000_000 + k}")
            g.attrs["shot"] = 1_000_000 + k
            t = g.create_dataset("t", data=np.arange(100.0))
            t.make_scale("t")
            t.attrs["units"] = "s"
            for j in range(5):
                d = g.create_dataset(f"signals/sig{j}", data=np.arange(100, dtype="f4") * j)
                d.dims[0].attach_scale(t)
                d.attrs["units"] = "V"
    reorder(src, out, ReorderOptions(by="shot"))
    head = out.read_bytes()[:48]
    extension = struct.unpack("<Q", head[20:28])[0]  # superblock version 2 or 3, 8-byte addresses
    assert head[8] >= 2 and extension < 64 * 1024

    log = _ReadLog(out)
    try:
        with h5py.File(log, "r") as f:
            page = f.id.get_create_plist().get_file_space_page_size()
            assert max(log.taken()) < 64 * 1024
            assert json.loads(f.attrs["layoutkit"])["command"] == "reorder"
            assert max(log.taken(), default=0) < 64 * 1024
            beyond = 0
            for shot in ("1000007", "1000060", "1000119"):
                g = f[f"/shots/{shot}"]
                log.taken()  # the lookup of its name in /shots, and its header
                dict(g.attrs)
                for ds in [*g["signals"].values(), g["t"]]:  # by the group: no second lookup of its name
                    dict(ds.attrs)
                    assert [len(s) for s in ds.dims[0].values()] in ([], [len(ds)])
                # past the first page (the superblock, the root, the links of every shot: what
                # a reader fetches when it opens the file)
                own = [offset for offset in log.taken() if offset >= page]
                assert max(own, default=0) - min(own, default=0) < 16 * 1024, (shot, sorted(own))
                beyond += bool(own)
            assert beyond >= 2  # the later shots' metadata is past the first page: the check checked
    finally:
        log.f.close()
