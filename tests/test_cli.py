"""The command line: every bad input gives one plain sentence, a non-zero exit, no
traceback, no destination left behind, and an untouched source."""

from __future__ import annotations

import hashlib
import importlib
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

shot_major_write = importlib.import_module("layoutkit.layouts.shot_major.write")  # the task function of a shot-major convert
from layoutkit.cli import app

runner = CliRunner()


def digest(path: Path) -> tuple[str, float]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime


def leftovers(folder: Path, name: str) -> list[str]:
    return [p.name for p in folder.iterdir() if name in p.name]


def run(*args: str):
    return runner.invoke(app, ["--quiet", *map(str, args)])


def assert_refused(result, *words: str) -> None:
    assert result.exit_code != 0, result.output
    text = result.output
    assert "Traceback" not in text
    assert text.strip().startswith("error:"), text
    assert len(text.strip().splitlines()) <= 3, text  # one sentence (may wrap)
    for w in words:
        assert w in text.replace("\n", " "), text


@pytest.fixture
def good_h5(tmp_path: Path) -> Path:
    path = tmp_path / "good.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(10000, dtype="f8"), chunks=(1000,), compression="gzip")
        f.create_dataset("y", data=np.arange(10, dtype="i2"))
    return path


def test_convert_ok_prints_summary(good_h5: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["convert", str(good_h5), str(tmp_path / "out.zarr")])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())  # rich wraps at 80 columns, wherever the tmp path ends
    assert "converted" in said and "2 arrays" in said
    assert (tmp_path / "out.zarr" / "zarr.json").exists()


def test_dry_run_prints_plan_and_writes_nothing(good_h5: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["convert", str(good_h5), str(tmp_path / "out.zarr"), "--dry-run", "--shards", "auto"])
    assert result.exit_code == 0, result.output
    assert "/x" in result.output and "zstd:3" in result.output and "raw" in result.output
    assert not (tmp_path / "out.zarr").exists()


def test_missing_source(tmp_path: Path) -> None:
    assert_refused(run("convert", tmp_path / "nope.h5", tmp_path / "out.zarr"), "does not exist")
    assert not (tmp_path / "out.zarr").exists()


