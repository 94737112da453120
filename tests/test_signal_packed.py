"""One signal of every shot in the packed form (issue #52): the same values, time bases
and shots as signal() gives, on every layout; signal-major builds it from its packed
arrays."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import layoutkit
from layoutkit.readers.base import pack_signal
from layoutkit.sample import write_sample


@pytest.fixture(scope="module")
def stores(tmp_path_factory):  # noqa: ANN201
    work = tmp_path_factory.mktemp("packed")
    src = write_sample(work / "shots.h5", shots=6, signals=5, seed=7).path
    out = {"source": src}
    for layout in ("shot-major", "signal-major", "shot-packed"):
        out[layout] = work / f"{layout}.zarr"
        layoutkit.convert(src, out[layout], layoutkit.ConvertOptions(layout=layout, shards="auto"))
    return out


def test_the_packed_form_holds_what_signal_gives(stores):
    for name, where in stores.items():
        with layoutkit.open(where) as archive:
            for signal in archive.signals:
                per_shot = archive.signal(signal)
                packed = archive.signal_packed(signal)
                xr.testing.assert_identical(packed, pack_signal(signal, per_shot))
                assert list(packed["shot"].values) == list(per_shot), (name, signal)
                for k, a in enumerate(per_shot.values()):
                    start, length = int(packed["start"][k]), int(packed["length"][k])
                    np.testing.assert_array_equal(packed[signal].values[start : start + length], a.values)
                    base = a.dims[0]
                    column = base if base in packed else "time"
                    np.testing.assert_array_equal(packed[column].values[start : start + length], a[base].values)
                    if "time_base" in packed.coords:
                        assert packed["time_base"].values[k] == base


def test_signal_major_builds_it_without_an_array_per_shot(stores, monkeypatch):
    from layoutkit.layouts.signal_major.read import SignalMajorArchive

    def refused(self, paths):  # noqa: ANN001, ANN202
        raise AssertionError("an array was built per shot")

    with layoutkit.open(stores["signal-major"]) as archive:
        assert isinstance(archive, SignalMajorArchive)
        monkeypatch.setattr(SignalMajorArchive, "_variables", refused)
        packed = archive.signal_packed("ip")
        assert packed.sizes["shot"] == len(archive.shots)
        monkeypatch.undo()
        with pytest.raises(KeyError, match="no signal 'ipp'.*the nearest: 'ip'"):
            archive.signal_packed("ipp")


def test_shots_on_several_time_bases_name_each_shot_s():
    a = xr.DataArray(np.arange(3.0), dims="t_1khz", coords={"t_1khz": [0.0, 1.0, 2.0]})
    b = xr.DataArray(np.arange(2.0), dims="t_5khz", coords={"t_5khz": [0.0, 0.2]})
    packed = pack_signal("x", {"1": a, "2": b})
    assert list(packed["time_base"].values) == ["t_1khz", "t_5khz"]
    np.testing.assert_array_equal(packed["time"].values, [0.0, 1.0, 2.0, 0.0, 0.2])
    assert list(packed["start"].values) == [0, 3] and list(packed["length"].values) == [3, 2]
