"""The virtual layout: references into the sources, proven and read without a copy."""

from __future__ import annotations

import os
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

import layoutkit
from layoutkit.cli import app
from layoutkit.errors import SourceChangedError
from layoutkit.sample import write_sample
from layoutkit.storage.editing import store_log
from layoutkit.storage.local import disk_usage
from layoutkit.verify.equality import compare_set, compare_variant

runner = CliRunner()


def cli(*args: object):  # noqa: ANN201
    return runner.invoke(app, [*map(str, args)])


@pytest.fixture(scope="module")
def shot_files(tmp_path_factory) -> list[Path]:
    """50 shots, a file each."""
    folder = tmp_path_factory.mktemp("virtual") / "files"
    write_sample(folder, shots=50, signals=3, seed=5, shots_per_file=1)
    return sorted(folder.glob("*.h5"), key=lambda p: int(p.stem.split("-")[1]))


def repository(tmp_path: Path, name: str = "repo") -> Path:
    return tmp_path / name


def zarr_alone(repo: Path, prefix: str):  # noqa: ANN201
    """The repository's store as zarr-python and icechunk alone open it."""
    import icechunk

    opened = icechunk.Repository.open(icechunk.local_filesystem_storage(str(repo)),
                                      authorize_virtual_chunk_access={prefix: icechunk.credentials.LocalFileSystemAccess})
    return opened.readonly_session("main").store


def top_folder(path: Path) -> str:
    return f"file:///{path.resolve().parts[1]}/"


def test_fifty_shot_files_are_referenced_equal_and_small(shot_files, tmp_path):
    import zarr

    repo = repository(tmp_path)
    result = cli("convert", *shot_files, repo, "--layout", "virtual")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert re.search(r"\d+ arrays referenced where they lie .*, 0 written", said), said
    assert compare_set(shot_files, f"icechunk:{repo}") == []
    sources = sum(f.stat().st_size for f in shot_files)
    assert disk_usage(repo) < 0.1 * sources, (disk_usage(repo), sources)
    root = zarr.open_group(zarr_alone(repo, top_folder(shot_files[0])), mode="r", zarr_format=3)
    for f in shot_files[::10]:
        with h5py.File(f) as h5:
            for path in ("signals/ip", "signals/ne_bar"):
                shot = next(iter(h5["shots"]))
                np.testing.assert_array_equal(root[f"shots/{shot}/{path}"][...], h5[f"shots/{shot}/{path}"][...])
    assert len(store_log(f"icechunk:{repo}").records) == 50


def test_an_append_adds_only_references(shot_files, tmp_path):
    import icechunk

    repo = repository(tmp_path)
    assert cli("--quiet", "convert", *shot_files[:30], repo, "--layout", "virtual").exit_code == 0
    before = disk_usage(repo)
    result = cli("convert", *shot_files[30:], f"icechunk:{repo}", "--append")
    assert result.exit_code == 0, result.output
    new_bytes = sum(f.stat().st_size for f in shot_files[30:])
    assert disk_usage(repo) - before < 0.1 * new_bytes
    assert compare_set(shot_files, f"icechunk:{repo}") == []
    opened = icechunk.Repository.open(icechunk.local_filesystem_storage(str(repo)))
    session = opened.readonly_session("main")
    located = set(session.all_virtual_chunk_locations())
    assert {f.resolve().as_uri() for f in shot_files} <= located
    with layoutkit.open(f"icechunk:{repo}") as store:
        assert len(store.shots) == 50 and store.layout == "virtual"
    again = cli("convert", *shot_files, f"icechunk:{repo}", "--append")
    assert again.exit_code == 0 and "nothing to append" in again.output


