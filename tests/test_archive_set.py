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
from layoutkit.readers.sources import ArchiveSet, DifferentDuplicateError
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
        assert isinstance(combined, ArchiveSet) and len(combined.members) == 3
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