def test_directory_source(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    assert_refused(run("convert", tmp_path / "d", tmp_path / "out.zarr"), "is a directory")


def test_text_file(tmp_path: Path) -> None:
    src = tmp_path / "notes.h5"
    src.write_text("shot,signal\n1,ip\n")
    before = digest(src)
    assert_refused(run("convert", src, tmp_path / "out.zarr"), "not an HDF5 file")
    assert digest(src) == before
    assert not (tmp_path / "out.zarr").exists()


def test_netcdf3(tmp_path: Path) -> None:
    import netCDF4

    src = tmp_path / "classic.nc"
    with netCDF4.Dataset(src, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("x", 3)
        nc.createVariable("v", "f4", ("x",))[:] = [1, 2, 3]
    assert_refused(run("convert", src, tmp_path / "out.zarr"), "netCDF-3", "nccopy")


@pytest.mark.parametrize("keep", [0.5, 0.05], ids=["half", "header-only"])
def test_truncated(good_h5: Path, tmp_path: Path, keep: float) -> None:
    src = tmp_path / "cut.h5"
    data = good_h5.read_bytes()
    src.write_bytes(data[: int(len(data) * keep)])
    before = digest(src)
    result = run("convert", src, tmp_path / "out.zarr")
    assert_refused(result, str(src))
    assert "truncated" in result.output or "damaged" in result.output
    assert digest(src) == before
    assert not (tmp_path / "out.zarr").exists() and not leftovers(tmp_path, "out.zarr")


def test_corrupt_chunk_names_dataset_and_chunk(good_h5: Path, tmp_path: Path) -> None:
    with h5py.File(good_h5, "r") as f:
        info = f["x"].id.get_chunk_info(3)
    with open(good_h5, "r+b") as fh:  # garble the middle of chunk 3's deflate stream
        fh.seek(info.byte_offset + 2)
        fh.write(b"\xff" * min(64, info.size - 4))
    result = run("convert", good_h5, tmp_path / "out.zarr")
    assert_refused(result, "'/x'", f"({info.chunk_offset[0]},)")
    assert not (tmp_path / "out.zarr").exists() and not leftovers(tmp_path, "out.zarr")


def make_unknown_filter_file(path: Path) -> None:
    """An LZF dataset whose filter id is patched to 32099, which no plugin provides.

    The earliest file format has no object-header checksums, so the patch stays valid:
    filter pipeline message v1 = id(u16), name length(u16), flags(u16), nvalues(u16), name.
    """
    with h5py.File(path, "w", libver="earliest") as f:
        f.create_dataset("secret", data=np.arange(1000, dtype="f4"), chunks=(100,), compression="lzf")
    data = bytearray(path.read_bytes())
    at = data.find(b"lzf\x00")
    assert at > 8 and data[at - 8 : at - 6] == (32000).to_bytes(2, "little")
    data[at - 8 : at - 6] = (32099).to_bytes(2, "little")
    path.write_bytes(bytes(data))


def test_unknown_filter(tmp_path: Path) -> None:
    src = tmp_path / "filtered.h5"
    make_unknown_filter_file(src)
    assert_refused(run("convert", src, tmp_path / "out.zarr"), "'/secret'", "32099", "hdf5plugin")
    assert not (tmp_path / "out.zarr").exists()


def test_existing_destination(good_h5: Path, tmp_path: Path) -> None:
    dst = tmp_path / "out.zarr"
    dst.mkdir()
    (dst / "keep.txt").write_text("precious")
    assert_refused(run("convert", good_h5, dst), "exists", "--overwrite")
    assert (dst / "keep.txt").read_text() == "precious"
    # with --overwrite the old store is replaced only once the new one is complete
    assert run("convert", good_h5, dst, "--overwrite").exit_code == 0
    assert not (dst / "keep.txt").exists() and (dst / "zarr.json").exists()


def test_destination_not_writable(good_h5: Path, tmp_path: Path) -> None:
    assert_refused(run("convert", good_h5, tmp_path / "missing-folder" / "out.zarr"), "does not exist")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_refused(run("convert", good_h5, blocker / "out.zarr"), "not a folder")
    # procfs refuses new folders even to root
    assert_refused(run("convert", good_h5, "/proc/layoutkit-test.zarr"), "cannot be written")


def test_interrupt_mid_way_leaves_nothing(good_h5: Path, tmp_path: Path, monkeypatch) -> None:
    calls = {"n": 0}
    real = shot_major_write.copy_task

    def interrupting(job, task):
        calls["n"] += 1
        real(job, task)
        raise KeyboardInterrupt

    monkeypatch.setattr(shot_major_write, "copy_task", interrupting)
    before = digest(good_h5)
    result = run("convert", good_h5, tmp_path / "out.zarr", "--chunk-size", "8KiB", "--workers", "1")
    assert result.exit_code == 130
    assert "interrupted" in result.output
    assert calls["n"] == 1
    assert not (tmp_path / "out.zarr").exists() and not leftovers(tmp_path, "out.zarr")
    assert digest(good_h5) == before


@pytest.mark.parametrize(
    "option, value, expected",
    [
        ("--compressor", "zstd:99", "level from 1 to 22"),
        ("--compressor", "snappy", "Expected a compressor"),
        ("--chunks", "0,3", "Expected --chunks"),
        ("--chunk-size", "4 parsecs", "Expected a --chunk-size"),
        ("--shards", "many", "Expected --shards"),
        ("--workers", "0", "1 or more"),
        ("--scheduler", "mpi", "Expected --scheduler"),
        ("--memory-limit", "-1", "Expected a memory limit"),
    ],
)
def test_bad_option_values(good_h5: Path, tmp_path: Path, option: str, value: str, expected: str) -> None:
    result = run("convert", good_h5, tmp_path / "out.zarr", option, value)
    assert_refused(result, expected)
    assert result.exit_code == 2


def test_python_dash_m(good_h5: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "layoutkit", "convert", str(good_h5), str(tmp_path / "o.zarr"), "--dry-run"],
        capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "/x" in out.stdout


@pytest.mark.parametrize("command", ["convert", "reorder"])
def test_both_commands_refuse_bad_sources_alike(command: str, tmp_path: Path) -> None:
    text = tmp_path / "notes.h5"
    text.write_text("not hdf5")
    dst = tmp_path / ("out.zarr" if command == "convert" else "out.h5")
    assert_refused(run(command, tmp_path / "missing.h5", dst), "does not exist")
    assert_refused(run(command, text, dst, *(["--by", "group"] if command == "reorder" else [])), "not an HDF5 file")
    assert not dst.exists() and not leftovers(tmp_path, dst.name)


def test_reorder_existing_destination_and_interrupt(good_h5: Path, tmp_path: Path, monkeypatch) -> None:
    dst = tmp_path / "out.h5"
    dst.write_bytes(b"precious")
    assert_refused(run("reorder", good_h5, dst, "--by", "group"), "exists", "--overwrite")
    assert dst.read_bytes() == b"precious"
    hdf5_paged = importlib.import_module("layoutkit.layouts.hdf5_paged.write")
    real = hdf5_paged.make_piece

    def interrupting(*args):
        real(*args)
        raise KeyboardInterrupt

    monkeypatch.setattr(hdf5_paged, "make_piece", interrupting)
    before = digest(good_h5)
    result = run("reorder", good_h5, tmp_path / "new.h5", "--by", "group", "--workers", "1")
    assert result.exit_code == 130 and "interrupted" in result.output
    assert not (tmp_path / "new.h5").exists() and not leftovers(tmp_path, "new.h5")
    assert digest(good_h5) == before



def test_an_interrupt_h5py_turned_into_a_system_error_is_still_an_interrupt(good_h5: Path, tmp_path: Path,
                                                                             monkeypatch) -> None:
    """Ctrl-C while h5py iterates attributes (it calls Python back from C) comes out as a
    SystemError chained to the KeyboardInterrupt; seen once in the kill sweep under load.
    It ends as an interrupt: one line, exit 130, nothing written, no traceback."""
    hdf5_paged = importlib.import_module("layoutkit.layouts.hdf5_paged.write")
    real = hdf5_paged.make_piece

    def interrupted_inside_h5py(*args):
        real(*args)
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("<built-in method iterate> returned a result with an exception set")  # noqa: B904

    monkeypatch.setattr(hdf5_paged, "make_piece", interrupted_inside_h5py)
    result = run("reorder", good_h5, tmp_path / "new.h5", "--by", "group", "--workers", "1")
    assert result.exit_code == 130 and "interrupted" in result.output, result.output
    assert "Traceback" not in result.output and "SystemError" not in result.output
    assert not (tmp_path / "new.h5").exists() and not leftovers(tmp_path, "new.h5")

def test_version() -> None:
    from layoutkit import __version__

    for result in (runner.invoke(app, ["--version"]),):
        assert result.exit_code == 0 and result.output.strip() == f"layoutkit {__version__}"
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "layoutkit", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"layoutkit {__version__}"


def test_summaries_say_sizes_one_way(good_h5: Path, tmp_path: Path) -> None:
    """convert and reorder say the output's size against the source's in the same words;
    --shards auto on arrays too small to shard says so."""
    converted = runner.invoke(app, ["convert", str(good_h5), str(tmp_path / "out.zarr"), "--shards", "auto"])
    assert converted.exit_code == 0, converted.output
    said = " ".join(converted.output.split())
    assert "x the source's size" in said and "ratio" not in said
    assert "no array large enough to shard" in said
    reordered = runner.invoke(app, ["reorder", str(good_h5), str(tmp_path / "out.h5"), "--by", "group"])
    assert reordered.exit_code == 0, reordered.output
    assert "x the source's size" in " ".join(reordered.output.split())


@pytest.mark.parametrize("option, value, words", [
    ("--zarr-format", "5", "Expected --zarr-format 2 or 3. Got '5'."),
    ("--layout", "diagonal", "Expected --layout shot-major, signal-major, shot-packed or virtual. Got 'diagonal'."),
    ("--order", "diagonal", "Expected --layout shot-major, signal-major, shot-packed or virtual. Got 'diagonal'."),
])
def test_choices_are_refused_in_one_sentence(good_h5: Path, tmp_path: Path, option: str, value: str, words: str) -> None:
    result = run("convert", good_h5, tmp_path / "out.zarr", option, value)
    assert_refused(result, words)
    assert "Value error" not in result.output and "Invalid value" not in result.output
    assert_refused(run("reorder", good_h5, tmp_path / "out.h5", "--by", "diagonal"),
                   "Expected --by shot, signal or group. Got 'diagonal'.")


def test_sample_command_takes_a_rate_factor_and_refuses_a_bad_one(tmp_path: Path) -> None:
    out = tmp_path / "fast.h5"
    result = runner.invoke(app, ["sample", str(out), "--shots", "1", "--signals", "3", "--rate-factor", "2"])
    assert result.exit_code == 0, result.output
    with h5py.File(out, "r") as f:
        assert "2x faster" in f.attrs["title"]
    bad = runner.invoke(app, ["sample", str(tmp_path / "never.h5"), "--shots", "1", "--rate-factor", "0"])
    assert bad.exit_code == 2 and "Expected rate factor to be an integer of at least 1" in bad.output
    assert "Traceback" not in bad.output and not (tmp_path / "never.h5").exists()


def test_the_walk_before_the_bar_shows_a_spinner_on_a_terminal_only(monkeypatch) -> None:
    """convert and reorder walk the source's metadata before their bar can start: on a
    terminal a spinner says so; without one, or with -q, nothing is printed."""
    import io
    from contextlib import nullcontext

    from rich.console import Console
    from rich.status import Status

    import layoutkit.cli.core as cli
    import layoutkit.cli.running as running
    from layoutkit.cli.running import status

    monkeypatch.setattr(running, "console", Console(file=io.StringIO(), force_terminal=True))
    monkeypatch.setattr(cli.State, "quiet", False)
    assert isinstance(status("convert: reading"), Status)
    monkeypatch.setattr(cli.State, "quiet", True)
    assert isinstance(status("convert: reading"), nullcontext)
    monkeypatch.setattr(cli.State, "quiet", False)
    monkeypatch.setattr(running, "console", Console(file=io.StringIO(), force_terminal=False))
    assert isinstance(status("convert: reading"), nullcontext)


def test_convert_takes_its_sources_from_a_list_alone(good_h5, tmp_path):
    """`convert --sources-from LIST DST` (as the docs show it): the one argument is the
    destination; one argument without a list is refused in one sentence."""
    from layoutkit.verify.equality import compare_variant

    listing = tmp_path / "sources.txt"
    listing.write_text(f"{good_h5}\n")
    result = run("convert", "--sources-from", listing, tmp_path / "listed.zarr")
    assert result.exit_code == 0, result.output
    assert compare_variant(good_h5, tmp_path / "listed.zarr") == []
    assert_refused(run("convert", good_h5), "Expected SRC... DST", "Got only")


def test_the_command_starts_numpy_without_blas_threads() -> None:
    """The command's processes (and the walkers they spawn, which inherit it) start
    OpenBLAS with one thread, unless the user chose a number."""
    import os
    import subprocess
    import sys

    probe = ("import layoutkit.__main__, numpy, os; "
             "print(os.environ['OPENBLAS_NUM_THREADS'], numpy.__config__.CONFIG is not None)")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    ours = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert ours.stdout.split() == ["1", "True"]
    theirs = subprocess.run([sys.executable, "-c", probe], env={**env, "OPENBLAS_NUM_THREADS": "3"},
                            capture_output=True, text=True, check=True)
    assert theirs.stdout.split() == ["3", "True"]


def test_the_command_collects_garbage_less_often_than_pythons_default() -> None:
    """The command's processes (the walkers import the same module) run the cyclic
    collector once per 100,000 new objects, not per 2,000: a large walk and skeleton
    are hundreds of thousands of long-lived objects."""
    import subprocess
    import sys

    default = subprocess.run([sys.executable, "-c", "import gc; print(gc.get_threshold()[0])"],
                             capture_output=True, text=True, check=True)
    ours = subprocess.run([sys.executable, "-c", "import gc, layoutkit.__main__; print(gc.get_threshold()[0])"],
                          capture_output=True, text=True, check=True)
    assert int(ours.stdout) == 100_000 > int(default.stdout)


def test_a_command_that_succeeded_ends_without_the_interpreters_teardown(tmp_path: Path) -> None:
    """A successful command ends the process once its output is flushed (no teardown: an
    exit handler does not run, the whole output arrives); a failed one exits as usual."""
    import subprocess
    import sys

    def command(*args: str) -> subprocess.CompletedProcess:
        probe = ("import atexit, sys; atexit.register(lambda: print('torn down', file=sys.stderr)); "
                 f"sys.argv = ['layoutkit', *{list(args)!r}]; from layoutkit.__main__ import main; main()")
        return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)

    helped = command("convert", "--help")
    assert helped.returncode == 0 and "torn down" not in helped.stderr
    assert "Rewrite an HDF5 file" in helped.stdout and helped.stdout.rstrip().endswith("Show this message and exit.")
    failed = command("convert", str(tmp_path / "missing.h5"), str(tmp_path / "out.zarr"))
    assert failed.returncode != 0 and "torn down" in failed.stderr


@pytest.mark.parametrize("command", ["verify", "advise", "sample"])
def test_a_report_or_sample_that_cannot_be_written_is_refused_before_any_work(command: str, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A file where the --out folder should be, a folder under a file, a read-only file
    system: one sentence, exit 2 (not verify's exit 1, "the data differ"), no traceback,
    and nothing measured or written (issue 66)."""
    import os

    from layoutkit.sample import write_sample

    src = tmp_path / "s.h5"
    write_sample(src, shots=2, signals=2, seed=0)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    runs = {
        "verify": lambda out: ["verify", str(src), str(src), "--out", str(out), "--patterns", "open"],
        "advise": lambda out: ["advise", str(src), "--out", str(out), "--budget", "10s"],
        "sample": lambda out: ["sample", str(out / "s.h5" if out.suffix != ".txt" else out)],
    }
    places = [notes / "report"] if command == "sample" else [notes, notes / "report"]
    for out in places:
        result = runner.invoke(app, runs[command](out))
        assert result.exit_code == 2, result.output
        assert "error:" in result.output and "Traceback" not in result.output and "notes.txt" in result.output
        assert result.output.count("error:") == 1
    assert notes.read_text() == "mine"
    # a read-only file system (what the tests, run as root, can still be refused by)
    real = os.statvfs

    class ReadOnly:
        def __init__(self, path: str) -> None:
            self.f_flag = real(path).f_flag | os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", ReadOnly)
    folder = tmp_path / "reports"
    result = runner.invoke(app, runs[command](folder))
    assert result.exit_code == 2 and "read-only file system" in " ".join(result.output.split()), result.output
    assert not folder.exists()


def test_counts_agree_with_their_nouns(tmp_path: Path) -> None:
    """'1 array in 1 group', 'the 1 variant holds', not '1 arrays in 1 groups' (issue 66)."""
    from layoutkit.options import plural

    assert [plural(1, "group"), plural(3, "group"), plural(1200, "array"), plural(0, "shot")] == [
        "1 group", "3 groups", "1,200 arrays", "0 shots"]
    src = tmp_path / "one.h5"
    with h5py.File(src, "w") as f:
        f["x"] = np.arange(4)
    converted = runner.invoke(app, ["convert", str(src), str(tmp_path / "one.zarr")])
    assert converted.exit_code == 0 and "1 array in 1 group" in " ".join(converted.output.split()), converted.output
    verified = runner.invoke(app, ["verify", str(src), str(tmp_path / "one.zarr"), "--patterns", "open", "--repeat", "1"])
    assert verified.exit_code == 0 and "the 1 variant holds exactly the data of one.h5" in " ".join(verified.output.split())


def test_a_dry_run_of_many_arrays_is_a_screen_and_detail_is_asked_for(tmp_path: Path) -> None:
    """--dry-run of an archive of many arrays prints them by kind (904 lines for 4 shots
    before); --detail a row for every array, in convert and in reorder (issue 66)."""
    from layoutkit.sample import write_sample

    src = write_sample(tmp_path / "s.h5", shots=4, signals=12, seed=1).path
    with h5py.File(src) as f:
        arrays = []
        f.visititems(lambda name, obj: arrays.append(name) if isinstance(obj, h5py.Dataset) else None)
    assert len(arrays) > 40
    for command, dest in (("convert", "o.zarr"), ("reorder", "o.h5")):
        short = run(command, src, tmp_path / dest, "--dry-run")
        assert short.exit_code == 0, short.output
        said = " ".join(short.output.split())
        assert len(short.output.splitlines()) <= 30 and "by kind" in said and "add --detail" in said, short.output
        full = run(command, src, tmp_path / dest, "--dry-run", "--detail")
        assert full.exit_code == 0 and len(full.output.splitlines()) > len(arrays) and not (tmp_path / dest).exists()
        if command == "convert":  # a row an array, each naming its codec
            assert full.output.count("zstd:3") >= len(arrays)
        else:  # a row a dataset, numbered in write order
            written = int(re.search(r"(\d+) datasets in write order", " ".join(full.output.split())).group(1))
            assert written > 40 and re.search(rf"│ {written - 1}\s+│", full.output), full.output[-2000:]


def test_a_refused_advise_leaves_no_progress_behind(good_h5: Path, tmp_path: Path) -> None:
    """A value refused before any work is the one sentence: no "advise: sampling 0/None"
    line of a progress bar started before the check (issue 66)."""
    said = runner.invoke(app, ["advise", str(good_h5), "--latency", "1ms,2ms", "--out", str(tmp_path / "a")])
    assert said.exit_code == 2 and "Expected one --latency" in said.output
    assert "advise:" not in said.output and len(said.output.strip().splitlines()) == 1, said.output


WRITES = {
    "sample": lambda src, out: ["sample", str(out / "s.h5"), "--shots", "2", "--signals", "3"],
    "convert": lambda src, out: ["convert", str(src), str(out / "c.zarr"), "--compressor", "none"],
    "reorder": lambda src, out: ["reorder", str(src), str(out / "r.h5")],
    "verify": lambda src, out: ["verify", str(src), str(src), "--out", str(out / "report"), "--patterns", "open",
                                "--repeat", "1"],
    "advise": lambda src, out: ["advise", str(src), "--out", str(out / "advice"), "--budget", "20s"],
}


@pytest.mark.parametrize("command", list(WRITES))
def test_every_write_path_is_refused_before_any_work_in_one_sentence(command: str, tmp_path: Path) -> None:
    """A folder of a file system that makes no files (procfs: root passes ``os.access``
    there, so `verify --out /proc/x` measured everything and then ended in a traceback,
    and `reorder SRC /proc/x.h5` and `sample /proc/x/s.h5` were tracebacks): one sentence,
    exit 2, nothing written, the source untouched (issue 66)."""
    from layoutkit.sample import write_sample

    src = tmp_path / "s.h5"
    write_sample(src, shots=2, signals=3, seed=0)
    before = src.read_bytes()
    # a destination's own folder (a missing one is refused as missing), a report's below it
    where = Path("/proc") if command in ("convert", "reorder") else Path("/proc/layoutkit-test")
    result = runner.invoke(app, WRITES[command](src, where))
    assert result.exit_code == 2, result.output
    assert_refused(result, "/proc")
    assert result.output.count("error:") == 1
    assert src.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["s.h5"]


@pytest.mark.parametrize("command", ["sample", "convert", "reorder", "advise"])
def test_a_disk_that_refuses_more_mid_run_is_one_sentence_and_leaves_nothing(command: str, tmp_path: Path) -> None:
    """A disk that stops taking bytes once the work is under way (a file-size limit in
    the child process, what a full disk is to a writer, without mounting one): one
    sentence naming why, exit 2, no traceback and no bar's last frame above it, no
    partial output, the source untouched. reorder and sample ended in HDF5's
    "Can't decrement id ref count" traceback (issue 66)."""
    import resource
    import subprocess
    import sys

    from layoutkit.sample import write_sample

    src = tmp_path / "s.h5"
    write_sample(src, shots=2, signals=3, seed=0)
    before = src.read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    limit = 32 * 1024  # a sample's file, an uncompressed chunk of it, advise's candidates: each larger

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run([sys.executable, "-m", "layoutkit", *WRITES[command](src, out)], capture_output=True,
                          text=True, preexec_fn=limited, timeout=300)
    said = done.stderr.strip()
    assert done.returncode == 2, (done.stdout, said)
    assert said.startswith("error: The output could not be written") and "Traceback" not in said, said
    assert len(said.splitlines()) <= 3 and "File too large" in " ".join(said.split()), said
    assert src.read_bytes() == before
    assert list(out.iterdir()) == []