def test_a_source_rewritten_afterwards_is_refused_by_name(shot_files, tmp_path):
    import shutil

    files = [shutil.copy(f, tmp_path / f.name) for f in shot_files[:3]]
    repo = repository(tmp_path)
    assert cli("--quiet", "convert", *files, repo, "--layout", "virtual").exit_code == 0
    changed = Path(files[1])
    with h5py.File(changed, "r+") as h5:
        shot = next(iter(h5["shots"]))
        h5[f"shots/{shot}/signals/ip"][0] += 1
    stat = changed.stat()
    os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5 * 10**9))  # a rewrite seconds later
    with layoutkit.open(f"icechunk:{repo}") as store, pytest.raises(SourceChangedError) as refused:
        store.get(f"/shots/{shot}/signals/ip")
    assert str(changed) in str(refused.value) and "changed since it was referenced" in str(refused.value)
    with layoutkit.open(f"icechunk:{repo}") as store:  # the others still read
        other = next(iter(h5py.File(files[0])["shots"]))
        assert store.get(f"/shots/{other}/signals/ip").size > 0
    result = cli("verify", files[1], f"icechunk:{repo}", "--patterns", "shot", "--repeat", "1")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert f"{changed}changedsinceitwasreferenced" in "".join(result.output.split())  # (wrapped anywhere)


def mixed(path: Path) -> Path:
    """What can be referenced beside what cannot: gzip+shuffle chunks, a contiguous array,
    a compact one, text, scaleoffset, a chunk whose filters were skipped, unwritten chunks
    under a fill value."""
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("chunked", data=np.arange(10_000, dtype="f8"), chunks=(1000,), compression="gzip",
                         shuffle=True)
        f.create_dataset("contiguous", data=np.arange(600, dtype=">i4").reshape(20, 30))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        f.create_dataset("compact", data=np.arange(10, dtype="i2"), dcpl=dcpl)
        f.create_dataset("names", data=np.array(["a", "bb", "ccc"], dtype=h5py.string_dtype()))
        f.create_dataset("scaled", data=np.linspace(0, 1, 500).astype("f4"), chunks=(100,), scaleoffset=3)
        masked = f.create_dataset("masked", shape=(300,), dtype="i4", chunks=(100,), compression="gzip")
        masked[:200] = np.arange(200)
        masked.id.write_direct_chunk((200,), np.arange(100, dtype="i4").tobytes(), filter_mask=1)
        sparse = f.create_dataset("sparse", shape=(1000,), dtype="f4", chunks=(100,), fillvalue=-1.0)
        sparse[300:400] = 7.0
    return path


def test_what_cannot_be_referenced_is_written_and_said(tmp_path):
    import zarr

    source = mixed(tmp_path / "mixed.h5")
    repo = repository(tmp_path)
    result = cli("convert", source, repo, "--layout", "virtual")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    referenced = int(re.search(r"(\d+) arrays referenced", said).group(1))
    written = int(re.search(r"referenced where they lie \([^)]*\), (\d+) written", said).group(1))
    assert (referenced, written) == (4, 3), said  # chunked, contiguous, masked, sparse; compact, names, scaled
    assert "/names holds string values" in said and "/scaled uses scaleoffset" in said
    assert "chunks of referenced arrays written" in said  # the masked chunk
    assert compare_variant(source, f"icechunk:{repo}") == []
    root = zarr.open_group(zarr_alone(repo, top_folder(source)), mode="r", zarr_format=3)
    with h5py.File(source) as f:
        for name in ("chunked", "contiguous", "masked", "sparse", "scaled", "compact"):
            np.testing.assert_array_equal(root[name][...], f[name][...], err_msg=name)


def test_monthly_netcdf_files_read_as_open_mfdataset(tmp_path):
    import xarray as xr

    from tests.test_combined import monthly, open_mf

    files = monthly(tmp_path / "era5")
    repo = repository(tmp_path)
    result = cli("convert", *files, repo, "--layout", "virtual")
    assert result.exit_code == 0, result.output
    assert "joined from several files along a record dimension" in " ".join(result.output.split())
    got = xr.open_zarr(zarr_alone(repo, top_folder(files[0])), consolidated=False, zarr_format=3).load()
    got.attrs.pop("layoutkit"), got.attrs.pop("layoutkit_layout")  # what layoutkit records of the run, its layout
    xr.testing.assert_identical(got, open_mf(files))
    assert compare_set(files, f"icechunk:{repo}") == []


