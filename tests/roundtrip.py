"""One round-trip test base that every layout's tests inherit.

As xarray's backends share ``DatasetIOBase`` and zarr's stores ``StoreTests``, each
layout's test module subclasses :class:`LayoutRoundTrip` and says only which layout and
options to write with (and, optionally, how to check the output); the round trips over
the edge archive, the sample archive and every file of ``../shared/realdata``, the
provenance stamp and the clean-up on failure are the same for all of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import h5py
import numpy as np
import pytest
import zarr
from conftest import assert_same_reads, realdata_params

import layoutkit
from layoutkit import pipeline
from layoutkit.errors import (
    ChunkDecodeError,
    InvalidOptionError,
    MissingFilterError,
    OutputExistsError,
    UnsupportedFeatureError,
)
from layoutkit.layouts import get_layout
from layoutkit.verify.equality import compare_variant

# what a layout may answer a file it cannot hold with: one named refusal, nothing written
REFUSALS = (UnsupportedFeatureError, MissingFilterError, ChunkDecodeError, InvalidOptionError)


def root_attrs(variant: Path) -> dict[str, Any]:
    if variant.is_dir():
        return dict(zarr.open_group(variant, mode="r").attrs)
    with h5py.File(variant, "r") as f:
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}


def assert_same_values(source: Any, variant: Any) -> None:
    """Every signal of every shot reads back with the same values, attributes and
    coordinate values, whatever its dimensions are called."""
    assert variant.shots == source.shots and variant.signals == source.signals
    for shot in source.shots:
        for sig in source.signals:
            try:
                want = source.read(shot, sig)
            except KeyError:
                continue
            got = variant.read(shot, sig)
            np.testing.assert_array_equal(got.values, want.values)
            assert got.dtype == want.dtype and got.attrs.keys() == want.attrs.keys()
            for mine, theirs in zip(got.dims, want.dims):
                np.testing.assert_array_equal(got[mine].values, want[theirs].values)


class LayoutRoundTrip:
    """Subclasses set :attr:`layout` (a registry name) and :attr:`options`."""

    layout: ClassVar[str]
    options: ClassVar[Any]
    realdata_options: ClassVar[Any] = None  # options for files that are not shot archives
    suffix: ClassVar[str] = ".zarr"
    shot_archive_only: ClassVar[bool] = False  # refuses files that are not shot archives
    opens_with_layoutkit: ClassVar[bool] = True  # layoutkit.open reads it
    # a merged duplicate scale keeps its values but is read under the kept scale's name
    merges_scales: ClassVar[bool] = False

    # -- what a subclass may change -------------------------------------------------

    def write(self, src: Path, dst: Path, options: Any = None) -> Any:
        return pipeline.run(get_layout(self.layout), src, dst, options or self.options)

    def check(self, src: Path, dst: Path) -> None:
        """Every value, dtype, shape, fill value, attribute and dimension scale survived."""
        mismatches = compare_variant(src, dst)
        assert not mismatches, "\n".join(map(str, mismatches[:20]))

    # -- the shared tests ------------------------------------------------------------

    def test_edge_archive(self, edge_archive: Path, tmp_path: Path) -> None:
        dst = tmp_path / f"edge{self.suffix}"
        self.write(edge_archive, dst)
        self.check(edge_archive, dst)
        if self.opens_with_layoutkit:
            with layoutkit.open(edge_archive) as source, layoutkit.open(dst) as variant:
                if self.merges_scales:
                    assert_same_values(source, variant)
                else:
                    assert_same_reads(source, variant, slices=False)

    def test_sample_archive(self, shot_file: Path, tmp_path: Path) -> None:
        dst = tmp_path / f"sample{self.suffix}"
        summary = self.write(shot_file, dst)
        assert summary.logical_bytes > 0 and summary.dest_bytes > 0
        self.check(shot_file, dst)

    def test_provenance_is_stamped(self, shot_file: Path, tmp_path: Path) -> None:
        dst = tmp_path / f"stamped{self.suffix}"
        self.write(shot_file, dst)
        layout = get_layout(self.layout)
        doc = json.loads(root_attrs(dst)[pipeline.PROVENANCE_ATTR])
        assert doc["command"] == layout.command
        assert doc["recipe"] == pipeline.recipe_of(layout, self.options)

    def test_existing_destination_is_refused_and_kept(self, shot_file: Path, tmp_path: Path) -> None:
        dst = tmp_path / f"taken{self.suffix}"
        dst.write_bytes(b"precious")
        with pytest.raises(OutputExistsError):
            self.write(shot_file, dst)
        assert dst.read_bytes() == b"precious"
        assert sorted(p.name for p in tmp_path.iterdir()) == [dst.name]

    def test_failure_leaves_nothing(self, shot_file: Path, tmp_path: Path, monkeypatch) -> None:
        """An error in the middle of the run (here: in the engine) removes the staged output."""

        def broken(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("disk on fire")

        monkeypatch.setattr(pipeline, "_execute", broken)
        with pytest.raises(RuntimeError, match="disk on fire"):
            self.write(shot_file, tmp_path / f"out{self.suffix}")
        assert list(tmp_path.iterdir()) == []

    @pytest.mark.realdata
    @pytest.mark.parametrize("src", realdata_params())
    def test_realdata(self, src: Path, tmp_path: Path) -> None:
        """Every real file round-trips, or is refused in one sentence with nothing written."""
        dst = tmp_path / f"out{self.suffix}"
        try:
            self.write(src, dst, self.realdata_options)
        except REFUSALS as exc:
            assert not dst.exists() and list(tmp_path.iterdir()) == []
            if isinstance(exc, InvalidOptionError):  # only a layout of shot archives refuses a whole file
                assert self.shot_archive_only and "template" in str(exc)
            elif isinstance(exc, ChunkDecodeError):  # only where HDF5 itself cannot read the data
                with h5py.File(src, "r") as f, pytest.raises(OSError):
                    f[exc.dataset][()]
            else:
                assert exc.dataset in str(exc)
            return
        self.check(src, dst)
