"""layoutkit.open of several sources as one archive (issue 38): the union of their shots."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

import layoutkit
from layoutkit.errors import SourceNotFoundError
from layoutkit.readers.combined import CombinedArchive, DifferentDuplicateError
from layoutkit.sample import write_sample
from layoutkit.testing import assert_same_values


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> tuple[Path, Path]:
    """The same archive as one file and as a folder of files of 2 shots each."""
    work = tmp_path_factory.mktemp("set")
    one = write_sample(work / "one.h5", shots=5, signals=6, seed=2).path
    write_sample(work / "many", shots=5, signals=6, seed=2, shots_per_file=2)
    return Path(one), work / "many"


def test_a_glob_of_files_reads_as_the_one_file(split):
    one, many = split
    with layoutkit.open(str(many / "shots-*.h5")) as combined, layoutkit.open(one) as whole:
        assert isinstance(combined, CombinedArchive) and len(combined.members) == 3
        assert_same_values(whole, combined)  # every signal of every shot, values, attributes, coordinates
        for shot in whole.shots:
            xr.testing.assert_identical(combined.shot(shot), whole.shot(shot))
        got, want = combined.signal("ip"), whole.signal("ip")
        assert list(got) == list(want)
        for key in want:
            xr.testing.assert_identical(got[key], want[key])
        assert combined.arrays().keys() == whole.arrays().keys()
        path = next(p for p in whole.arrays() if p.startswith("/shots/1160930004/"))
        np.testing.assert_array_equal(combined.get(path), whole.get(path))
        assert sorted(combined.blocks()) == sorted(whole.blocks())
        combined.shot(whole.shots[-1])
        assert combined.counter.requests > 0  # the members' reads, summed


def test_a_list_of_sources_and_a_converted_store_agree(split, tmp_path):
    one, many = split
    store = tmp_path / "one.zarr"
    layoutkit.convert(one, store)
    files = sorted(many.glob("*.h5"))
    with layoutkit.open(files) as combined, layoutkit.open(store) as converted:
        assert_same_values(combined, converted)


def test_a_shot_in_two_files_is_taken_once_when_equal_and_refused_when_not(split, tmp_path):
    _, many = split
    files = sorted(many.glob("*.h5"))
    again = tmp_path / "again.h5"
    shutil.copy(files[0], again)  # shots 1160930001 and 1160930002 a second time, equal
    with layoutkit.open([*files, again]) as combined:
        assert combined.shots == [str(1160930001 + i) for i in range(5)]
    changed = tmp_path / "changed.h5"
    shutil.copy(files[0], changed)
    with h5py.File(changed, "r+") as f:
        f["shots/1160930002/signals/ip"][0] += 1
    with layoutkit.open([*files, changed]) as combined, \
            pytest.raises(DifferentDuplicateError, match=r"Shot 1160930002 is in .*shots-1160930001.h5 and in "
                                                         r".*changed.h5 with different data \(signal 'ip' differs\)"):
        _ = combined.shots


def test_a_glob_that_matches_nothing_is_refused_in_one_sentence(tmp_path):
    with pytest.raises(SourceNotFoundError, match="No file matches"):
        layoutkit.open(str(tmp_path / "nothing-*.h5"))


def test_a_store_made_from_many_files_is_proved_equal_to_them_all(split, tmp_path):
    """compare_set: every array of every source in the store, equal, and no shot the
    sources do not hold; a changed value and a shot too many are found."""
    from layoutkit.verify.equality import compare_set

    one, many = split
    files = sorted(many.glob("*.h5"))
    store = tmp_path / "combined.zarr"
    layoutkit.convert(one, store)  # the one file: what combining the many must give
    assert compare_set(files, store) == []
    found = compare_set(files[:2], store)  # the last file's shot is not among the sources
    assert [(m.path, m.what) for m in found] == [("/shots/1160930005", "extra")]
    chunk = next(store.glob("shots/1160930003/signals/ip/c/0"))
    chunk.write_bytes(chunk.read_bytes()[:-1] + bytes([chunk.read_bytes()[-1] ^ 1]))
    found = compare_set(files, store)
    assert {m.path for m in found} == {"/shots/1160930003/signals/ip"}


def test_verify_takes_a_glob_of_sources(split, tmp_path):
    """layoutkit verify "exports/shots-*.h5" STORE: the store proved equal to every file,
    and the set measured as one archive beside it; a store missing a file's shot is
    reported."""
    import csv

    from typer.testing import CliRunner

    from layoutkit.cli import app

    one, many = split
    store = tmp_path / "combined.zarr"
    layoutkit.convert(one, store)
    runner = CliRunner()
    result = runner.invoke(app, ["--quiet", "verify", str(many / "shots-*.h5"), str(store), "--patterns",
                                 "shot,signal", "--sample", "2", "--repeat", "1", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(open(tmp_path / "r" / "results.csv")))
    assert {r["variant"] for r in rows} == {"shots-*.h5", "combined.zarr"}
    assert all(int(r["requests"]) > 0 for r in rows if r["variant"] == "shots-*.h5")
    extra = tmp_path / "extra"
    extra.mkdir()
    for f in sorted(many.glob("*.h5"))[:2]:
        shutil.copy(f, extra / f.name)
    result = runner.invoke(app, ["--quiet", "verify", str(extra / "*.h5"), str(store), "--patterns", "shot",
                                 "--sample", "1", "--repeat", "1"])
    assert result.exit_code == 1, result.output
    assert "/shots/1160930005" in result.output and "extra" in result.output