def test_inspect_reads_the_repository(shot_files, tmp_path):
    from layoutkit.inspect import inspect_path

    repo = repository(tmp_path)
    assert cli("--quiet", "convert", *shot_files[:3], repo, "--layout", "virtual").exit_code == 0
    report = inspect_path(f"icechunk:{repo}")
    with layoutkit.open(f"icechunk:{repo}") as store:
        assert report.arrays == len(store.arrays())
    assert report.written_by["recipe"]["layout"] == "virtual"
    assert report.chunks > 0 and report.logical_bytes > 0


def test_an_index_the_self_check_distrusts_is_never_referenced(tmp_path):
    """The five lines of issue #48 (libver latest, an unlimited last axis): HDF5's chunk
    query places chunks where they are not. A reference taken from it would point at the
    wrong bytes. Outside the extent the walk sees it, and the dataset is planned as
    written and said; inside it (rows 4-5 placed at (0, 6)) only the self-check's values
    do, and the writer writes its chunks, read through HDF5, instead of referencing them.
    Both stores equal the source, for zarr + icechunk alone too."""
    import warnings

    import zarr

    outside, inside = tmp_path / "outside.h5", tmp_path / "inside.h5"
    with h5py.File(outside, "w", libver="latest") as f:
        f.create_dataset("x", shape=(4, 6), chunks=(2, 3), maxshape=(10, None), dtype="i4")[...] = \
            np.arange(24).reshape(4, 6)
    with h5py.File(inside, "w", libver="latest") as f:
        ds = f.create_dataset("x", shape=(6, 9), chunks=(2, 3), maxshape=(10, None), dtype="i4", fillvalue=-7)
        ds[4:6, 0:3] = 9
    for src, said in ((outside, "1 written (96 B): /x is read through HDF5"),
                      (inside, "chunks of referenced arrays written")):
        repo = repository(tmp_path, src.stem)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fallback, said on the command line
            result = cli("convert", src, repo, "--layout", "virtual")
        assert result.exit_code == 0, result.output
        assert said in " ".join(result.output.split()), result.output
        assert compare_variant(src, f"icechunk:{repo}") == []
        root = zarr.open_group(zarr_alone(repo, top_folder(src)), mode="r", zarr_format=3)
        with h5py.File(src) as f:
            np.testing.assert_array_equal(root["x"][...], f["x"][...])


def test_reads_merge_the_references_next_to_each_other(shot_files, tmp_path):
    """layoutkit.open reads a shot's chunks, which lie next to each other in its file, with
    one ranged GET (from layoutkit's copy of the references), where Icechunk alone makes
    one per chunk; a signal of every shot costs a GET per file. The values are the
    source's, as h5py reads them."""
    from layoutkit.layouts.virtual.refindex import PREFIX

    files = shot_files[:6]
    repo = repository(tmp_path)
    assert cli("--quiet", "convert", *files, repo, "--layout", "virtual").exit_code == 0
    assert len(list((repo / PREFIX).iterdir())) == 1
    costs = {}
    for merged in (True, False):
        with layoutkit.open(f"icechunk:{repo}") as store:
            store.merged_reads = merged
            store.signal("ne_bar")  # the first read also fetches the copy of the references
            shots = {}
            for f in files:
                with h5py.File(f) as h5:
                    shot = next(iter(h5["shots"]))
                    before = store.counter.requests
                    tree = store.shot(shot)
                    shots[shot] = store.counter.requests - before
                    names = list(h5[f"shots/{shot}/signals"])
                    for name in names:
                        np.testing.assert_array_equal(tree[name].ds[name].values, h5[f"shots/{shot}/signals/{name}"][...])
            before = store.counter.requests
            series = store.signal("ip")
            costs[merged] = (shots, store.counter.requests - before, len(names))
            for f in files:
                with h5py.File(f) as h5:
                    shot = next(iter(h5["shots"]))
                    np.testing.assert_array_equal(series[shot].values, h5[f"shots/{shot}/signals/ip"][...])
    merged_shots, merged_signal, _ = costs[True]
    alone_shots, alone_signal, names = costs[False]
    assert set(merged_shots.values()) == {1}, merged_shots  # one file, one GET
    assert all(n >= names for n in alone_shots.values()), alone_shots  # a GET per chunk
    assert merged_signal == len(files) < alone_signal  # a signal and its time base: one GET


