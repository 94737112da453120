"""The conformance suite every layout runs: ours, and a third party's.

As zarr-python's ``StoreTests`` (which every store inherits, and third-party stores
import from ``zarr.testing``) and xarray's ``DatasetIOBase``, :class:`LayoutTests` holds
the round trips every layout must pass; a test module subclasses it and says which
layout to test::

    from layoutkit.testing import LayoutTests

    class TestMyLayout(LayoutTests):
        layout = MyLayout()             # a Layout (or the name of a registered one)
        options = MyOptions(...)        # optional: the layout's default options

layoutkit's own tests generate one subclass per registered layout
(``tests/test_conformance.py``), so a layout cannot be registered without running it.
The suite needs pytest, and for the bucket and Icechunk destinations ``moto[server]``
and ``icechunk`` (``pip install 'layoutkit[test]'``); a layout that claims a destination
it cannot be tested on fails, it is not skipped.

What it proves, on two archives built in code (:func:`build_edge_archive`, every edge
the shot layouts meet, and a sample archive from :func:`layoutkit.sample.write_sample`):

- the output on each destination the layout claims (local, a bucket on a real S3
  endpoint on loopback, an Icechunk repository) is equal to its source by the layout's
  own comparator, and every array its reader lists reads back as the source's;
- a destination it does not claim is refused in one sentence, with nothing written;
- the comparator is not blind: it finds one value changed in the source;
- the plan is pure, the provenance names the layout, an existing destination is
  refused and kept, and a failure in the middle of a run leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import h5py
import numpy as np
import pytest

from layoutkit.errors import LayoutkitError, OutputExistsError
from layoutkit.formats import PROVENANCE_ATTR
from layoutkit.layout import DESTINATION_KINDS, Layout
from layoutkit.testing.s3 import BUCKET, S3Endpoint

# -- test data, built in code ---------------------------------------------------------------


def _timebase(group: h5py.Group, name: str, values: np.ndarray, **attrs: object) -> h5py.Dataset:
    ds = group.create_dataset(name, data=values)
    ds.attrs.update(attrs)
    ds.make_scale(name)
    return ds


def _signal(group: h5py.Group, name: str, data: np.ndarray, *scales: h5py.Dataset | None, **kwargs: object) -> h5py.Dataset:
    attrs = kwargs.pop("attrs", {})
    ds = group.create_dataset(name, data=data, **kwargs)
    ds.attrs.update(attrs)
    for axis, scale in enumerate(scales):
        if scale is not None:
            ds.dims[axis].attach_scale(scale)
    return ds


def build_edge_archive(path: Path, shot_names: tuple[str, ...] = ("1", "2", "3", "10")) -> Path:
    """A small shot archive with every edge the shot layouts meet: a signal missing from
    some shots, a signal with no samples in a shot, 2-D signals whose channel count
    changes, a dtype that changes across shots, shared, private, duplicated and global
    dimension scales, per-shot attributes (one not UTF-8), big-endian, complex, bool and
    fill-valued signals, and datasets no packing carries (text, scalars)."""
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "edge cases"
        f.attrs["version"] = np.int32(2)
        common = f.create_group("common")
        gch = _timebase(common, "ch", np.arange(5, dtype="i4"), units="")
        f["calibration/table"] = np.arange(12.0).reshape(3, 4)  # outside the template
        f.create_group("shots").attrs["machine"] = "test"
        for k, shot in enumerate(shot_names):
            g = f.create_group(f"shots/{shot}")
            if k != 1:
                g.attrs["shot"] = np.int64(k)
                g.attrs["comment"] = f"shot {shot}"
            tb, sig = g.create_group("timebases"), g.create_group("signals")
            n = 50 + 10 * k
            t = _timebase(tb, "t", np.linspace(0, 1, n), units="s", rate=float(n))
            # a private copy of t: equal to it in every shot but the third
            ne_t = _timebase(tb, "ne_time", np.linspace(0, 1, n) + (0.5 if k == 2 else 0.0), units="s", rate=float(n))
            chans = 6 if k == 3 else 8
            ch = _timebase(tb, "channel", np.arange(chans, dtype="f4") * 0.1, units="m")
            ip_attrs = {"units": "A", "offset": float(k)}
            if k == 0:  # text that is not UTF-8, as NeXus files from beamlines carry (Latin-1 micro sign)
                ip_attrs["probe_units"] = np.bytes_(b"\xb5m")
            _signal(sig, "ip", rng.normal(size=n).astype("f4"), t, attrs=ip_attrs, chunks=(16,), compression="gzip")
            if k != 1:  # missing from the second shot
                _signal(sig, "ne", rng.normal(size=n), ne_t, attrs={"units": "m-3"})
            # zero samples in the third shot (with a zero-length time base of its own)
            m = 0 if k == 2 else n
            tz = _timebase(tb, "tz", np.linspace(0, 1, m), units="s")
            _signal(sig, "empty_in_3", np.ones(m, "f8"), tz)
            # 2-D, time x channel; the channel count changes in the fourth shot
            _signal(sig, "profile", rng.normal(size=(n, chans)).astype("f4"), t, ch, attrs={"units": "eV"},
                    chunks=(8, chans), compression="gzip", shuffle=True)
            # int16 counts, float64 in the third shot
            dtype = "f8" if k == 2 else "i2"
            _signal(sig, "counts", (rng.normal(size=n) * 100).astype(dtype), t, attrs={"scale_factor": 0.5})
            _signal(sig, "spec", rng.normal(size=(n, 5)), t, gch)  # a scale outside every shot
            _signal(sig, "raw", np.arange(n, dtype="u2"))  # no scale
            _signal(sig, "flags", rng.normal(size=n) > 0, t)
            _signal(sig, "fill", np.zeros(n, "i4"), t, fillvalue=-9)
            _signal(sig, "big_endian", np.arange(n, dtype=">i4"), t)
            _signal(sig, "complex", (rng.normal(size=n) + 1j).astype("c8"), t)
            sig.create_dataset("label", data=[f"label {shot}"], dtype=h5py.string_dtype())  # text: mirrored
            sig["scalar"] = np.float64(k)  # no axis: mirrored
            g["extra"] = np.arange(3) + k  # in the shot, not a signal, not a scale: mirrored
    return path


def assert_same_reads(source: Any, variant: Any, slices: bool = True) -> None:
    """``layoutkit.open`` gives the same of both: every read of the shot-archive view
    (identical xarray objects: values, dtypes, attributes, coordinates), and every array
    of the source read by its path (whole, and sliced on its first axis)."""
    import xarray as xr

    assert variant.shots == source.shots
    assert variant.signals == source.signals
    for shot in source.shots:
        for sig in source.signals:
            try:
                want = source.read(shot, sig)
            except KeyError:
                with pytest.raises(KeyError):
                    variant.read(shot, sig)
                continue
            xr.testing.assert_identical(variant.read(shot, sig), want)
        xr.testing.assert_identical(variant.shot(shot), source.shot(shot))
    for sig in source.signals:
        want, got = source.signal(sig), variant.signal(sig)
        assert list(got) == list(want)
        for shot in want:
            xr.testing.assert_identical(got[shot], want[shot])
    for path, (shape, _) in source.arrays().items():
        np.testing.assert_array_equal(variant.get(path), source.get(path))
        if slices and shape and shape[0] > 3:
            for sel in [(slice(1, 3),), (-1,), (slice(None, None, 2),), (slice(2, 1),)]:
                np.testing.assert_array_equal(variant.get(path, sel), source.get(path, sel))


def assert_same_values(source: Any, variant: Any) -> None:
    """Every signal of every shot reads back with the same values, attributes and
    coordinate values, whatever its dimensions are called (a layout that stores a
    duplicate time base once reads it under the kept one's name)."""
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


# -- where an output goes ---------------------------------------------------------------------


class Place(NamedTuple):
    """A destination of one kind: what the pipeline writes to, and how to read it."""

    kind: str  # one of DESTINATION_KINDS
    location: str  # a path, s3://bucket/key, or icechunk:PATH
    storage_options: dict[str, str]

    def destination(self) -> Any:
        from layoutkit.storage import destination

        return destination(self.location, self.storage_options)

    @property
    def path(self) -> Path:
        """Where the output lies on this machine (a file, a store folder, a repository)."""
        assert self.kind != "bucket", "an output in a bucket has no local path"
        return Path(self.location.removeprefix("icechunk:"))


# -- the suite --------------------------------------------------------------------------------


class LayoutTests:
    """The conformance suite of one layout. Subclasses set :attr:`layout` (a
    :class:`~layoutkit.layout.Layout`, or a registered layout's name) and may set
    :attr:`options` (default: :meth:`~layoutkit.layout.Layout.default_options`)."""

    layout: ClassVar[Layout | str]
    options: ClassVar[Any] = None
    destinations: ClassVar[tuple[str, ...]] = DESTINATION_KINDS
    """The destination kinds the round trip runs on (those the layout does not claim are
    checked to be refused)."""
    reads_like_source: ClassVar[bool] = True
    """Whether ``layoutkit.open`` of an output gives what it gives of the source, read
    for read (:func:`assert_same_reads`); else every array the reader lists must equal the
    source's."""
    slices: ClassVar[bool] = True  # with reads_like_source: sliced reads too

    # -- what a subclass may change -------------------------------------------------------

    def the_layout(self) -> Layout:
        if isinstance(self.layout, str):
            from layoutkit.layouts import get_layout

            return get_layout(self.layout)
        return self.layout

    def the_options(self) -> Any:
        return self.options if self.options is not None else self.the_layout().default_options()

    def write(self, src: Path, place: Place, options: Any = None) -> Any:
        from layoutkit import pipeline

        return pipeline.run(self.the_layout(), src, place.destination(), options or self.the_options())

    def compare(self, src: Path, place: Place) -> list[Any]:
        """The layout's comparator, as ``verify`` finds and runs it."""
        from layoutkit.verify.equality import compare_variant

        return compare_variant(src, place.location, storage_options=place.storage_options)

    def check_reads(self, src: Path, place: Place) -> None:
        import layoutkit

        with layoutkit.open(src) as source, layoutkit.open(place.location, storage_options=place.storage_options) as got:
            if self.reads_like_source and self.the_layout().merges_scales(self.the_options()):
                assert_same_values(source, got)
                return
            if self.reads_like_source:
                assert_same_reads(source, got, slices=self.slices)
                return
            listed = got.arrays()
            assert listed, "the reader lists no array"
            for path in listed:
                np.testing.assert_array_equal(got.get(path), source.get(path))

    # -- fixtures ---------------------------------------------------------------------------

    def pytest_generate_tests(self, metafunc: Any) -> None:
        if "kind" in metafunc.fixturenames:
            metafunc.parametrize("kind", self.destinations)

    @pytest.fixture(scope="class")
    @classmethod
    def edge_source(cls, tmp_path_factory: Any) -> Path:
        return build_edge_archive(tmp_path_factory.mktemp("edge") / "edge.h5")

    @pytest.fixture(scope="class")
    @classmethod
    def sample_source(cls, tmp_path_factory: Any) -> Path:
        from layoutkit.sample import write_sample

        path = tmp_path_factory.mktemp("sample") / "shots.h5"
        write_sample(path, shots=3, signals=12, seed=1)
        return path

    @pytest.fixture(scope="class")
    @classmethod
    def s3(cls) -> Any:
        endpoint = S3Endpoint()
        yield endpoint
        endpoint.close()

    def home(self) -> str:
        """The destination kind the suite's other tests write to: a local path, or the
        first kind the layout writes to when it writes no local path."""
        kinds = self.the_layout().destinations
        return "local" if "local" in kinds else kinds[0]

    def place(self, kind: str, tmp_path: Path, request: Any, name: str = "out") -> Place:
        suffix = ".zarr" if self.the_layout().format == "zarr" else f".{self.the_layout().format}"
        if kind == "local":
            return Place(kind, str(tmp_path / f"{name}{suffix}"), {})
        if kind == "bucket":
            s3 = request.getfixturevalue("s3")
            return Place(kind, f"s3://{BUCKET}/{uuid.uuid4().hex}/{name}{suffix}", s3.storage_options)
        if kind == "icechunk":
            return Place(kind, f"icechunk:{tmp_path / name}", {})
        raise AssertionError(f"unknown destination kind {kind!r}")

    # -- the tests ----------------------------------------------------------------------------

    def test_round_trip(self, kind: str, edge_source: Path, tmp_path: Path, request: Any) -> None:
        """Equal by the layout's comparator and read back as the source, on each
        destination the layout claims; refused in one sentence, nothing written, on
        the others."""
        place = self.place(kind, tmp_path, request)
        if kind not in self.the_layout().destinations:
            with pytest.raises(LayoutkitError) as refused:
                self.write(edge_source, place)
            assert "\n" not in str(refused.value).strip()
            assert list(tmp_path.iterdir()) == []
            return
        summary = self.write(edge_source, place)
        assert summary is not None
        mismatches = self.compare(edge_source, place)
        assert mismatches == [], "\n".join(map(str, mismatches[:20]))
        self.check_reads(edge_source, place)

    def test_every_block_reads_from_a_store_opened_afresh(self, edge_source: Path, tmp_path: Path,
                                                        request: Any) -> None:
        """``verify`` plans a full scan in one process and reads it in others: every block
        the reader lists reads from a store opened afresh, which has read nothing yet, and
        a block of a source dataset holds the source's values."""
        import layoutkit

        place = self.place(self.home(), tmp_path, request)
        self.write(edge_source, place)
        with layoutkit.open(place.location) as got:
            blocks = got.blocks()
        assert blocks, "the reader lists no block"
        with layoutkit.open(edge_source) as source:
            in_source = source.arrays()
            for path, selection in blocks:
                with layoutkit.open(place.location) as fresh:
                    block = fresh.read_block(path, selection)
                if path in in_source and self.reads_like_source:
                    np.testing.assert_array_equal(block, source.get(path, selection), err_msg=path)

    def test_sample_archive(self, sample_source: Path, tmp_path: Path, request: Any) -> None:
        place = self.place(self.home(), tmp_path, request)
        summary = self.write(sample_source, place)
        assert summary.logical_bytes > 0 and summary.dest_bytes > 0
        assert self.compare(sample_source, place) == []

    def test_the_comparator_finds_a_changed_value(self, sample_source: Path, tmp_path: Path, request: Any) -> None:
        """A comparator that finds nothing proves nothing: against a copy of the source
        with one value changed, it names that dataset."""
        place = self.place(self.home(), tmp_path, request)
        self.write(sample_source, place)
        changed = tmp_path / "changed.h5"
        shutil.copyfile(sample_source, changed)
        with h5py.File(changed, "r+") as f:
            path = _a_signal(f)
            ds = f[path]
            first = (0,) * ds.ndim
            ds[first] = ds[first] + 1 if ds.dtype.kind != "b" else not ds[first]
        found = self.compare(changed, place)
        assert any(m.path == path and m.what == "values" for m in found), found

    def test_the_plan_is_pure(self, sample_source: Path, tmp_path: Path) -> None:
        """Planning reads the inventory only: the same plan twice, nothing written."""
        layout, options, inventory = self.the_layout(), self.the_options(), _inventory(sample_source)
        first = layout.plan(inventory, options, {}, dest=str(tmp_path / "out"))
        assert layout.plan(inventory, options, {}, dest=str(tmp_path / "out")) == first
        assert first.nbytes > 0 and list(tmp_path.iterdir()) == []

    def test_the_provenance_names_the_layout(self, sample_source: Path, tmp_path: Path, request: Any) -> None:
        from layoutkit.recipes import read_provenance

        place = self.place(self.home(), tmp_path, request)
        self.write(sample_source, place)
        doc = _provenance(place.path) if self.the_layout().format not in ("zarr", "hdf5") else \
            read_provenance(place.location)
        assert doc["command"] == self.the_layout().command
        assert doc["recipe"]["layout"] == self.the_layout().name

    def test_an_existing_destination_is_refused_and_kept(self, sample_source: Path, tmp_path: Path,
                                                         request: Any) -> None:
        place = self.place(self.home(), tmp_path, request, name="taken")
        if place.kind == "local":
            place.path.write_bytes(b"precious")
        else:  # a repository whose branch holds a store
            self.write(sample_source, place)
        before = _files_of(place.path)
        with pytest.raises(OutputExistsError):
            self.write(sample_source, place)
        assert _files_of(place.path) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == [place.path.name]

    def test_a_failure_leaves_nothing(self, sample_source: Path, tmp_path: Path, request: Any, monkeypatch: Any) -> None:
        """An error in the middle of the run (here: in the engine) removes the staged output."""
        from layoutkit import pipeline

        def broken(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("disk on fire")

        monkeypatch.setattr(pipeline, "_execute", broken)
        with pytest.raises(RuntimeError, match="disk on fire"):
            self.write(sample_source, self.place(self.home(), tmp_path, request))
        assert list(tmp_path.iterdir()) == []

    # -- appending (Layout.appends) ---------------------------------------------------------

    @pytest.fixture(scope="class")
    @classmethod
    def shot_files(cls, tmp_path_factory: Any) -> list[Path]:
        """Four shots, a file each (an archive fed one file per shot)."""
        from layoutkit.sample import write_sample

        folder = tmp_path_factory.mktemp("shot-files") / "files"
        write_sample(folder, shots=4, signals=4, seed=3, shots_per_file=1)
        return sorted(folder.glob("*.h5"), key=lambda p: [int(t) if t.isdigit() else t for t in p.stem.split("-")])

    def appends(self) -> bool:
        """Whether the layout appends with the suite's options (else appending must be refused)."""
        layout = self.the_layout()
        return layout.appends and layout.can_append(self.the_options())

    def write_files(self, files: list[Path], place: Place) -> Any:
        """The files as one archive, in one run (batches where the layout writes in them)."""
        from layoutkit.appending import batches

        return batches.run(self.the_layout(), [str(f) for f in files], place.destination(), self.the_options())

    def assert_append_refused(self, files: list[Path], place: Place) -> None:
        """What a layout that does not append must do: refuse in one sentence, its
        output as it was."""
        from layoutkit.appending.append import append

        self.write(files[0], place)  # one file: a layout that does not append need not take many
        before = _files_of(place.path)
        with pytest.raises(LayoutkitError) as refused:
            append([str(f) for f in files[1:]], place.location)
        assert "\n" not in str(refused.value).strip()
        assert _files_of(place.path) == before

    def test_two_appends_give_the_archive_of_one_run(self, shot_files: list[Path], tmp_path: Path) -> None:
        """Two files written, two appended: equal to the four files, and read as the
        archive of the four written in one run. A layout that does not append refuses,
        in one sentence, and its output is as it was."""
        import layoutkit
        from layoutkit.appending.append import append
        from layoutkit.verify.equality import compare_set

        grown = self.place(self.home(), tmp_path, None, name="grown")
        if not self.appends():
            self.assert_append_refused(shot_files, grown)
            return
        self.write_files(shot_files[:2], grown)
        summary = append([str(f) for f in shot_files[2:]], grown.location)
        assert (summary.new_sources, summary.new_shots) == (2, 2)
        mismatches = compare_set([str(f) for f in shot_files], grown.location)
        assert mismatches == [], "\n".join(map(str, mismatches[:20]))
        whole = self.place(self.home(), tmp_path, None, name="whole")
        self.write_files(shot_files, whole)
        with layoutkit.open(whole.location) as one, layoutkit.open(grown.location) as two:
            assert two.shots == one.shots
            assert_same_values(one, two)

    def test_the_same_append_again_writes_nothing(self, shot_files: list[Path], tmp_path: Path) -> None:
        from layoutkit.appending.append import append

        store = self.place(self.home(), tmp_path, None, name="store")
        if not self.appends():
            self.assert_append_refused(shot_files, store)
            return
        self.write_files(shot_files[:3], store)
        append([str(f) for f in shot_files[3:]], store.location)
        before = _files_of(store.path)
        again = append([str(f) for f in shot_files], store.location)
        assert again.wrote_nothing and again.new_sources == 0
        assert _files_of(store.path) == before

    def test_a_killed_append_leaves_the_previous_state(self, shot_files: list[Path], tmp_path: Path) -> None:
        """An append killed just before its commit leaves the store as it was (the next
        append takes over and cleans up; tests/test_append.py holds that part)."""
        import layoutkit
        from layoutkit.appending.append import JOURNAL, PAUSE_ENV
        from layoutkit.verify.equality import compare_set

        store = self.place(self.home(), tmp_path, None, name="store")
        if not self.appends():
            self.assert_append_refused(shot_files, store)
            return
        self.write_files(shot_files[:2], store)
        flag = tmp_path / "pause"
        proc = subprocess.Popen([sys.executable, "-m", "layoutkit", "--quiet", "convert", *map(str, shot_files[2:]),
                                 store.location, "--append"], env={**os.environ, PAUSE_ENV: str(flag)},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the append never reached its commit"
            time.sleep(0.05)
        if store.kind == "local":  # it had written the new shots' objects (an Icechunk commit needs no journal)
            assert (store.path / JOURNAL).exists()
        proc.kill()
        proc.wait()
        with layoutkit.open(store.location) as s:
            assert len(s.shots) == 2
        assert compare_set([str(f) for f in shot_files[:2]], store.location) == []


def _files_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (or the file itself), by relative path: its bytes."""
    if root.is_file():
        return {root.name: root.read_bytes()}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _inventory(path: Path) -> Any:
    from layoutkit.hdf5.inventory import read_inventory

    return read_inventory(path)


def _a_signal(f: h5py.File) -> str:
    """The first signal of numbers with data, in the sample archive: every layout writes it."""
    found: list[str] = []

    def visit(name: str, obj: Any) -> None:
        if not found and isinstance(obj, h5py.Dataset) and "/signals/" in f"/{name}" and obj.dtype.kind in "iuf" \
                and obj.size:
            found.append(f"/{name}")

    f.visititems(visit)
    assert found, "the sample archive has no numeric signal"
    return found[0]


def _provenance(output: Path) -> dict[str, Any]:
    """The provenance of an output of a layout of its own format: in ``attrs.json``
    beside it, as the example layout keeps it (a layout of another format overrides
    the test)."""
    attrs = json.loads((output / "attrs.json").read_text())
    return json.loads(attrs[PROVENANCE_ATTR])


__all__ = ["LayoutTests", "Place", "assert_same_reads", "assert_same_values", "build_edge_archive"]
