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
from layoutkit.layouts import LAYOUTS, get_layout, layout_for, layouts_of, targets
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
    assert {"shot-major", "signal-major", "shot-packed", "hdf5-paged", "npy-folder"} <= set(LAYOUTS)
    assert get_layout("npy-folder").command == "export"
    with pytest.raises(InvalidOptionError, match="shot-major, signal-major, shot-packed, hdf5-paged") as err:
        get_layout("parquet")
    assert "'parquet'" in str(err.value)


def _installed_as_a_plugin(site: Path, value: str) -> dict[str, str]:
    """What ``pip install`` of a package declaring the example layout under the
    ``layoutkit.layouts`` entry-point group leaves: its dist-info, on the path."""
    info = site / "npy_layout_example-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: npy-layout-example\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[layoutkit.layouts]\nnpy-folder = {value}\n")
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
        "assert 'npy-folder' in LAYOUTS and [l.name for l in layouts_of('export')] == ['npy-folder']\n"
        "layout = get_layout('npy-folder')\n"
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
    assert "npy-folder" not in out.stdout and "hdf5-paged" in out.stdout
    assert "the layout entry point 'npy-folder' (no_such_module:Layout) does not load" in out.stderr


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
    assert [layout.name for layout in layouts_of("export")] == ["npy-folder"]
    with pytest.raises(InvalidOptionError, match="Expected --layout shot-major, signal-major, shot-packed or virtual. Got 'diagonal'"):
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
    from layoutkit.archiving.append import append
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