def test_merged_reads_refuse_a_rewritten_source_and_follow_an_append(shot_files, tmp_path):
    """The merged read checks the file's version as Icechunk does: a source modified after
    it was referenced is refused by name. An append writes its own copy of the new
    references, and its shots read merged too."""
    import shutil

    from layoutkit.layouts.virtual.refindex import PREFIX

    files = [Path(shutil.copy(f, tmp_path / f.name)) for f in shot_files[:4]]
    repo = repository(tmp_path)
    assert cli("--quiet", "convert", *files[:2], repo, "--layout", "virtual").exit_code == 0
    assert cli("--quiet", "convert", *files[2:], f"icechunk:{repo}", "--append").exit_code == 0
    assert len(list((repo / PREFIX).iterdir())) == 2
    shots = [next(iter(h5py.File(f)["shots"])) for f in files]
    with layoutkit.open(f"icechunk:{repo}") as store:
        for f, shot in zip(files, shots):
            before = store.counter.requests
            tree = store.shot(shot)
            assert store.counter.requests - before <= 3, (f, store.counter.requests - before)  # 1, or 3 with the copies
            with h5py.File(f) as h5:
                np.testing.assert_array_equal(tree["ip"].ds["ip"].values, h5[f"shots/{shot}/signals/ip"][...])
    stat = files[3].stat()
    with h5py.File(files[3], "r+") as h5:
        h5[f"shots/{shots[3]}/signals/ip"][0] += 1
    os.utime(files[3], ns=(stat.st_atime_ns, stat.st_mtime_ns + 5 * 10**9))
    with layoutkit.open(f"icechunk:{repo}") as store:
        assert store.shot(shots[0])["ip"].ds["ip"].size > 0
        with pytest.raises(SourceChangedError) as refused:
            store.shot(shots[3])
    assert str(files[3]) in str(refused.value) and "changed since it was referenced" in str(refused.value)


def test_no_source_is_read_whole_to_be_recorded(shot_files, tmp_path, monkeypatch):
    """A rewriting layout records each source's content digest (append knows a file by
    its content); the virtual layout reads no byte of data at conversion, so it records
    each local file by its version (size and modification time) and hashes none."""
    import layoutkit.storage.sources as sources

    def refused(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a source was read whole to be recorded")

    monkeypatch.setattr(sources, "content_digest", refused)
    repo = repository(tmp_path)
    assert cli("--quiet", "convert", *shot_files[:3], repo, "--layout", "virtual").exit_code == 0
    assert cli("--quiet", "convert", *shot_files[3:5], f"icechunk:{repo}", "--append").exit_code == 0
    again = cli("convert", *shot_files[:5], f"icechunk:{repo}", "--append")
    assert again.exit_code == 0 and "nothing to append" in again.output
    records = store_log(f"icechunk:{repo}").records
    assert len(records) == 5 and all(r["digest"].startswith("version:") for r in records), records


def test_a_source_whose_path_needs_escaping_in_its_url_reads_back(tmp_path):
    """A source's URL escapes its path (``=`` -> ``%3D``, a space -> ``%20``); the merged
    read opens the file the URL names, not a path with the escapes in it (advise's work
    folder ``work-signal=1`` once made every virtual read "changed since referenced")."""
    folder = tmp_path / "runs a=1"
    folder.mkdir()
    src = folder / "s.h5"
    write_sample(src, shots=3, signals=2, seed=2)
    repo = repository(tmp_path)
    assert cli("--quiet", "convert", src, repo, "--layout", "virtual").exit_code == 0
    with layoutkit.open(f"icechunk:{repo}") as store, h5py.File(src) as h5:
        assert store.merged_reads
        series = store.signal("ip")
        for shot in h5["shots"]:
            np.testing.assert_array_equal(series[shot].values, h5[f"shots/{shot}/signals/ip"][...])


def test_a_repository_named_without_its_prefix_is_one_to_every_command(shot_files, tmp_path):
    """convert writes `virtual.icechunk` (no `icechunk:`); verify, inspect, recipes from,
    convert --append, layoutkit.open and the xarray engine take that same name (issue 64)."""
    import xarray as xr

    repo = tmp_path / "virtual.icechunk"
    assert cli("--quiet", "convert", *shot_files[:3], repo, "--layout", "virtual").exit_code == 0
    assert not list(repo.glob("zarr.json"))  # an Icechunk repository, not a Zarr folder
    listed = tmp_path / "sources.txt"
    listed.write_text("".join(f"{f}\n" for f in shot_files[:3]))
    checked = cli("verify", repo, "--sources-from", listed, "--patterns", "open", "--repeat", "1")
    assert checked.exit_code == 0, checked.output
    assert compare_set(shot_files[:3], repo) == []
    inspected = cli("inspect", repo)
    assert inspected.exit_code == 0 and f"icechunk:{repo}:zarrv3" in "".join(inspected.output.split())  # as wrapped
    recipe = cli("recipes", "from", repo)
    assert recipe.exit_code == 0 and 'layout = "virtual"' in recipe.output
    appended = cli("--quiet", "convert", *shot_files[3:5], repo, "--append")
    assert appended.exit_code == 0, appended.output
    with layoutkit.open(repo) as store:
        assert len(store.shots) == 5 and store.layout == "virtual"
    tree = xr.open_datatree(repo, engine="layoutkit", group=store.shots[0])
    assert len(tree.data_vars) > 0
    # a folder that only looks alike (no snapshots) stays what it is: not a Zarr store
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "repo").write_text("")
    assert cli("inspect", tmp_path / "plain").exit_code == 2


