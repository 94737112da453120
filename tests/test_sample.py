"""Tests of the synthetic shot archive written by ``layoutkit.sample``."""

from __future__ import annotations

import os
from collections import Counter
from datetime import datetime
from pathlib import Path

import h5py
import numpy as np
import pytest

from layoutkit.sample import SampleSummary, estimate_logical_bytes, write_sample

SHOTS = 3
SIGNALS = 12
KIB = 1024


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SampleSummary, list[int]]:
    """A small archive, with every progress report recorded."""
    path = tmp_path_factory.mktemp("sample") / "shots.h5"
    reports: list[int] = []
    summary = write_sample(path, shots=SHOTS, signals=SIGNALS, seed=0, progress=reports.append)
    return path, summary, reports


@pytest.fixture(scope="module")
def full_catalogue(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One shot with the default 70 signals, to check the mix of the whole catalogue."""
    path = tmp_path_factory.mktemp("catalogue") / "one_shot.h5"
    write_sample(path, shots=1, signals=70, seed=0)
    return path


def signal_datasets(shot: h5py.Group) -> dict[str, h5py.Dataset]:
    return {name: dataset for name, dataset in shot["signals"].items()}


def all_datasets(group: h5py.Group) -> dict[str, h5py.Dataset]:
    found: dict[str, h5py.Dataset] = {}

    def collect(name: str, item: h5py.HLObject) -> None:
        if isinstance(item, h5py.Dataset):
            found[name] = item

    group.visititems(collect)
    return found


def test_root_attributes_describe_the_archive(archive):
    path, _, _ = archive
    with h5py.File(path) as f:
        assert f.attrs["machine"] == "synthetic-tokamak"
        assert f.attrs["layoutkit_sample_version"] == 1
        assert f.attrs["seed"] == 0
        assert isinstance(f.attrs["title"], str) and f.attrs["title"]
        assert set(f) == {"shots"}


def test_shots_are_numbered_like_c_mod_and_carry_their_programme(archive):
    path, _, _ = archive
    with h5py.File(path) as f:
        shot_names = sorted(f["shots"], key=int)
        assert shot_names == ["1160930001", "1160930002", "1160930003"]
        for name in shot_names:
            shot = f["shots"][name]
            assert set(shot) == {"timebases", "signals"}
            assert isinstance(shot.attrs["shot"], np.int64)
            assert shot.attrs["shot"] == int(name)
            started = datetime.fromisoformat(shot.attrs["date"])
            assert started.strftime("%y%m%d") == name[1:7]
            assert isinstance(shot.attrs["comment"], str) and shot.attrs["comment"]
            assert isinstance(shot.attrs["plasma_current_MA"], np.float64)
            assert 0.3 < shot.attrs["plasma_current_MA"] < 2.0


def test_signal_names_are_stable_and_a_few_are_missing(archive):
    path, summary, _ = archive
    with h5py.File(path) as f:
        names_per_shot = [set(shot["signals"]) for shot in f["shots"].values()]
    every_name = set.union(*names_per_shot)
    assert len(every_name) == SIGNALS
    assert {"ip", "ne_bar", "te_ece_01", "bp_coil_01", "spectroscopy_2d"} <= every_name
    written = sum(len(names) for names in names_per_shot)
    assert written == summary.datasets
    # Some signal is absent from some shot, but only a few are.
    assert SHOTS * SIGNALS - 3 <= written < SHOTS * SIGNALS
    assert all(len(names) >= SIGNALS - 1 for names in names_per_shot)


def test_summary_counts_what_is_in_the_file(archive):
    path, summary, _ = archive
    with h5py.File(path) as f:
        timebases = sum(len(shot["timebases"]) for shot in f["shots"].values())
        datasets = all_datasets(f)
        logical_bytes = sum(dataset.nbytes for dataset in datasets.values())
    assert summary.path == str(path)
    assert (summary.shots, summary.signals) == (SHOTS, SIGNALS)
    assert summary.timebases == timebases
    assert summary.datasets + summary.timebases == len(datasets)
    assert summary.logical_bytes == logical_bytes
    assert summary.file_bytes == os.path.getsize(path)


def test_estimate_and_progress_add_up_to_the_logical_bytes(archive):
    _, summary, reports = archive
    assert estimate_logical_bytes(SHOTS, SIGNALS, seed=0) == summary.logical_bytes
    assert len(reports) > summary.datasets  # big signals report chunk by chunk
    assert all(nbytes > 0 for nbytes in reports)
    assert sum(reports) == summary.logical_bytes


def test_every_signal_dimension_has_a_scale_of_matching_length(archive):
    path, _, _ = archive
    with h5py.File(path) as f:
        for shot in f["shots"].values():
            timebase_names = {f"{shot.name}/timebases/{name}" for name in shot["timebases"]}
            for name, signal in signal_datasets(shot).items():
                for axis, length in enumerate(signal.shape):
                    assert len(signal.dims[axis]) == 1, f"{name} axis {axis}"
                    scale = signal.dims[axis][0]
                    assert scale.name in timebase_names
                    assert h5py.h5ds.is_scale(scale.id)
                    assert h5py.h5ds.is_attached(signal.id, scale.id, axis)
                    assert scale.shape == (length,)
                assert signal.dims[0].label == "time"


def test_several_signals_share_one_time_base(archive):
    path, _, _ = archive
    with h5py.File(path) as f:
        complete_shots = [s for s in f["shots"].values() if len(s["signals"]) == SIGNALS]
        assert complete_shots
        for shot in complete_shots:
            users = Counter(signal.dims[0][0].name for signal in signal_datasets(shot).values())
            assert max(users.values()) >= 3
            shared = [name for name, count in users.items() if count >= 2]
            assert len(shared) >= 2
            for scale_name in shared:
                scale = f[scale_name]
                assert scale.dtype == np.float64
                assert np.all(np.diff(scale[...]) > 0)
                assert not scale.name.endswith("_time")


def test_private_time_bases_are_byte_identical_copies_of_a_shared_one(archive):
    path, _, _ = archive
    private_signals_per_shot = []
    with h5py.File(path) as f:
        for shot in f["shots"].values():
            timebases = shot["timebases"]
            private = [name for name in timebases if name.endswith("_time")]
            private_signals_per_shot.append({name.removesuffix("_time") for name in private})
            shared_bytes = {
                name: timebases[name][...].tobytes()
                for name in timebases
                if name.startswith("t_")
            }
            for name in private:
                signal = shot["signals"][name.removesuffix("_time")]
                assert signal.dims[0][0].name == timebases[name].name
                copy = timebases[name][...]
                assert copy.dtype == np.float64
                assert copy.tobytes() in shared_bytes.values(), name
    assert all(private_signals_per_shot)
    # Which signals carry a private copy is a property of the name, not of the shot.
    with h5py.File(path) as f:
        for shot, private in zip(f["shots"].values(), private_signals_per_shot, strict=True):
            for name, signal in signal_datasets(shot).items():
                uses_private = signal.dims[0][0].name.endswith("_time")
                assert uses_private == (name in set.union(*private_signals_per_shot))
                assert uses_private == (name in private)


def test_dtype_mix_and_two_dimensional_signals(archive):
    path, _, _ = archive
    with h5py.File(path) as f:
        signals = [
            signal for shot in f["shots"].values() for signal in signal_datasets(shot).values()
        ]
        assert {signal.dtype for signal in signals} == {
            np.dtype("float32"),
            np.dtype("float64"),
            np.dtype("int16"),
        }
        two_dimensional = [signal for signal in signals if signal.ndim == 2]
        assert two_dimensional
        for signal in two_dimensional:
            assert 4 <= signal.shape[1] <= 32
            assert signal.dims[1].label == "channel"
            channel_scale = signal.dims[1][0]
            assert channel_scale.dtype in (np.dtype("int32"), np.dtype("float32"))
            assert np.all(np.diff(channel_scale[...]) > 0)


def test_signal_attributes_have_the_right_types(archive):
    path, _, _ = archive
    with h5py.File(path) as f:
        for shot in f["shots"].values():
            for name, signal in signal_datasets(shot).items():
                assert isinstance(signal.attrs["units"], str), name
                assert isinstance(signal.attrs["description"], str) and signal.attrs["description"]
                source_path = signal.attrs["source_path"]
                assert isinstance(source_path, str)
                assert source_path.startswith("\\") and "::TOP." in source_path
                if signal.dtype == np.int16:
                    assert isinstance(signal.attrs["scale_factor"], np.float64)
                    assert isinstance(signal.attrs["offset"], np.float64)
                    assert signal.attrs["scale_factor"] > 0
                else:
                    assert "scale_factor" not in signal.attrs
                    assert "offset" not in signal.attrs


def test_storage_big_signals_are_gzip_chunked_and_compress_like_measurements(archive):
    path, _, _ = archive
    with h5py.File(path) as f:
        chunked = []
        for shot in f["shots"].values():
            for scale in shot["timebases"].values():
                assert scale.chunks is None and scale.compression is None
            for name, signal in signal_datasets(shot).items():
                if signal.nbytes <= 64 * KIB:
                    assert signal.chunks is None and signal.compression is None, name
                    continue
                chunked.append(signal)
                assert signal.compression == "gzip" and signal.compression_opts == 4, name
                assert signal.chunks[1:] == signal.shape[1:], name  # full channels
                chunk_bytes = int(np.prod(signal.chunks)) * signal.dtype.itemsize
                assert chunk_bytes <= 512 * KIB, name
                assert chunk_bytes >= min(128 * KIB, signal.nbytes), name
                ratio = signal.nbytes / signal.id.get_storage_size()
                assert 1.2 < ratio < 10, f"{name}: gzip ratio {ratio:.2f}"
        assert len(chunked) >= SHOTS * 4
        shuffled = sum(signal.shuffle for signal in chunked)
        assert 0.25 < shuffled / len(chunked) < 0.75
        assert any(len(range(0, s.shape[0], s.chunks[0])) > 1 for s in chunked)


def test_the_full_catalogue_has_the_intended_mix(full_catalogue):
    with h5py.File(full_catalogue) as f:
        (shot,) = f["shots"].values()
        signals = signal_datasets(shot)
        assert len(signals) == 70
        private = [s for s in signals.values() if s.dims[0][0].name.endswith("_time")]
        assert 0.12 <= len(private) / len(signals) <= 0.22
        two_dimensional = [s for s in signals.values() if s.ndim == 2]
        assert 0.05 <= len(two_dimensional) / len(signals) <= 0.15
        sizes = sorted(s.nbytes for s in signals.values())
        assert sizes[0] < 10 * KIB
        assert sizes[len(sizes) // 2] < 200 * 1000  # most are small ...
        assert sizes[-1] > 1_000_000  # ... with a heavy tail
        dtypes = Counter(s.dtype for s in signals.values())
        assert dtypes.most_common(1)[0][0] == np.dtype("float32")


def test_same_seed_gives_identical_data_and_another_seed_differs(archive, tmp_path):
    path, _, _ = archive
    again = tmp_path / "again.h5"
    other = tmp_path / "other.h5"
    write_sample(again, shots=SHOTS, signals=SIGNALS, seed=0)
    write_sample(other, shots=SHOTS, signals=SIGNALS, seed=1)
    with h5py.File(path) as first, h5py.File(again) as second, h5py.File(other) as third:
        first_datasets = all_datasets(first)
        second_datasets = all_datasets(second)
        assert first_datasets.keys() == second_datasets.keys()
        for name, dataset in first_datasets.items():
            assert dataset[...].tobytes() == second_datasets[name][...].tobytes(), name
            assert dict(dataset.attrs).keys() == dict(second_datasets[name].attrs).keys()

        first_shot = first["shots/1160930001/signals"]
        third_shot = third["shots/1160930001/signals"]
        common = set(first_shot) & set(third_shot)
        differing = [
            name
            for name in common
            if first_shot[name][...].tobytes() != third_shot[name][...].tobytes()
        ]
        assert len(differing) >= 0.9 * len(common)
        assert third.attrs["seed"] == 1


def test_default_size_is_about_200_megabytes_and_linear_in_shots():
    default = estimate_logical_bytes(25, 70)
    assert 150e6 <= default <= 250e6
    large = estimate_logical_bytes(500, 70)
    assert 2e9 <= large <= 10e9
    assert large / default == pytest.approx(20, rel=0.1)


def test_an_existing_path_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "taken.h5"
    path.write_bytes(b"not mine")
    with pytest.raises(FileExistsError):
        write_sample(path, shots=1, signals=2)
    assert path.read_bytes() == b"not mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.h5"]


def test_a_file_that_appears_during_the_write_is_not_replaced(tmp_path):
    path = tmp_path / "contested.h5"

    def someone_else_writes_the_path(nbytes: int) -> None:
        if not path.exists():
            path.write_bytes(b"theirs")

    with pytest.raises(FileExistsError):
        write_sample(path, shots=1, signals=3, progress=someone_else_writes_the_path)
    assert path.read_bytes() == b"theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["contested.h5"]


@pytest.mark.parametrize(
    ("shots", "signals"),
    [
        pytest.param(0, 10, id="no-shots"),
        pytest.param(-3, 10, id="negative-shots"),
        pytest.param(2, 0, id="no-signals"),
    ],
)
def test_invalid_counts_are_refused(tmp_path, shots, signals):
    path = tmp_path / "never.h5"
    with pytest.raises(ValueError, match="Expected"):
        write_sample(path, shots=shots, signals=signals)
    with pytest.raises(ValueError, match="Expected"):
        estimate_logical_bytes(shots, signals)
    assert not path.exists()


def test_an_interrupted_write_leaves_no_file_behind(tmp_path):
    path = tmp_path / "interrupted.h5"
    written = []

    def interrupt_after_a_while(nbytes: int) -> None:
        written.append(nbytes)
        if len(written) == 20:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_sample(path, shots=2, signals=SIGNALS, progress=interrupt_after_a_while)
    assert len(written) == 20
    assert list(tmp_path.iterdir()) == []


def test_rate_factor_lengthens_every_signal_and_time_base(tmp_path):
    base = tmp_path / "base.h5"
    fast = tmp_path / "fast.h5"
    write_sample(base, shots=1, signals=8, seed=0)
    summary = write_sample(fast, shots=1, signals=8, seed=0, rate_factor=3)
    assert summary.logical_bytes == estimate_logical_bytes(1, 8, 0, rate_factor=3)
    with h5py.File(base, "r") as a, h5py.File(fast, "r") as b:
        da, db = all_datasets(a["shots"]), all_datasets(b["shots"])
        assert da.keys() == db.keys()
        for name, ds in da.items():
            if "timebases" in name and ds.shape[0] < 64:  # channel scales keep their length
                assert db[name].shape == ds.shape
                continue
            # the same span, sampled 3x as often (rounding may add or drop a sample)
            assert abs(db[name].shape[0] - 3 * ds.shape[0]) <= 2, name
            assert db[name].shape[1:] == ds.shape[1:], name
        rate = {n: d.attrs["sampling_rate_hz"] for n, d in da.items() if "sampling_rate_hz" in d.attrs}
        assert rate and all(db[n].attrs["sampling_rate_hz"] == 3 * r for n, r in rate.items())
        assert "3x faster" in b.attrs["title"] and "faster" not in a.attrs["title"]
    with pytest.raises(ValueError, match="Expected rate factor"):
        write_sample(tmp_path / "never.h5", shots=1, signals=2, rate_factor=0)
    assert not (tmp_path / "never.h5").exists()


def test_an_archive_written_as_many_files_holds_the_one_files_shots(tmp_path):
    """``shots_per_file``: a folder of shot archives (an export of a file per shot or run
    day) whose shots together are the one file's, value for value, each file with the
    one file's root attributes; the CLI says how many files."""
    import xarray as xr
    from typer.testing import CliRunner

    import layoutkit
    from layoutkit.cli import app

    one = write_sample(tmp_path / "one.h5", shots=5, signals=6, seed=3)
    many = write_sample(tmp_path / "many", shots=5, signals=6, seed=3, shots_per_file=2)
    files = sorted((tmp_path / "many").iterdir())
    assert [f.name for f in files] == ["shots-1160930001.h5", "shots-1160930003.h5", "shots-1160930005.h5"]
    assert (many.datasets, many.timebases, many.logical_bytes) == (one.datasets, one.timebases, one.logical_bytes)
    with h5py.File(one.path) as f:
        root = dict(f.attrs)
    found = []
    with layoutkit.open(one.path) as whole:
        for path in files:
            with h5py.File(path) as f:
                assert dict(f.attrs).keys() == root.keys()
                assert all(np.array_equal(f.attrs[k], root[k]) for k in root)
            with layoutkit.open(path) as part:
                for shot in part.shots:
                    xr.testing.assert_identical(part.shot(shot), whole.shot(shot))
                    found.append(shot)
        assert found == whole.shots
    result = CliRunner().invoke(app, ["sample", str(tmp_path / "cli"), "--shots", "3", "--signals", "2",
                                      "--shots-per-file", "1"])
    assert result.exit_code == 0, result.output
    assert "(3 files)" in " ".join(result.output.split())  # rich may wrap a long path
    assert len(list((tmp_path / "cli").glob("shots-*.h5"))) == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial folder left


def test_an_interrupted_many_file_write_leaves_no_folder_behind(tmp_path, monkeypatch):
    import layoutkit.sample as sample

    real, calls = sample._write_file, []

    def second_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(sample, "_write_file", second_fails)
    with pytest.raises(KeyboardInterrupt):
        write_sample(tmp_path / "many", shots=4, signals=2, shots_per_file=2)
    assert list(tmp_path.iterdir()) == []
