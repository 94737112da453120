"""Icechunk destinations: one commit per run, nothing on failure, any snapshot readable."""

from __future__ import annotations

import json

import icechunk
import pytest
from typer.testing import CliRunner

import layoutkit
from layoutkit.cli import app
from layoutkit.storage.icechunk_repo import IcechunkKV
from layoutkit.verify.equality import compare_variant

runner = CliRunner()


def history(path) -> list:  # noqa: ANN001
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(path)))
    return list(repo.ancestry(branch="main"))


def run(*args) -> object:  # noqa: ANN002
    return runner.invoke(app, ["--quiet", *map(str, args)])


def test_each_run_is_one_commit_and_every_snapshot_stays_readable(shot_file, tmp_path):
    repo = tmp_path / "repo"
    first = run("convert", shot_file, repo, "--icechunk")
    assert first.exit_code == 0, first.output
    (v1, init) = history(repo)
    assert v1.message.startswith("layoutkit convert: ") and json.loads(v1.message.split(": ", 1)[1])["compressor"] == "zstd:3"
    refused = run("convert", shot_file, f"icechunk:{repo}")
    assert refused.exit_code == 2 and "pass --overwrite" in refused.output
    assert len(history(repo)) == 2
    second = run("convert", shot_file, f"icechunk:{repo}", "--overwrite", "--layout", "signal-major", "--shards", "auto")
    assert second.exit_code == 0, second.output
    v2 = history(repo)[0]
    assert v2.id != v1.id and '"layout": "signal-major"' in v2.message
    # the branch holds the new layout, the old snapshot the old one, both equal to the source
    assert compare_variant(shot_file, f"icechunk:{repo}") == []
    assert compare_variant(shot_file, f"icechunk:{repo}@{v1.id}") == []
    with layoutkit.open(f"icechunk:{repo}@{v1.id}") as old, layoutkit.open(f"icechunk:{repo}") as new:
        assert (old.layout, new.layout) == ("shot-major", "signal-major")
        shot = old.shots[0]
        assert old.shot(shot).identical(new.shot(shot))
    # the sidecar (links, left-out datasets, scale map) rides in the provenance attribute
    with layoutkit.open(f"icechunk:{repo}@{v1.id}") as old:
        assert "sidecar" in json.loads(old.root.attrs["layoutkit"])
    verify = run("verify", shot_file, f"icechunk:{repo}@{v1.id}", f"icechunk:{repo}", "--patterns", "shot",
                 "--sample", "1", "--repeat", "1")
    assert verify.exit_code == 0, verify.output


