"""convert --append (issue 38): new sources added to a store, in every Zarr layout,
writing only what is new; sources it lists skipped; a killed append leaves the store as
it was; two appends at once: one is refused."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import layoutkit
from layoutkit.appending.append import JOURNAL, PAUSE_ENV, append
from layoutkit.cli import app
from layoutkit.errors import DifferentDuplicateError, LayoutkitError
from layoutkit.layouts import layouts_of
from layoutkit.sample import write_sample
from layoutkit.storage.editing import LOCK, AppendRunningError, FolderEditor, store_log
from layoutkit.testing import assert_same_values
from layoutkit.verify.equality import compare_set, compare_variant

ZARR_LAYOUTS = [layout.name for layout in layouts_of("convert") if "local" in layout.destinations]  # virtual: its own tests
runner = CliRunner()


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, list[Path]]:
    """50 shots as one file, and as 50 files of a shot each."""
    work = tmp_path_factory.mktemp("archive")
    one = write_sample(work / "one.h5", shots=50, signals=3, seed=9).path
    write_sample(work / "files", shots=50, signals=3, seed=9, shots_per_file=1)
    return Path(one), sorted((work / "files").glob("*.h5"), key=lambda p: int(p.stem.split("-")[1]))


def files_of(store: Path) -> dict[str, str]:
    return {p.relative_to(store).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in store.rglob("*") if p.is_file()}


def cli(*args: object):  # noqa: ANN201
    return runner.invoke(app, ["--quiet", *map(str, args)])


@pytest.mark.parametrize("layout", ZARR_LAYOUTS)
def test_thirty_files_then_twenty_appended_is_the_store_of_one_run(archive, tmp_path, layout):
    one, files = archive
    grown, whole = tmp_path / "grown.zarr", tmp_path / "whole.zarr"
    assert cli("convert", *files[:30], grown, "--layout", layout).exit_code == 0
    before = files_of(grown)
    old_nodes = json.loads((grown / "zarr.json").read_text())["attributes"].get("layoutkit_nodes", {})
    result = runner.invoke(app, ["convert", *map(str, files[30:]), str(grown), "--append"])
    assert result.exit_code == 0, result.output
    assert "appended 20 of 20 sources" in " ".join(result.output.split())
    assert cli("convert", *files, whole, "--layout", layout).exit_code == 0
    assert compare_set(files, grown) == [] and compare_variant(one, grown) == []
    with layoutkit.open(grown) as g, layoutkit.open(whole) as w:
        assert g.layout == layout and g.shots == w.shots
        assert_same_values(w, g)
    # only what is new was written: no object of the store changed but its shared documents
    after = files_of(grown)
    changed = {k for k in before if after.get(k) != before[k]}
    shared = {"zarr.json", "layoutkit.json"} | {k for k in before if k.startswith("_shots/")}
    if layout == "signal-major":  # each series grows in place: its documents, its index arrays' last chunk
        nodes = json.loads((grown / "zarr.json").read_text())["attributes"]["layoutkit_nodes"]
        shared |= {f"{g}/zarr.json" for g, node in nodes.items() if "layoutkit_series" in node.get("attributes", {})}
        shared |= {k for k in before if k.startswith("_mirrored/")}
        for path, meta in old_nodes.items():
            if meta.get("node_type") == "array" and not path.startswith("_"):
                shared.add(f"{path}/zarr.json")
                if path.rsplit("/", 1)[-1].startswith("data"):
                    continue  # the data grows from its next chunk boundary: none of its chunks is written again
                last = (int(meta["shape"][0]) - 1) // int(meta["chunk_grid"]["configuration"]["chunk_shape"][0])
                shared |= {f"{path}/c/{last}", *(k for k in before if k.startswith(f"{path}/c/{last}/"))}
    assert changed <= shared, sorted(changed - shared)
    assert not (grown / JOURNAL).exists() and not (grown / LOCK).exists()


def test_the_same_append_twice_writes_nothing_the_second_time(archive, tmp_path, layout="signal-major"):
    """What the command says and records (every layout's store unchanged: the conformance suite)."""
    _, files = archive
    store = tmp_path / "s.zarr"
    assert cli("convert", *files[:3], store, "--layout", layout).exit_code == 0
    assert append(files[3:5], store).new_shots == 2
    before = files_of(store)
    again = runner.invoke(app, ["convert", *map(str, files[:5]), str(store), "--append"])
    assert again.exit_code == 0, again.output
    assert "nothing to append" in again.output and "every one of the 5 sources" in " ".join(again.output.split())
    assert files_of(store) == before
    log = store_log(str(store))
    assert len(log.records) == 5 and log.appends == 1 and [len(e["sources"]) for e in log.entries] == [3, 2]


def test_a_shot_the_store_holds_is_skipped_when_equal_and_refused_when_not(archive, tmp_path):
    import h5py

    _, files = archive
    store = tmp_path / "s.zarr"
    assert cli("convert", *files[:3], store, "--layout", "shot-packed").exit_code == 0
    write_sample(tmp_path / "pairs", shots=50, signals=3, seed=9, shots_per_file=2)  # the same shots, 2 a file
    both = tmp_path / "pairs" / "shots-1160930003.h5"  # shot 3 (in the store, equal) and shot 4
    summary = append([both], store)
    assert (summary.new_shots, summary.known_shots) == (1, 1)
    with layoutkit.open(store) as s:
        assert len(s.shots) == 4
    before = files_of(store)
    changed = tmp_path / "changed.h5"
    changed.write_bytes(files[1].read_bytes())
    with h5py.File(changed, "r+") as f:
        shot = next(iter(f["shots"]))
        f[f"shots/{shot}/signals/ip"][7] += 1
    with pytest.raises(DifferentDuplicateError, match=rf"Shot {shot} is in .*s.zarr and in .*changed.h5 with "
                                                      "different data"):
        append([changed], store)
    assert files_of(store) == before


def test_what_lies_outside_the_shots_must_be_the_stores(archive, tmp_path):
    import h5py

    _, files = archive
    store = tmp_path / "s.zarr"
    assert cli("convert", *files[:2], store).exit_code == 0
    other = tmp_path / "other.h5"
    other.write_bytes(files[5].read_bytes())
    with h5py.File(other, "r+") as f:
        f.attrs["machine"] = "another tokamak"
    before = files_of(store)
    result = cli("convert", other, store, "--append")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "what lies outside them must be what the store holds" in " ".join(result.output.split())
    assert files_of(store) == before


def _paused_append(store: Path, files: list[Path], flag: Path) -> subprocess.Popen:
    """An append in a process of its own, stopped just before its commit (PAUSE_ENV)."""
    proc = subprocess.Popen([sys.executable, "-m", "layoutkit", "--quiet", "convert", *map(str, files), str(store),
                             "--append"], env={**os.environ, PAUSE_ENV: str(flag)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not flag.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return proc


def test_a_killed_append_leaves_the_store_as_it_was_and_the_next_cleans_up(archive, tmp_path, layout="shot-packed"):
    """The next append takes the killed one's lock over and cleans up (the killed
    append's previous state, in every layout: the conformance suite)."""
    _, files = archive
    store = tmp_path / "s.zarr"
    assert cli("convert", *files[:4], store, "--layout", layout).exit_code == 0
    before = files_of(store)
    proc = _paused_append(store, files[4:8], tmp_path / "pause")
    assert (store / JOURNAL).exists()  # it had written the new shots' objects
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with layoutkit.open(store) as s:  # the previous state: the old root, the old lists
        assert len(s.shots) == 4
    assert compare_set(files[:4], store) == []
    result = runner.invoke(app, ["convert", *map(str, files[4:8]), str(store), "--append"])
    assert result.exit_code == 0, result.output  # the killed run's lock is stale: taken over, its objects removed
    assert compare_set(files[:8], store) == []
    assert not (store / JOURNAL).exists() and not (store / LOCK).exists()
    left = {k for k in files_of(store) if k not in before}
    assert all(not k.startswith("_shots/") for k in left)  # the old list went once the new root was in


def test_two_appends_at_once_one_is_refused(archive, tmp_path):
    _, files = archive
    store = tmp_path / "s.zarr"
    assert cli("convert", *files[:2], store, "--layout", "signal-major").exit_code == 0
    proc = _paused_append(store, files[2:4], tmp_path / "pause")
    second = cli("convert", files[4], store, "--append")
    assert second.exit_code != 0 and "Traceback" not in second.output
    assert "Another append to" in second.output and "is running" in second.output
    (tmp_path / "pause").unlink()  # the first goes on, and commits
    assert proc.wait(timeout=120) == 0, proc.communicate()[0]
    assert compare_set(files[:4], store) == []
    with pytest.raises(AppendRunningError):  # the lock, held here by hand
        with FolderEditor(store).lock():
            append([files[4]], store)


def test_append_refuses_what_it_cannot_append_to(archive, tmp_path):
    _, files = archive
    paged = tmp_path / "paged.h5"
    assert cli("reorder", files[0], paged).exit_code == 0
    result = cli("convert", files[1], paged, "--append")
    assert result.exit_code != 0 and "paged HDF5" in " ".join(result.output.split())
    store = tmp_path / "s.zarr"
    assert cli("convert", files[0], store, "--layout", "shot-packed").exit_code == 0
    result = cli("convert", files[1], store, "--append", "--layout", "signal-major")
    assert result.exit_code != 0 and "leave out --layout" in " ".join(result.output.split())
    result = cli("convert", files[1], tmp_path / "none.zarr", "--append")
    assert result.exit_code != 0 and "holds no Zarr v3 store" in " ".join(result.output.split())
    v2 = tmp_path / "v2.zarr"
    assert cli("convert", files[0], v2, "--zarr-format", "2").exit_code == 0
    result = cli("convert", files[1], v2, "--append")
    assert result.exit_code != 0 and "Traceback" not in result.output


@pytest.mark.parametrize("layout", ZARR_LAYOUTS)
def test_appending_the_edge_cases(edge_archive, tmp_path, layout):
    """The edge archive (parts of a series by dtype, scales repeated as same_as, global
    scales, arrays inside shots no packing carries) split in two files: the second
    appended to the store of the first is equal to both, and read as the one file is."""
    import shutil

    import h5py

    from layoutkit.options import parse_shards

    halves = {"a.h5": ["3", "10"], "b.h5": ["1", "2"]}
    for name, dropped in halves.items():
        shutil.copy(edge_archive, tmp_path / name)
        with h5py.File(tmp_path / name, "r+") as f:
            for shot in dropped:
                del f[f"shots/{shot}"]
    store = tmp_path / "s.zarr"
    shards = parse_shards("auto" if layout == "signal-major" else "none")
    layoutkit.convert([tmp_path / "a.h5"], store, layoutkit.ConvertOptions(layout=layout, shards=shards))
    assert append([tmp_path / "b.h5"], store).new_shots == 2
    assert compare_set([tmp_path / "a.h5", tmp_path / "b.h5"], store) == []
    with layoutkit.open(store) as s, layoutkit.open(edge_archive) as whole:
        assert s.shots == whole.shots
        for signal in ("ip", "profile"):  # a signal of every shot: values, attributes, time bases
            got, want = s.signal(signal), whole.signal(signal)
            assert sorted(got) == sorted(want)
            for shot in want:
                np.testing.assert_array_equal(got[shot].values, want[shot].values)
                assert got[shot].attrs == want[shot].attrs
                for coord in want[shot].coords:  # (named by the scale; axes without one are numbered per file)
                    np.testing.assert_array_equal(got[shot][coord].values, want[shot][coord].values)


@pytest.mark.parametrize("packed", [True, False], ids=["stored-decoded", "stored-as-encoded"])
def test_monthly_files_appended_along_time_equal_open_mfdataset(tmp_path, packed):
    """Two months converted, the third appended: the store grows along time (new chunks
    after the last), opens identical to open_mfdataset of the three files, and proves
    equal to them; the same month again writes nothing; an overlapping one is refused."""
    import h5py
    import xarray as xr
    from test_combined import monthly, open_mf, without_provenance

    files = monthly(tmp_path / "era5", packed=packed)
    store = tmp_path / "t2m.zarr"
    assert cli("convert", *files[:2], store).exit_code == 0
    before = files_of(store)
    result = runner.invoke(app, ["convert", str(files[2]), str(store), "--append"])
    assert result.exit_code == 0, result.output
    assert "124 records" in " ".join(result.output.split())
    xr.testing.assert_identical(without_provenance(xr.open_zarr(store).load()), open_mf(files))
    assert compare_set(files, store) == []
    after = files_of(store)
    changed = {k for k in before if after.get(k) != before[k]}
    assert changed <= {"zarr.json", "layoutkit.json", "t2m/zarr.json", "time/zarr.json"}, changed
    assert append([files[2]], store).wrote_nothing
    late = tmp_path / "late.nc"
    late.write_bytes(files[1].read_bytes())
    with h5py.File(late, "r+") as f:
        f.attrs["history"] = "February again"
    settled = files_of(store)
    with pytest.raises(LayoutkitError, match="must follow the store"):
        append([late], store)
    assert files_of(store) == settled
