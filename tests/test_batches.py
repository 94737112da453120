"""Many sources written in batches (issue 38: "the driver holds no inventory of all
datasets of all files"): the first batch converted, each next appended, published once;
the driver holds one batch's inventory; a failure leaves nothing, in a folder, a bucket
and Icechunk."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import layoutkit
from layoutkit.appending import batches
from layoutkit.cli import app
from layoutkit.hdf5 import combined
from layoutkit.layouts import get_layout, layouts_of
from layoutkit.sample import write_sample
from layoutkit.storage import SourceSet
from layoutkit.storage.editing import store_log
from layoutkit.testing import assert_same_values
from layoutkit.verify.equality import compare_set
from layoutkit.zarr_options import ConvertOptions

ZARR_LAYOUTS = [layout.name for layout in layouts_of("convert") if "local" in layout.destinations]  # virtual: its own tests
runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[Path]:
    """12 files of one shot each (3 signals and their time bases)."""
    folder = tmp_path_factory.mktemp("batches") / "files"
    write_sample(folder, shots=12, signals=3, seed=4, shots_per_file=1)
    return sorted(folder.glob("*.h5"))


def cli(*args: object):  # noqa: ANN201
    return runner.invoke(app, [*map(str, args)])


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if "layoutkit-" in p.name)


@pytest.mark.parametrize("layout", ZARR_LAYOUTS)
def test_files_in_batches_make_the_store_of_one_run(files, tmp_path, layout):
    """12 files, 5 at a time: 3 batches; the store equal to every file and to the store of
    one run, listing every source (so their append writes nothing); nothing staged left."""
    store, whole = tmp_path / "batched.zarr", tmp_path / "whole.zarr"
    result = cli("convert", *files, store, "--layout", layout, "--batch-files", 5)
    assert result.exit_code == 0, result.output
    assert "in 3 batches" in " ".join(result.output.split())
    assert cli("--quiet", "convert", *files, whole, "--layout", layout).exit_code == 0
    assert compare_set(files, store) == []
    with layoutkit.open(store) as b, layoutkit.open(whole) as w:
        assert b.layout == layout and b.shots == w.shots
        assert_same_values(w, b)
    log = store_log(str(store))
    assert len(log.records) == 12 and [len(e["sources"]) for e in log.entries] == [5, 5, 2] and log.appends == 2
    again = cli("convert", *files, store, "--append")
    assert again.exit_code == 0 and "nothing to append" in again.output
    assert leftovers(tmp_path) == []


def test_the_driver_holds_one_batch(files, tmp_path, monkeypatch):
    """Every inventory the driver combines holds one batch's files at most, and the dry
    run says how the run is cut; without --batch-files the cut is by datasets."""
    sizes: list[int] = []
    real = combined.combine

    def spy(sources, inventories):  # noqa: ANN001, ANN202
        sizes.append(len(sources.members))
        return real(sources, inventories)

    monkeypatch.setattr(combined, "combine", spy)
    released: list[int] = []  # what a batch freed goes back to the system before the next
    monkeypatch.setattr(batches, "release_freed_memory", lambda: released.append(len(sizes)))
    dry = cli("convert", *files, tmp_path / "d.zarr", "--layout", "signal-major", "--batch-files", 4, "--dry-run")
    assert dry.exit_code == 0 and "written in 3 batches of at most 4 files" in " ".join(dry.output.split())
    assert not (tmp_path / "d.zarr").exists()
    sizes.clear()
    assert cli("--quiet", "convert", *files, tmp_path / "s.zarr", "--layout", "signal-major",
               "--batch-files", 4).exit_code == 0
    assert sizes and max(sizes) <= 4 and sum(sizes) >= 12
    assert len(released) == 2 and released[0] >= 1  # before the second batch and the third
    # by datasets: a batch holds as many files as BATCH_DATASETS datasets, judged by the first file
    per_file = len(layoutkit.hdf5.inventory.read_inventory(files[0]).arrays)
    monkeypatch.setattr(batches, "BATCH_DATASETS", 3 * per_file)
    layout = get_layout("signal-major")
    decided, walked = batches.decide(layout, [str(f) for f in files], ConvertOptions(layout="signal-major"))
    assert decided.batch == 3 and [w.path for w in walked] == [str(files[0])]
    walks: list[str] = []
    for module in (batches, combined):  # the count of the first file, and the batches' walks
        real_walk = module.read_inventory
        monkeypatch.setattr(module, "read_inventory", lambda src, *a, _w=real_walk, **k: walks.append(str(src))
                            or _w(src, *a, **k))
    sizes.clear()
    assert cli("--quiet", "convert", *files, tmp_path / "auto.zarr", "--layout", "shot-packed").exit_code == 0
    assert sorted(walks) == sorted(map(str, files))  # each file walked once, the first too
    assert max(sizes) == 3 and compare_set(files, tmp_path / "auto.zarr") == []


def test_what_is_written_in_one_run(files, tmp_path):
    """Zarr v2 (not appended to) and paged HDF5 write their sources in one run, and an
    append adds its files in one commit: --batch-files is refused for both in one
    sentence; few files are one batch."""
    v2 = cli("convert", *files[:3], tmp_path / "v2.zarr", "--zarr-format", 2, "--batch-files", 2)
    assert v2.exit_code == 2 and "one run" in v2.output and "Traceback" not in v2.output
    assert not (tmp_path / "v2.zarr").exists()
    assert cli("--quiet", "convert", files[0], tmp_path / "a.zarr").exit_code == 0
    appended = cli("convert", *files[1:3], tmp_path / "a.zarr", "--append", "--batch-files", 1)
    assert appended.exit_code == 2 and "one commit" in appended.output
    options = ConvertOptions(layout="shot-packed")
    decided, _ = batches.decide(get_layout("shot-packed"), [str(f) for f in files[:3]], options)
    assert isinstance(decided, SourceSet) and decided.batch == 3 and not batches.in_batches(decided)
    paged = layouts_of("reorder")[0]
    assert not paged.can_append(paged.default_options())


def test_a_batch_that_fails_leaves_nothing(files, tmp_path):
    """A shot of a later batch with other data than an earlier batch's copy: refused by
    name (the shot, the earlier batches' files, the file), no store, nothing staged; over
    an existing store (--overwrite) the old store stays as it was."""
    import shutil

    import h5py

    folder = tmp_path / "files"
    folder.mkdir()
    for f in files[:6]:
        shutil.copy(f, folder / f.name)
    odd = folder / "zz-odd.h5"
    shutil.copy(files[1], odd)
    with h5py.File(odd, "r+") as f:
        name = next(iter(f["shots"]))
        signal = next(iter(f[f"shots/{name}/signals"]))
        f[f"shots/{name}/signals/{signal}"][0] += 1
    store = tmp_path / "s.zarr"
    result = cli("convert", str(folder / "*.h5"), store, "--batch-files", 3)
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and f"Shot {name} is in" in said and "earlier batches" in said
    assert "zz-odd.h5" in said and "Traceback" not in said
    assert not store.exists() and leftovers(tmp_path) == []
    assert cli("--quiet", "convert", *files[:2], store).exit_code == 0
    before = {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file()}
    assert cli("convert", str(folder / "*.h5"), store, "--batch-files", 3, "--overwrite").exit_code == 2
    assert {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
    assert leftovers(tmp_path) == []


def test_batches_on_a_cluster(files, tmp_path):
    """--scheduler tcp://...: each batch's files walked by the cluster's workers, its
    shots written by them; the store equal to the files."""
    from distributed import LocalCluster

    store = tmp_path / "c.zarr"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        result = cli("--quiet", "convert", *files[:6], store, "--layout", "shot-packed", "--batch-files", 2,
                     "--scheduler", cluster.scheduler_address)
    assert result.exit_code == 0, result.output
    assert compare_set(files[:6], store) == [] and store_log(str(store)).appends == 2


def test_batches_into_icechunk(files, tmp_path):
    """Each batch one commit (a shot-major store's appended nodes committed, their metadata
    before their chunks); a run that fails resets the branch to the snapshot it had before
    (the old store still there, equal to its files)."""
    import h5py
    import icechunk

    repo = tmp_path / "repo"
    assert cli("--quiet", "convert", *files[:2], f"icechunk:{repo}").exit_code == 0
    result = cli("--quiet", "convert", *files[:6], f"icechunk:{repo}", "--batch-files", 2, "--overwrite")
    assert result.exit_code == 0, result.output

    def history() -> list:
        return list(icechunk.Repository.open(icechunk.local_filesystem_storage(str(repo))).ancestry(branch="main"))

    assert len(history()) == 5  # the repository's, the first store's, and the run's three batches
    assert compare_set(files[:6], f"icechunk:{repo}") == []
    odd = tmp_path / "odd.h5"
    odd.write_bytes(files[6].read_bytes())  # shot 7, in the run's first batch, with other data
    with h5py.File(odd, "r+") as f:
        shot = next(iter(f["shots"]))
        f[f"shots/{shot}/signals/{next(iter(f[f'shots/{shot}/signals']))}"][0] += 1
    failed = cli("--quiet", "convert", *files[6:10], odd, f"icechunk:{repo}", "--batch-files", 2, "--overwrite",
                 "--layout", "signal-major")
    assert failed.exit_code == 2 and "earlier batches" in " ".join(failed.output.split())
    assert len(history()) == 5
    assert compare_set(files[:6], f"icechunk:{repo}") == []


def test_what_every_batch_left_out_is_listed(files, tmp_path):
    """--skip-unsupported: the datasets each batch left out (in every shot a virtual
    dataset whose mapped file is missing) are all listed, not only the first batch's."""
    import shutil

    import h5py

    copies = []
    for f in files[:4]:
        copy = tmp_path / f.name
        shutil.copy(f, copy)
        with h5py.File(copy, "r+") as h5:
            shot = next(iter(h5["shots"]))
            layout = h5py.VirtualLayout(shape=(3,), dtype="f8")
            layout[:] = h5py.VirtualSource("gone.h5", "x", shape=(3,))
            h5.create_virtual_dataset(f"shots/{shot}/triples", layout, fillvalue=0)
        copies.append((copy, shot))
    result = cli("convert", *(c for c, _ in copies), tmp_path / "s.zarr", "--batch-files", 2, "--skip-unsupported")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert all(f"skipped /shots/{shot}/triples:" in said for _, shot in copies), said


def test_monthly_netcdf_files_in_batches(tmp_path):
    """netCDF months with --batch-files: each batch appended along time; the store opens
    in xarray identical to open_mfdataset of the files. Without it they are one run, which
    alone takes months each packed with its own scale (stored decoded)."""
    import xarray as xr
    from test_combined import monthly, open_mf, without_provenance

    files = monthly(tmp_path / "era5", packed=False)
    store = tmp_path / "t2m.zarr"
    result = cli("convert", *files, store, "--batch-files", 1)
    assert result.exit_code == 0, result.output
    assert "in 3 batches" in " ".join(result.output.split())
    xr.testing.assert_identical(without_provenance(xr.open_zarr(store).load()), open_mf(files))
    assert compare_set(files, store) == []
    decided, _ = batches.decide(get_layout("shot-major"), [str(f) for f in files], ConvertOptions())
    assert not batches.in_batches(decided)
    # months packed each with its own scale: one run stores them decoded; batches cannot
    packed = monthly(tmp_path / "packed", packed=True)
    refused = cli("convert", *packed, tmp_path / "p.zarr", "--batch-files", 1)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "earlier batches" in said and "encoded otherwise" in said
    assert not (tmp_path / "p.zarr").exists() and cli("--quiet", "convert", *packed, tmp_path / "p.zarr").exit_code == 0
