"""The conformance suite with other options than a layout's defaults, and over real files.

:mod:`layoutkit.testing` is the suite every registered layout runs with its default
options on every destination (``tests/test_conformance.py``). A layout's test module
subclasses :class:`LayoutRoundTrip` to run the same suite with the options it wants
exercised (shards, Zarr v2, ``--compressor source``, a byte order...) on a local
destination, and over every file of ``../shared/realdata``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import h5py
import pytest
from conftest import realdata_params

from layoutkit.errors import ChunkDecodeError, InvalidOptionError, MissingFilterError, UnsupportedFeatureError
from layoutkit.testing import LayoutTests

# what a layout may answer a file it cannot hold with: one named refusal, nothing written
REFUSALS = (UnsupportedFeatureError, MissingFilterError, ChunkDecodeError, InvalidOptionError)


class LayoutRoundTrip(LayoutTests):
    """Subclasses set :attr:`layout` and :attr:`options`; :attr:`realdata_options` for
    files that are not shot archives."""

    destinations = ("local",)
    realdata_options: ClassVar[Any] = None

    @pytest.mark.realdata
    @pytest.mark.parametrize("src", realdata_params())
    def test_realdata(self, src: Path, tmp_path: Path, request: Any) -> None:
        """Every real file round-trips, or is refused in one sentence with nothing written."""
        place = self.place("local", tmp_path, request)
        options = self.realdata_options or self.the_options()
        try:
            self.write(src, place, options)
        except REFUSALS as exc:
            assert list(tmp_path.iterdir()) == []
            if isinstance(exc, InvalidOptionError):  # only a layout of shot archives refuses a whole file
                assert self.the_layout().needs_shot_archive(options) and "template" in str(exc)
            elif isinstance(exc, ChunkDecodeError):  # only where HDF5 itself cannot read the data
                with h5py.File(src, "r") as f, pytest.raises(OSError):
                    f[exc.dataset][()]
            else:
                assert exc.dataset in str(exc)
            return
        mismatches = self.compare(src, place)
        assert mismatches == [], "\n".join(map(str, mismatches[:20]))
