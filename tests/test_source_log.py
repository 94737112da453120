"""The log of sources: what a store was made from, kept outside its root (layoutkit.storage.log)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.sample import write_sample
from layoutkit.storage.editing import store_log
from layoutkit.storage.log import PREFIX, entry_key
from layoutkit.verify.equality import compare_set

runner = CliRunner()


def cli(*args: object):  # noqa: ANN201
    return runner.invoke(app, ["--quiet", *map(str, args)])


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[Path]:
    """20 shots, a file each."""
    work = tmp_path_factory.mktemp("log")
    write_sample(work / "files", shots=20, signals=2, seed=3, shots_per_file=1)
    return sorted((work / "files").glob("*.h5"), key=lambda p: int(p.stem.split("-")[1]))


def shape_of(root: Path) -> str:
    """A root document with every id and number written as one character and the index
    arrays' generation suffixes (``_shots_a1``: the one an append wrote) left out: what it
    holds apart from the values of its counts (a bounded index's shapes grow by digits)."""
    text = re.sub(r'_a\d+"', '"', (root / "zarr.json").read_text())
    return re.sub(r"\d+", "0", re.sub(r"\b[0-9a-f]{12}\b", "ID", text))


@pytest.mark.parametrize("layout", ["signal-major", "shot-packed"])
def test_the_root_does_not_grow_with_the_files(files, tmp_path, layout):
    """Fed 5 files, 20 files, or 5 then 3 appends of 5: the same root document but for
    the digits of its counts (before the log: ~170 bytes more per file), its nodes in
    another order once appended to; every source recorded, in one entry per run."""
    few, many, grown = tmp_path / "few.zarr", tmp_path / "many.zarr", tmp_path / "grown.zarr"
    assert cli("convert", *files[:5], few, "--layout", layout).exit_code == 0
    assert cli("convert", *files, many, "--layout", layout).exit_code == 0
    assert cli("convert", *files[:5], grown, "--layout", layout).exit_code == 0
    for k in (1, 2, 3):
        assert cli("convert", *files[5 * k:5 * k + 5], grown, "--append").exit_code == 0
    assert shape_of(few) == shape_of(many)
    assert len((many / "zarr.json").read_bytes()) - len((few / "zarr.json").read_bytes()) < 100
    assert len(shape_of(grown)) == len(shape_of(many))  # 4 entries or 1: a root of the same size
    assert len(store_log(str(few)).records) == 5 and len(store_log(str(many)).records) == 20
    log = store_log(str(grown))
    assert [e["entry"] for e in log.entries] == [0, 1, 2, 3] and log.appends == 3
    assert [r["name"] for r in log.records] == [f.name for f in files]
    assert sorted(p.name for p in (grown / PREFIX).iterdir()) == [entry_key(n).removeprefix(PREFIX) for n in range(4)]
    again = runner.invoke(app, ["convert", *map(str, files), str(grown), "--append"])
    assert again.exit_code == 0 and "nothing to append" in again.output


def test_an_entry_the_root_does_not_count_is_not_read(files, tmp_path):
    """An entry written by a run that did not commit (numbered past the root's count) is
    not a source of the store: its files are appended again."""
    store = tmp_path / "s.zarr"
    assert cli("convert", *files[:3], store).exit_code == 0
    stray = json.loads((store / entry_key(0)).read_text())
    stray.update(entry=1, id="0123456789ab", sources=[{"name": "x.h5", "size": 1, "digest": "sha256:" + "0" * 64}])
    (store / entry_key(1)).write_text(json.dumps(stray))
    assert [len(e["sources"]) for e in store_log(str(store)).entries] == [3]
    assert len(store_log(str(store)).records) == 3


def test_a_missing_entry_is_named(files, tmp_path):
    store = tmp_path / "s.zarr"
    assert cli("convert", *files[:3], store).exit_code == 0
    (store / entry_key(0)).unlink()
    result = runner.invoke(app, ["convert", str(files[3]), str(store), "--append"])
    assert result.exit_code not in (0, 1) and isinstance(result.exception, SystemExit)
    said = " ".join(result.output.split())
    assert "missing entry 0 of its log of sources" in said and "Traceback" not in result.output


def test_a_store_written_before_the_log_is_appended_to(files, tmp_path):
    """A store whose root lists its sources inline (written before the log): its files
    are recognised, an append starts the log beside the lists (which stay as they were)."""
    store = tmp_path / "old.zarr"
    assert cli("convert", *files[:4], store, "--layout", "signal-major").exit_code == 0
    root = json.loads((store / "zarr.json").read_text())
    provenance = json.loads(root["attributes"]["layoutkit"])
    entry = json.loads((store / entry_key(0)).read_text())
    del provenance["log"]
    provenance["sources"] = entry["sources"]
    root["attributes"]["layoutkit"] = json.dumps(provenance)
    (store / "zarr.json").write_text(json.dumps(root))
    shutil.rmtree(store / PREFIX)
    assert len(store_log(str(store)).records) == 4
    result = cli("convert", *files[:6], store, "--append")
    assert result.exit_code == 0, result.output
    log = store_log(str(store))
    assert [r["name"] for r in log.records] == [f.name for f in files[:6]] and log.appends == 1
    assert json.loads(json.loads((store / "zarr.json").read_text())["attributes"]["layoutkit"])["sources"] == \
        entry["sources"]
    assert compare_set(files[:6], store) == []


def test_icechunk_keeps_the_entries_in_its_commits(files, tmp_path):
    """Icechunk holds Zarr keys only: each run's entry is its commit's metadata."""
    import icechunk

    repo = tmp_path / "repo"
    assert cli("convert", *files[:3], f"icechunk:{repo}", "--layout", "signal-major").exit_code == 0
    assert cli("convert", *files[3:5], f"icechunk:{repo}", "--append").exit_code == 0
    log = store_log(f"icechunk:{repo}")
    assert [len(e["sources"]) for e in log.entries] == [3, 2] and log.appends == 1
    history = icechunk.Repository.open(icechunk.local_filesystem_storage(str(repo))).ancestry(branch="main")
    assert [s.metadata.get("layoutkit", {}).get("entry") for s in history][:2] == [1, 0]
    again = runner.invoke(app, ["convert", *map(str, files[:5]), f"icechunk:{repo}", "--append"])
    assert again.exit_code == 0 and "nothing to append" in again.output


def test_the_digests_are_computed_while_the_store_is_planned_and_written(files, tmp_path, monkeypatch):
    """The BLAKE3 a new store records of each source is computed in the background while
    the run walks and copies it (storage.sources.digests_ahead), not read again in series
    after the walk: with the in-series hashing taken away the records are still each
    file's digest, as the blake3 package computes it at once."""
    import blake3

    import layoutkit.storage.sources as sources

    real = sources.content_digest
    ahead = {"n": 0}

    def only_ahead(path, algorithm=sources.DIGEST, stop=None):  # noqa: ANN001, ANN202
        if stop is None:
            raise AssertionError("a source was hashed in series")
        ahead["n"] += 1
        return real(path, algorithm, stop)

    monkeypatch.setattr(sources, "content_digest", only_ahead)
    store = tmp_path / "three.zarr"
    assert cli("convert", *files[:3], store, "--compressor", "source").exit_code == 0
    records = store_log(str(store)).records
    assert [r["digest"] for r in records] == [f"blake3:{blake3.blake3(f.read_bytes()).hexdigest()}" for f in files[:3]]
    assert ahead["n"] == 3
    assert not sources._AHEAD  # noqa: SLF001 - nothing left computing once the run is over


def test_a_digest_computed_ahead_is_not_taken_for_a_file_that_changed_since(tmp_path):
    import threading

    import blake3

    import layoutkit.storage.sources as sources

    path = tmp_path / "f.h5"
    path.write_bytes(b"before" * 1000)
    with sources.digests_ahead(sources.as_source(str(path))):
        with open(path, "ab") as fh:
            fh.write(b"after")
        record = sources.source_record(path)
    assert record["digest"] == f"blake3:{blake3.blake3(path.read_bytes()).hexdigest()}"
    stop = threading.Event()
    stop.set()
    with pytest.raises(sources._Stopped):  # noqa: SLF001 - a digest no longer wanted stops reading
        sources.content_digest(path, "blake3", stop)


def test_a_store_begun_with_sha256_goes_on_with_it(files, tmp_path):
    """A store written before BLAKE3 records SHA-256 digests: an append to it computes
    SHA-256, so a copy of a recorded file (another modification time) is still known by
    its content, and the files it adds are recorded as the others are."""
    import hashlib

    store = tmp_path / "old.zarr"
    assert cli("convert", *files[:3], store).exit_code == 0
    entry = json.loads((store / entry_key(0)).read_text())
    by_name = {f.name: f for f in files}
    for record in entry["sources"]:
        assert record["digest"].startswith("blake3:")
        record["digest"] = "sha256:" + hashlib.sha256(by_name[record["name"]].read_bytes()).hexdigest()
    (store / entry_key(0)).write_text(json.dumps(entry))
    copy = tmp_path / "copies" / files[1].name
    copy.parent.mkdir()
    shutil.copyfile(files[1], copy)  # the same bytes, a new modification time
    result = cli("convert", copy, files[3], store, "--append")
    assert result.exit_code == 0, result.output
    records = store_log(str(store)).records
    assert [r["name"] for r in records] == [f.name for f in files[:4]]
    assert records[3]["digest"] == "sha256:" + hashlib.sha256(files[3].read_bytes()).hexdigest()
    assert compare_set(files[:4], store) == []