def test_a_shot_is_read_from_the_index_without_icechunk(shot_files, tmp_path, monkeypatch):
    """convert and append write layoutkit's index of the snapshot they commit; one shot
    then reads (its nodes, the references of its chunks) from its bucket and the source
    files, never from Icechunk, whose first read loads the snapshot of every node (0.6 s
    at 50,000 shots); the whole tree still reads as Icechunk holds it, and a snapshot
    without an index reads through Icechunk."""
    import shutil

    import icechunk
    import xarray as xr

    from layoutkit.storage import nodeindex

    repo = repository(tmp_path)
    assert cli("--quiet", "convert", *shot_files[:3], repo, "--layout", "virtual").exit_code == 0
    assert cli("--quiet", "convert", *shot_files[3:5], repo, "--append").exit_code == 0
    heads = sorted((Path(repo) / nodeindex.PREFIX).glob("snapshot-*.json"))
    assert len(heads) == 2  # one a commit
    with layoutkit.open(repo) as whole:
        want = {shot: whole.shot(shot) for shot in whole.shots}
    calls = []
    real = icechunk.IcechunkStore.get

    async def counted(self, key, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(key)
        return await real(self, key, *args, **kwargs)

    monkeypatch.setattr(icechunk.IcechunkStore, "get", counted)
    for shot in want:  # the first three shots, and the two appended
        for signal in want[shot].children:
            ds = xr.open_dataset(repo, engine="layoutkit", group=f"{shot}/{signal}").load()
            xr.testing.assert_identical(ds[signal], want[shot][signal][signal])
        with layoutkit.open(repo) as store:
            xr.testing.assert_identical(store.shot(shot), want[shot])
    assert calls == [], sorted(set(calls))  # nothing of Icechunk's read
    shutil.rmtree(Path(repo) / nodeindex.PREFIX)
    shot = next(iter(want))
    ds = xr.open_dataset(repo, engine="layoutkit", group=f"{shot}/ip").load()
    xr.testing.assert_identical(ds["ip"], want[shot]["ip"]["ip"])
    assert calls  # without the index: through Icechunk


def test_a_read_of_a_chunk_or_two_does_not_load_every_reference(shot_files, tmp_path):
    """Without the index of the snapshot: one signal and its time base go through
    Icechunk (two GETs) instead of loading layoutkit's copy of every reference in the
    repository, which grows with the archive (1.3 s of a 2 s read of one signal at 50,000
    shots); a larger read loads it once and merges."""
    import shutil

    import xarray as xr

    from layoutkit.storage import nodeindex

    files = shot_files[:4]
    repo = repository(tmp_path)
    assert cli("--quiet", "convert", *files, repo, "--layout", "virtual").exit_code == 0
    shutil.rmtree(Path(repo) / nodeindex.PREFIX)
    with h5py.File(files[0]) as h5:
        shot = next(iter(h5["shots"]))
        want = h5[f"shots/{shot}/signals/ip"][...]
    with layoutkit.open(f"icechunk:{repo}") as store:
        ds = xr.open_dataset(store, engine="layoutkit", group=f"{shot}/ip").load()
        np.testing.assert_array_equal(ds["ip"].values, want)
        assert store._index is None  # the copy of the references was not read
        store.signal("ip")  # a chunk per shot: worth merging
        assert store._index is not None and store._index.done()


def nexus_like(path: Path, groups: int = 12) -> Path:
    """A NeXus-like file (a detector's collections): in each group three axes in chunks of
    64 values and a stack of images in chunks of 16 x 16 pixels, deflated and shuffled,
    and a name: thousands of chunks of a few hundred bytes."""
    rng = np.random.default_rng(7)
    with h5py.File(path, "w") as f:
        entry = f.create_group("entry")
        entry.attrs["NX_class"] = "NXentry"
        for i in range(groups):
            g = entry.create_group(f"collection_{i}")
            g.attrs["NX_class"] = "NXcollection"
            for j in range(3):
                g.create_dataset(f"axis{j}", data=rng.standard_normal(2000 + 37 * j), chunks=(64,), compression="gzip")
            g.create_dataset("frames", data=rng.integers(0, 1000, (8, 64, 64), dtype="u2"), chunks=(1, 16, 16),
                             compression="gzip", shuffle=True)
            g.create_dataset("name", data=f"motor {i}")
    return path


def test_a_scan_of_many_small_chunks_follows_the_bytes_not_the_chunks(tmp_path):
    """A scan of a virtual store (verify's pattern) reads runs of whole chunks, several
    arrays' together, as merged reads of their references (issue 64): far fewer requests
    than `layoutkit.open` makes on the source file, where a read a chunk made one a chunk.
    Values as h5py reads them, unit by unit and in turn, and the store proven equal."""
    src = nexus_like(tmp_path / "nexus.h5")
    repo = repository(tmp_path)
    assert cli("--quiet", "convert", src, repo, "--layout", "virtual").exit_code == 0
    with h5py.File(src) as f:
        chunks = sum(f[p].id.get_num_chunks() for p in [f"entry/collection_{i}/{n}" for i in range(12)
                                                        for n in ("axis0", "axis1", "axis2", "frames")])
    requests = {}
    for name in (src, repo):
        with layoutkit.open(name) as archive, h5py.File(src) as f:
            blocks = archive.blocks()
            archive.counter.reset()
            for (path, sel), got in zip(blocks, archive.read_blocks(blocks), strict=True):
                if not path.endswith("name"):
                    np.testing.assert_array_equal(got, f[path][sel])
            requests[name] = archive.counter.requests
            for path, sel in blocks[::7]:  # one unit alone: the same values
                if not path.endswith("name"):
                    np.testing.assert_array_equal(archive.read_block(path, sel), f[path][sel])
    assert chunks > 2500 and len(blocks) == 12 * 5
    # 2 MB of referenced chunks in one file: a few merged GETs (and the copy of the
    # references); the 12 names are text, written into the repository: a read each
    assert requests[repo] <= 12 + 3 < requests[src], requests
    assert compare_variant(src, repo) == []


def test_a_scan_of_huge_declared_extents_reads_what_is_stored(tmp_path):
    """An array declared with 2**40 elements and one chunk written (HDF5's tbigdims.h5
    kind): a scan reads the blocks that hold stored chunks, on the source, a Zarr copy
    and the virtual store alike, not 500,000 blocks of fill value (a verify of such a
    file ran past 5 minutes). The fill is still what every reader gives around it."""
    src = tmp_path / "bigdims.h5"
    with h5py.File(src, "w") as f:
        d = f.create_dataset("huge1d", shape=(2**40,), dtype="f8", chunks=(1024,), compression="gzip")
        d[5000:5010] = np.arange(10.0)
        e = f.create_dataset("huge2d", shape=(200_000, 200_000), dtype="i4", chunks=(100, 100), fillvalue=-1)
        e[0:3, 0:3] = 7
        e[150_000, 150_000] = 9
        f.create_dataset("small", data=np.arange(5))
    repo, store = repository(tmp_path), tmp_path / "copy.zarr"
    assert cli("--quiet", "convert", src, repo, "--layout", "virtual").exit_code == 0
    assert cli("--quiet", "convert", src, store).exit_code == 0
    for name in (src, repo, store):
        with layoutkit.open(name) as archive:
            blocks = archive.blocks()
            assert [p for p, _ in blocks].count("/huge2d") == 2 and len(blocks) == 4, (name, blocks)
            archive.counter.reset()
            got = dict(zip((p for p, _ in blocks), archive.read_blocks(blocks)))
            if name == repo:  # the chunks never written are not asked for (2,469 requests, each for nothing)
                assert archive.counter.requests <= 8, archive.counter
            assert got["/huge1d"][5000:5010].tolist() == list(range(10)) and got["/huge1d"][0] == 0
            corner = archive.get("/huge2d", (slice(0, 4), slice(0, 4)))
            assert corner[:3, :3].tolist() == [[7] * 3] * 3 and corner[3, 3] == -1, name
            assert archive.get("/huge2d", (150_000, 150_000)) == 9
    result = cli("verify", src, repo, store, "--patterns", "scan", "--repeat", "1")
    assert result.exit_code == 0, result.output


def test_an_array_at_the_root_is_read_from_the_references_not_a_get_a_chunk(tmp_path):
    """A netCDF file's variables sit at the root, in no shot's bucket of the node index:
    their chunks come from the one copy of every reference, merged, not through Icechunk
    a chunk at a time."""
    src = tmp_path / "era.h5"
    data = np.random.default_rng(1).standard_normal((40, 30, 20)).astype("f4")
    with h5py.File(src, "w") as f:
        f.create_dataset("t2m", data=data, chunks=(4, 15, 20), compression="gzip")
    repo = repository(tmp_path)
    assert cli("--quiet", "convert", src, repo, "--layout", "virtual").exit_code == 0
    with layoutkit.open(repo) as archive:
        archive.counter.reset()
        np.testing.assert_array_equal(archive.get("/t2m", (slice(3, 37), slice(None), 5)), data[3:37, :, 5])
        assert archive.counter.requests <= 3  # 20 chunks: the references' copy and one merged read


def test_references_set_over_a_box_leave_the_chunks_never_written_unset(tmp_path):
    """The references of an array go to Icechunk as flat arrays over the box of chunks
    they cover: a chunk never written inside that box must stay unset (read as the fill
    value), each written one point at its own bytes, also from an origin other than 0
    and in an array whose written chunks are too sparse for a box. Read back by
    icechunk and zarr alone."""
    import zarr

    src = tmp_path / "holes.h5"
    grid = np.zeros((60, 40), dtype="i4")
    with h5py.File(src, "w") as f:
        d = f.create_dataset("holes", shape=(60, 40), dtype="i4", chunks=(10, 10), fillvalue=-5)
        for i in range(6):
            for j in range(4):
                if (i + j) % 2 and i >= 2:  # a checkerboard, starting at chunk row 2
                    d[i * 10:(i + 1) * 10, j * 10:(j + 1) * 10] = 100 * i + j
        grid[...] = d[...]
        s = f.create_dataset("sparse", shape=(100_000,), dtype="f4", chunks=(10,), fillvalue=np.nan)
        s[0:3], s[99_990:99_992] = [1, 2, 3], [4, 5]
    repo = repository(tmp_path)
    result = cli("--quiet", "convert", src, repo, "--layout", "virtual")
    assert result.exit_code == 0, result.output
    root = zarr.open_group(zarr_alone(repo, top_folder(tmp_path)), mode="r")
    np.testing.assert_array_equal(root["holes"][...], grid)
    assert (grid == -5).sum() == 60 * 40 // 2 + 20 * 40 // 2  # the holes read as the fill value
    sparse = root["sparse"]
    assert sparse[0:3].tolist() == [1, 2, 3] and sparse[99_990:99_992].tolist() == [4, 5]
    assert np.isnan(sparse[500:510]).all()


def master_file(folder: Path, frames: int = 4, chunks: tuple[int, ...] | None = (1, 8, 8), files: int = 3,
                written: int | None = None) -> tuple[Path, np.ndarray]:
    """A NeXus-like master file: an HDF5 virtual dataset whose frames lie in ``files`` data
    files beside it (``frames`` each, gzip'd in ``chunks``, or contiguous), then two
    frames mapped from nowhere (the fill value, 7); the last file's dataset written in its
    first ``written`` frames only. What HDF5 reads from it."""
    folder.mkdir(parents=True, exist_ok=True)
    layout = h5py.VirtualLayout(shape=((files * frames) + 2, 8, 8), dtype="<u2")
    for i in range(files):
        frame = (np.arange(frames * 64, dtype="<u2") * (i + 1)).reshape(frames, 8, 8)
        with h5py.File(folder / f"data_{i:06d}.h5", "w") as f:
            kw = {"chunks": chunks, "compression": "gzip"} if chunks else {}
            ds = f.create_dataset("entry/data/data", shape=frame.shape, dtype="<u2", **kw)
            ds[: written if written is not None and i == files - 1 else frames] = \
                frame[: written if written is not None and i == files - 1 else frames]
        layout[i * frames:(i + 1) * frames] = h5py.VirtualSource(f"data_{i:06d}.h5", "entry/data/data",
                                                                  shape=frame.shape)
    master = folder / "master.h5"
    with h5py.File(master, "w") as f:
        f.create_virtual_dataset("entry/data/data", layout, fillvalue=7)
        f["entry/instrument/distance"] = 0.25
    with h5py.File(master) as f:
        return master, f["entry/data/data"][()]


@pytest.mark.parametrize(("chunks", "frames", "written", "referenced"), [
    ((1, 8, 8), 4, None, True),  # the detector's frames, gzip'd: every chunk referenced
    ((2, 8, 8), 4, 1, True),  # a chunk never written in its file: written (the data file's fill value)
    (None, 4, None, True),  # contiguous frames: each file's dataset one chunk
    ((2, 8, 8), 3, None, False),  # blocks of 3 frames on a grid of 2: written, and why
])
def test_a_master_files_frames_are_referenced_in_the_files_they_lie_in(tmp_path: Path, chunks: tuple[int, ...] | None,
                                                                        frames: int, written: int | None,
                                                                        referenced: bool) -> None:
    """An HDF5 virtual dataset (the NeXus master file's frames in data files of their own),
    written as chunks by the virtual layout, is referenced from the chunks of the datasets
    it maps where its chunk grid can be theirs (issue 65): proven equal, read by
    icechunk and zarr-python alone as HDF5 reads it, and, once a data file changes, no
    longer read as if it had not. Where the grid cannot be theirs it is written and the
    summary says why."""
    import zarr

    master, want = master_file(tmp_path / "scan", frames=frames, chunks=chunks, written=written)
    repo = repository(tmp_path)
    result = cli("convert", master, repo, "--layout", "virtual")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    if referenced:
        assert "1 arrays referenced where they lie" in said and "/entry/data/data" not in said, said
        assert ("1 chunks of referenced arrays written" in said) == (written is not None), said
    else:
        assert "0 arrays referenced" in said and ("/entry/data/data is an HDF5 virtual dataset whose mapped blocks are "
                                                  "not on their chunk grid") in said, said
    assert compare_variant(master, f"icechunk:{repo}") == []
    root = zarr.open_group(zarr_alone(repo, top_folder(master)), mode="r", zarr_format=3)
    np.testing.assert_array_equal(root["entry/data/data"][...], want)
    if referenced:  # the frames are read from the data files: one changed is not read as it was
        with h5py.File(master.parent / "data_000000.h5", "a") as f:
            f["entry/data/data"][0] = 1
        os.utime(master.parent / "data_000000.h5", (1e9, 2e9))
        with pytest.raises(Exception, match="has changed"):  # noqa: B017 - icechunk's error for a file modified since
            zarr.open_group(zarr_alone(repo, top_folder(master)), mode="r", zarr_format=3)["entry/data/data"][0]
