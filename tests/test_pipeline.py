"""The pipeline, the registry and the storage seam, with the example layout (examples/npy_layout):
a layout written outside layoutkit runs through the same sequence and passes the same
round-trip tests as the shipped ones."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from layoutkit.convert import ConvertOptions
from layoutkit.errors import InvalidOptionError, LayoutkitError
from layoutkit.layouts import LAYOUTS, get_layout, layout_for, targets
from layoutkit.reorder import ReorderOptions
from layoutkit.storage import LocalDestination
from layoutkit.testing import LayoutTests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
from npy_layout import NpyFolder, NpyOptions  # noqa: E402 - the example layout, a package outside layoutkit


@pytest.fixture(autouse=True)
def registered(monkeypatch) -> None:
    """The one registry line a new layout needs."""
    monkeypatch.setitem(LAYOUTS, NpyFolder.name, NpyFolder())


class TestExampleLayoutConformance(LayoutTests):
    """The example layout passes the suite every layout runs: written, read back by
    ``layoutkit.open`` (which finds it through the registry), proved equal by its own
    comparator, which finds a changed value; a bucket or Icechunk, which it does not
    write to, refused in one sentence."""

    layout = NpyFolder()
    options = NpyOptions()
    reads_like_source = False  # its reader gives the arrays, without time bases as coordinates


def _inventory(src: Path):  # noqa: ANN202
    from layoutkit.hdf5.inventory import read_inventory

    return read_inventory(src)


# -- the registry -------------------------------------------------------------------------


def test_registry_names_every_layout_and_refuses_unknown_ones() -> None:
    assert {"shot-major", "signal-major", "shot-packed", "hdf5-paged", "npy"} <= set(LAYOUTS)
    assert get_layout("npy").command == "convert" and get_layout("npy-folder") is get_layout("npy")
    with pytest.raises(InvalidOptionError, match="shot-major, signal-major, shot-packed, hdf5-paged") as err:
        get_layout("parquet")
    assert "'parquet'" in str(err.value)


def _installed_as_a_plugin(site: Path, value: str) -> dict[str, str]:
    """What ``pip install`` of a package declaring the example layout under the
    ``layoutkit.layouts`` entry-point group leaves: its dist-info, on the path."""
    info = site / "npy_layout_example-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: npy-layout-example\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[layoutkit.layouts]\nnpy = {value}\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "examples"), str(ROOT)])}


def test_a_layout_of_another_package_registers_through_an_entry_point(tmp_path: Path) -> None:
    """No line in layoutkit: the entry point alone, and the layout is listed, found by
    name, written by the pipeline and opened by layoutkit.open."""
    env = _installed_as_a_plugin(tmp_path / "site", "npy_layout:NpyFolder")
    src = tmp_path / "s.h5"
    from layoutkit.sample import write_sample

    write_sample(src, shots=2, signals=3, seed=1)
    code = (
        "import layoutkit, sys\n"
        "from layoutkit import pipeline\n"
        "from layoutkit.layouts import LAYOUTS, get_layout, layouts_of\n"
        "assert 'npy' in LAYOUTS and [l.name for l in layouts_of('convert')][-1] == 'npy'\n"
        "layout = get_layout('npy')\n"
        "pipeline.run(layout, sys.argv[1], sys.argv[2], layout.default_options())\n"
        "with layoutkit.open(sys.argv[2]) as got: print(type(got).__name__, len(got.arrays()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(src), str(tmp_path / "out.npy")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    name, arrays = out.stdout.split()
    assert name == "NpyArchive" and int(arrays) > 0


def test_an_entry_point_that_does_not_load_is_said_and_left_out(tmp_path: Path) -> None:
    env = _installed_as_a_plugin(tmp_path / "site", "no_such_module:Layout")
    code = "import warnings\nfrom layoutkit.layouts import LAYOUTS\nprint(sorted(LAYOUTS))"
    out = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "'npy'" not in out.stdout and "hdf5-paged" in out.stdout
    assert "the layout entry point 'npy' (no_such_module:Layout) does not load" in out.stderr


def test_a_command_on_an_own_layout_does_not_read_the_entry_points(tmp_path: Path) -> None:
    """Reading the entry points scans every installed package (20-30 ms of a command's
    start-up): a command naming one of layoutkit's own layouts finds it without them;
    asking for the list still reads them."""
    env = _installed_as_a_plugin(tmp_path / "site", "npy_layout:NpyFolder")
    code = (
        "from layoutkit.layouts import LAYOUTS, layout_for\n"
        "from layoutkit.convert import ConvertOptions\n"
        "print(layout_for('convert', ConvertOptions(layout='virtual')).name, LAYOUTS._loaded)\n"
        "print(layout_for('convert', ConvertOptions(layout='npy')).name, LAYOUTS._loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["virtual", "False", "npy", "True"]


@pytest.mark.parametrize(("old", "name"), [
    ("zarr-mirror", "shot-major"), ("shot", "shot-major"), ("zarr-signal", "signal-major"), ("signal", "signal-major"),
    ("zarr-shot-packed", "shot-packed"),
])
def test_former_spellings_still_find_their_layout(old: str, name: str) -> None:
    assert get_layout(old) is get_layout(name) and get_layout(name).name == name


def test_commands_find_their_layouts_in_the_registry() -> None:
    assert layout_for("convert", ConvertOptions()).name == "shot-major"
    assert layout_for("convert", ConvertOptions(layout="signal-major")).name == "signal-major"
    assert layout_for("reorder", ReorderOptions(by="signal")).name == "hdf5-paged"
    assert layout_for("convert", NpyOptions()).name == "npy"  # its options alone name it
    with pytest.raises(InvalidOptionError, match="Expected layout shot-major, signal-major, shot-packed, virtual or npy. Got 'diagonal'"):
        layout_for("convert", ConvertOptions(layout="diagonal"))
    # recipe targets come from the layouts: both Zarr layouts share one target and its keys
    assert targets()["zarr"].options_class is ConvertOptions
    assert targets()["hdf5-paged"].options_class is ReorderOptions
    assert get_layout("signal-major").recipe_keys == get_layout("shot-major").recipe_keys


# -- the storage seam: staging left by a killed run -------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_staging_of_a_dead_process_is_removed(tmp_path: Path) -> None:
    dest = LocalDestination(tmp_path / "out.zarr")
    dead = tmp_path / f".out.zarr.layoutkit-tmp-{_host()}-{_dead_pid()}-0123abcd"
    alive = tmp_path / f".out.zarr.layoutkit-tmp-{_host()}-{os.getpid()}-4567cdef"
    other_host = tmp_path / f".out.zarr.layoutkit-tmp-elsewhere-{_dead_pid()}-89abcdef"
    other_dest = tmp_path / f".other.zarr.layoutkit-tmp-{_host()}-{_dead_pid()}-0123abcd"
    for d in (dead, alive, other_host, other_dest):
        (d / "c").mkdir(parents=True)
    assert dest.stale() == [dead]
    staged = dest.stage()
    assert not dead.exists() and alive.exists() and other_host.exists() and other_dest.exists()
    assert staged.parent == tmp_path and not staged.exists()


def _host() -> str:
    from layoutkit.storage.local import _host as host

    return host()


def test_a_killed_convert_is_cleaned_up_by_the_next_run(tmp_path: Path) -> None:
    """SIGKILL leaves the staging directory; the next run to the same destination removes
    it and succeeds without --overwrite."""
    from layoutkit.sample import write_sample

    src = write_sample(tmp_path / "shots.h5", shots=2, signals=70, seed=3).path
    dst = tmp_path / "out.zarr"
    cmd = [sys.executable, "-m", "layoutkit", "-q", "convert", str(src), str(dst),
           "--chunk-size", "4KiB", "--workers", "1", "--compressor", "gzip:9"]
    proc = subprocess.Popen(cmd)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".out.zarr.layoutkit-tmp-*/zarr.json")) and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = list(tmp_path.glob(".out.zarr.layoutkit-tmp-*"))
    assert len(left) == 1 and not dst.exists(), "the run ended before it was killed"
    subprocess.run(cmd, check=True)
    assert dst.is_dir() and list(tmp_path.glob(".out.zarr.layoutkit-*")) == []


def test_open_verify_and_append_decide_the_layout_once_with_one_error(tmp_path: Path) -> None:
    """A store of a layout this layoutkit does not know: layoutkit.open, verify and
    convert --append all say so in the same sentence (layoutkit.layouts.detect)."""
    import json

    import zarr

    import layoutkit
    from layoutkit.appending.append import append
    from layoutkit.errors import UnknownLayoutError
    from layoutkit.formats import LAYOUT_ATTR, PROVENANCE_ATTR
    from layoutkit.sample import write_sample
    from layoutkit.verify.equality import compare_variant

    src = write_sample(tmp_path / "s.h5", shots=1, signals=2, seed=1).path
    store = tmp_path / "diagonal.zarr"
    zarr.open_group(store, mode="w", zarr_format=3).attrs.update(
        {LAYOUT_ATTR: {"name": "diagonal"}, PROVENANCE_ATTR: json.dumps({"command": "convert", "recipe": {}})})
    said = f"{store} holds the Zarr layout 'diagonal', which this layoutkit does not know (it knows "
    with pytest.raises(LayoutkitError) as opened:
        layoutkit.open(store)
    with pytest.raises(UnknownLayoutError) as verified:
        compare_variant(src, store)
    with pytest.raises(UnknownLayoutError) as appended:
        append([str(src)], store)
    messages = {str(e.value) for e in (opened, verified, appended)}
    assert len(messages) == 1 and messages.pop().startswith(said)


# -- the skeleton written while the tasks run ------------------------------------------


@pytest.fixture
def small_source(tmp_path: Path) -> Path:
    from layoutkit.sample import write_sample

    return Path(write_sample(tmp_path / "s.h5", shots=2, signals=6, seed=3).path)


def test_the_copy_runs_while_the_skeleton_is_written_and_the_store_is_whole(small_source: Path, tmp_path: Path,
                                                                              monkeypatch) -> None:
    """convert's tasks start before the skeleton's documents are all written (they run
    in this process, from the documents the writer holds), and the published store has
    every document and equals the source."""
    import threading

    from layoutkit.convert import convert
    from layoutkit.layouts.shot_major import write as shot_major_write
    from layoutkit.verify.equality import compare_variant
    from layoutkit.writers.zarr_ import ZarrWriter

    copied = threading.Event()
    waited: list[bool] = []
    real_node, real_task = ZarrWriter._write_node, shot_major_write.copy_task

    def late_node(self, node, files):  # noqa: ANN001, ANN202
        if node.count("/") >= 3:  # an array's documents: only once a task has copied
            waited.append(copied.wait(timeout=30))
        real_node(self, node, files)

    def copying(job, task):  # noqa: ANN001, ANN202
        done = real_task(job, task)
        copied.set()
        return done

    monkeypatch.setattr(ZarrWriter, "_write_node", late_node)
    monkeypatch.setattr(shot_major_write, "copy_task", copying)
    dst = tmp_path / "out.zarr"
    convert(small_source, dst, ConvertOptions(workers=2))
    assert waited and all(waited)  # the documents waited for a copied task, which did not wait for them
    import zarr

    group = zarr.open_group(dst, mode="r")
    assert len(list(group["shots"].group_keys())) == 2
    assert compare_variant(small_source, dst) == []


def test_a_failed_copy_stops_the_skeleton_before_the_store_is_removed(small_source: Path, tmp_path: Path,
                                                                      monkeypatch) -> None:
    """A task that fails while the skeleton's documents are still being written: the run
    stops them, then removes what it wrote, so no document appears afterwards in a
    removed store and nothing is left beside the destination."""
    import threading

    from layoutkit.convert import convert
    from layoutkit.layouts.shot_major import write as shot_major_write
    from layoutkit.writers.zarr_ import ZarrWriter

    failed = threading.Event()
    real_node = ZarrWriter._write_node
    written: list[str] = []

    def slow_node(self, node, files):  # noqa: ANN001, ANN202 - a level of the hierarchy per 0.5 s
        time.sleep(0.5)
        stopped = self._stop.is_set()
        real_node(self, node, files)
        if not stopped:
            written.append(node)

    def failing(job, task):  # noqa: ANN001, ANN202
        failed.set()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ZarrWriter, "_write_node", slow_node)
    monkeypatch.setattr(shot_major_write, "copy_task", failing)
    dst = tmp_path / "out.zarr"
    with pytest.raises(LayoutkitError, match="no space left"):
        convert(small_source, dst, ConvertOptions(workers=2))
    assert failed.is_set()
    time.sleep(1.0)  # a writer still running would create folders again now
    assert len(written) < 5  # of 31 nodes, written a level at a time (the root first): the rest were not
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.h5"]


def test_a_skeleton_that_cannot_be_written_is_one_sentence(small_source: Path, tmp_path: Path, monkeypatch) -> None:
    """An error of the file system met by the skeleton's writer in the background ends
    the run as the same sentence it would have met in front, and nothing is left."""
    from layoutkit.convert import convert
    from layoutkit.errors import OutputNotWritableError
    from layoutkit.writers.zarr_ import ZarrWriter

    real_node = ZarrWriter._write_node

    def refused(self, node, files):  # noqa: ANN001, ANN202
        if node.count("/") >= 3:
            raise PermissionError(13, "Permission denied")
        real_node(self, node, files)

    monkeypatch.setattr(ZarrWriter, "_write_node", refused)
    dst = tmp_path / "out.zarr"
    with pytest.raises(OutputNotWritableError, match=r"cannot be written \(Permission denied\)"):
        convert(small_source, dst, ConvertOptions(workers=2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.h5"]


def test_an_icechunk_destination_gets_its_skeleton_before_any_chunk(small_source: Path, tmp_path: Path,
                                                                   monkeypatch) -> None:
    """Icechunk refuses a chunk of an array it does not hold yet: there the skeleton is
    written before the tasks, however slowly its documents go."""
    from layoutkit.convert import convert
    from layoutkit.verify.equality import compare_variant
    from layoutkit.writers.zarr_ import ZarrWriter

    real_node = ZarrWriter._write_node

    def slow_node(self, node, files):  # noqa: ANN001, ANN202
        if node.count("/") >= 3:
            time.sleep(0.05)
        real_node(self, node, files)

    monkeypatch.setattr(ZarrWriter, "_write_node", slow_node)
    repo = f"icechunk:{tmp_path / 'repo'}"
    convert(small_source, repo, ConvertOptions(workers=2))
    assert compare_variant(small_source, repo) == []