def test_a_failed_run_commits_nothing(shot_file, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    assert run("convert", shot_file, repo, "--icechunk").exit_code == 0
    before = [s.id for s in history(repo)]
    real = IcechunkKV.put
    calls = {"n": 0}

    def failing(self, key, data):  # noqa: ANN001, ANN202 - some chunks are in, then the store fails
        calls["n"] += 1
        if calls["n"] == 40:
            raise OSError("connection reset by peer")
        return real(self, key, data)

    monkeypatch.setattr(IcechunkKV, "put", failing)
    result = run("convert", shot_file, repo, "--icechunk", "--overwrite", "--compressor", "lz4")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert calls["n"] >= 40
    assert [s.id for s in history(repo)] == before  # the repository is where it was
    assert compare_variant(shot_file, f"icechunk:{repo}") == []
    calls["n"] = 0  # a repository this run would have created is not left behind
    result = run("convert", shot_file, tmp_path / "new-repo", "--icechunk")
    assert result.exit_code != 0 and not (tmp_path / "new-repo").exists()


def test_icechunk_refusals_are_one_sentence(shot_file, tmp_path):
    processes = run("convert", shot_file, tmp_path / "r1", "--icechunk", "--scheduler", "processes")
    assert processes.exit_code == 2 and "use --scheduler threads" in " ".join(processes.output.split())
    assert not (tmp_path / "r1").exists()
    hdf5 = run("reorder", shot_file, f"icechunk:{tmp_path / 'r2'}", "--by", "shot")
    assert hdf5.exit_code == 2 and "not to an Icechunk repository" in " ".join(hdf5.output.split()), hdf5.output
    missing = run("verify", shot_file, f"icechunk:{tmp_path / 'nothing'}")
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    bad_ref = run("convert", shot_file, tmp_path / "r3", "--icechunk")
    assert bad_ref.exit_code == 0
    unknown = run("verify", shot_file, f"icechunk:{tmp_path / 'r3'}@NOSUCHSNAPSHOT00000", "--patterns", "open")
    assert unknown.exit_code == 2 and "NOSUCHSNAPSHOT00000" in unknown.output


@pytest.mark.timeout(300)
def test_an_icechunk_repository_in_a_bucket(shot_file, tmp_path):
    """The same commit, with the repository under an s3:// prefix of a real S3 endpoint."""
    from layoutkit.testing import S3Endpoint

    server = S3Endpoint(buckets=("ice",))
    try:
        endpoint = server.url
        opts = ["--storage-option", f"endpoint_url={endpoint}", "--storage-option", "key=test",
                "--storage-option", "secret=test", "--storage-option", "region=us-east-1"]
        result = run("convert", shot_file, "icechunk:s3://ice/archive", *opts)
        assert result.exit_code == 0, result.output
        storage = {"endpoint_url": endpoint, "key": "test", "secret": "test", "region": "us-east-1"}
        assert compare_variant(shot_file, "icechunk:s3://ice/archive", storage_options=storage) == []
    finally:
        server.close()


def test_many_files_into_one_icechunk_commit(tmp_path):
    """A glob of files written as one archive is one commit, equal to the files."""
    from layoutkit.sample import write_sample
    from layoutkit.verify.equality import compare_set

    write_sample(tmp_path / "many", shots=6, signals=3, seed=3, shots_per_file=2)
    repo = tmp_path / "repo"
    result = run("convert", tmp_path / "many" / "shots-*.h5", f"icechunk:{repo}", "--layout", "shot-packed")
    assert result.exit_code == 0, result.output
    assert len(history(repo)) == 2  # the repository's first commit, and the run's
    assert compare_set(sorted((tmp_path / "many").glob("*.h5")), f"icechunk:{repo}") == []


def test_an_append_is_one_commit_and_the_same_append_again_none(tmp_path):
    from layoutkit.sample import write_sample
    from layoutkit.verify.equality import compare_set

    write_sample(tmp_path / "many", shots=5, signals=3, seed=3, shots_per_file=1)
    files = sorted((tmp_path / "many").glob("*.h5"))
    repo = tmp_path / "repo"
    assert run("convert", *files[:3], f"icechunk:{repo}", "--layout", "signal-major").exit_code == 0
    first = history(repo)[0]
    result = run("convert", *files, f"icechunk:{repo}", "--append")
    assert result.exit_code == 0, result.output
    commits = history(repo)
    assert len(commits) == 3 and commits[0].message.startswith("layoutkit convert --append: 2 sources, 2 shots")
    assert compare_set(files, f"icechunk:{repo}") == []
    assert compare_set(files[:3], f"icechunk:{repo}@{first.id}") == []  # the snapshot before it, as it was
    assert run("convert", *files, f"icechunk:{repo}", "--append").exit_code == 0
    assert len(history(repo)) == 3  # nothing new: no commit


def test_monthly_files_appended_along_time_in_one_commit(tmp_path):
    """netCDF months joined, then the next appended along time: one commit each, the
    store identical to open_mfdataset of all of them."""
    import xarray as xr
    from test_combined import monthly, open_mf, without_provenance

    files = monthly(tmp_path / "era5")
    repo = tmp_path / "repo"
    assert run("convert", *files[:2], f"icechunk:{repo}").exit_code == 0
    result = run("convert", files[2], f"icechunk:{repo}", "--append")
    assert result.exit_code == 0, result.output
    assert len(history(repo)) == 3
    with layoutkit.open(f"icechunk:{repo}") as store:
        got = xr.open_zarr(store.root.store, consolidated=False).load()
    xr.testing.assert_identical(without_provenance(got), open_mf(files))
