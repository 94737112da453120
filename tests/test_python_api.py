"""The Python API speaks the command line's values and the caller's words (issue #51)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import layoutkit
from layoutkit.cli import app
from layoutkit.errors import InvalidOptionError, OutputExistsError
from layoutkit.layouts.hdf5_paged.options import ReorderOptions
from layoutkit.options import parse_chunks, parse_compressor, parse_shards
from layoutkit.reorder import reorder
from layoutkit.sample import write_sample

runner = CliRunner()


def test_options_take_the_values_the_command_line_takes():
    typed = layoutkit.ConvertOptions(compressor="lz4", chunks="auto", shards="auto", memory_limit="1GiB",
                                     chunk_bytes="8MiB", workers="3", zarr_format="3", batch_files="10")
    assert typed == layoutkit.ConvertOptions(compressor=parse_compressor("lz4"), chunks=parse_chunks("auto"),
                                             shards=parse_shards("auto"), memory_limit=1024**3,
                                             chunk_bytes=8 * 1024**2, workers=3, zarr_format=3, batch_files=10)
    assert layoutkit.ConvertOptions(zarr_format="2").zarr_format == 2
    assert layoutkit.ConvertOptions(chunks=(1000, 8)).chunks == parse_chunks("1000,8")
    paged = ReorderOptions(by="signal", page_size="8MiB", compressor="gzip:4", compress_threshold="8KiB",
                           memory_limit=2**30)
    assert (paged.page_size, paged.compress_threshold, paged.compressor) == (8 * 1024**2, 8192,
                                                                              parse_compressor("gzip:4"))
    assert ReorderOptions(page_size="auto").page_size is None


@pytest.mark.parametrize(("given", "named"), [
    ({"compressor": "lz5"}, "compressor"), ({"chunks": "big"}, "chunks"), ({"memory_limit": "lots"}, "memory_limit"),
    ({"workers": 0}, "workers"), ({"shards": "x"}, "shards"), ({"zarr_format": 4}, "zarr_format"),
    ({"chunk_bytes": "4 parsecs"}, "chunk_size"), ({"chunk_size": "4 parsecs"}, "chunk_size"),
])
def test_a_bad_value_fails_at_once_in_pythons_words(given, named):
    with pytest.raises(InvalidOptionError) as bad:
        layoutkit.ConvertOptions(**given)
    said = str(bad.value)
    assert named in said and "--" not in said, said


def test_errors_name_keyword_arguments_in_python_and_options_on_the_command_line(tmp_path):
    src = write_sample(tmp_path / "shots.h5", shots=2, signals=2, seed=1).path
    layoutkit.convert(src, tmp_path / "out.zarr")
    with pytest.raises(OutputExistsError, match=r"pass overwrite=True to replace it"):
        layoutkit.convert(src, tmp_path / "out.zarr")
    with pytest.raises(InvalidOptionError, match=r"Expected layout shot-major") as bad:
        layoutkit.convert(src, tmp_path / "other.zarr", layoutkit.ConvertOptions(layout="nope"))
    assert "--" not in str(bad.value)
    reorder(src, tmp_path / "by-shot.h5", ReorderOptions())
    with pytest.raises(OutputExistsError, match=r"pass overwrite=True"):
        reorder(src, tmp_path / "by-shot.h5", ReorderOptions())
    said = runner.invoke(app, ["convert", str(src), str(tmp_path / "out.zarr")])
    assert said.exit_code != 0 and "pass --overwrite" in " ".join(said.output.split())
    with pytest.raises(OutputExistsError, match=r"pass overwrite=True"):  # the command line's words ended with it
        layoutkit.convert(src, tmp_path / "out.zarr")


def test_an_unknown_shot_or_signal_is_a_key_error_naming_the_nearest(tmp_path):
    src = write_sample(tmp_path / "shots.h5", shots=3, signals=3, seed=1).path
    variants = [src]
    for layout in ("shot-major", "signal-major", "shot-packed"):
        dst = tmp_path / f"{layout}.zarr"
        layoutkit.convert(src, dst, layoutkit.ConvertOptions(layout=layout))
        variants.append(dst)
    layoutkit.convert(src, tmp_path / "virtual.icechunk", layoutkit.ConvertOptions(layout="virtual"))
    variants.append(f"icechunk:{tmp_path / 'virtual.icechunk'}")
    reorder(src, tmp_path / "by-signal.h5", ReorderOptions(by="signal"))
    variants.append(tmp_path / "by-signal.h5")
    for variant in variants:
        with layoutkit.open(variant) as archive:
            shot = archive.shots[1]
            assert len(archive.shot(shot).children) > 0 and archive.signal("ip")
            with pytest.raises(KeyError, match=rf"no shot '{shot}9' in .*the nearest: '{shot}'"):
                archive.shot(shot + "9")
            with pytest.raises(KeyError, match=r"no signal 'ipp' in .*the nearest: 'ip'"):
                archive.signal("ipp")


def test_shards_in_zarr_format_2_are_refused_not_ignored(tmp_path):
    with pytest.raises(InvalidOptionError, match=r"Zarr format 2 has no shards: leave out shards auto, or write "
                                                 r"zarr_format 3"):
        layoutkit.ConvertOptions(shards="auto", zarr_format=2)
    src = write_sample(tmp_path / "shots.h5", shots=2, signals=2, seed=1).path
    said = runner.invoke(app, ["convert", str(src), str(tmp_path / "v2.zarr"), "--shards", "auto", "--zarr-format", "2"])
    assert said.exit_code == 2 and "leave out --shards auto, or write --zarr-format 3" in " ".join(said.output.split())
    assert not (tmp_path / "v2.zarr").exists()


def test_the_former_spelling_of_layout_works_with_append(tmp_path):
    """``--order shot --append`` (the old spelling, which a first run accepts) ended in a traceback."""
    write_sample(tmp_path / "files", shots=4, signals=2, seed=1, shots_per_file=2)
    src, more = sorted((tmp_path / "files").glob("*.h5"))
    dst = tmp_path / "store.zarr"
    assert runner.invoke(app, ["-q", "convert", str(src), str(dst), "--order", "shot"]).exit_code == 0
    added = runner.invoke(app, ["convert", str(more), str(dst), "--order", "shot", "--append"])
    assert added.exit_code == 0 and "appended 1 of 1 source to" in " ".join(added.output.split()), added.output
    # the bytes written (rewritten objects whole) beside what the store holds after, which is what
    # is on disk: "723 objects written (138.0 MiB)" read as the size of a store of 91 MB (issue 66)
    from layoutkit.options import format_size
    from layoutkit.storage.local import disk_usage

    assert f"the store now {format_size(disk_usage(dst))}" in " ".join(added.output.split()), added.output
    other = runner.invoke(app, ["convert", str(more), str(dst), "--order", "signal", "--append"])
    assert other.exit_code == 2 and "Traceback" not in other.output
    assert "leave out --layout" in " ".join(other.output.split())


def test_a_destination_named_as_the_other_format_is_refused(tmp_path):
    src = write_sample(tmp_path / "shots.h5", shots=2, signals=2, seed=1).path
    said = runner.invoke(app, ["convert", str(src), str(tmp_path / "out.h5")])
    assert said.exit_code == 2 and "named as an HDF5 file: name it" in " ".join(said.output.split())
    said = runner.invoke(app, ["reorder", str(src), str(tmp_path / "out.zarr")])
    assert said.exit_code == 2 and "named as a Zarr store: name it" in " ".join(said.output.split())
    assert not (tmp_path / "out.h5").exists() and not (tmp_path / "out.zarr").exists()
    assert runner.invoke(app, ["-q", "convert", str(src), f"icechunk:{tmp_path / 'repo.h5'}"]).exit_code == 0


# -- issue 62: one Python call per command, by the command's names -----------------------------

BAD_VALUES = [
    pytest.param("convert", {"layout": "nope"}, ["--layout", "nope"], id="convert-layout"),
    pytest.param("convert", {"scheduler": "bogus"}, ["--scheduler", "bogus"], id="convert-scheduler"),
    pytest.param("convert", {"scheduler": "tcp://host"}, ["--scheduler", "tcp://host"], id="convert-address"),
    pytest.param("convert", {"chunk_size": "4 parsecs"}, ["--chunk-size", "4 parsecs"], id="convert-chunk-size"),
    pytest.param("convert", {"compressor": "lz5"}, ["--compressor", "lz5"], id="convert-compressor"),
    pytest.param("reorder", {"page_size": "1000"}, ["--page-size", "1000"], id="reorder-page-size"),
    pytest.param("reorder", {"by": "nothing"}, ["--by", "nothing"], id="reorder-by"),
    pytest.param("verify", {"latency": "10 parsecs"}, ["--latency", "10 parsecs"], id="verify-latency"),
    pytest.param("verify", {"engine": "warp"}, ["--engine", "warp"], id="verify-engine"),
    pytest.param("verify", {"cache": "lukewarm"}, ["--cache", "lukewarm"], id="verify-cache"),
    pytest.param("advise", {"budget": "forever"}, ["--budget", "forever"], id="advise-budget"),
    pytest.param("inspect", {"workers": 0}, ["--workers", "0"], id="inspect-workers"),
]


@pytest.fixture(scope="module")
def small_source(tmp_path_factory):  # noqa: ANN201 - Path
    return write_sample(tmp_path_factory.mktemp("api") / "shots.h5", shots=3, signals=3, seed=1).path


@pytest.mark.parametrize(("command", "given", "typed"), BAD_VALUES)
def test_a_python_call_refuses_what_its_command_refuses_in_pythons_words(small_source, tmp_path, command, given,
                                                                           typed):
    args = {"convert": [str(tmp_path / "out.zarr")], "reorder": [str(tmp_path / "out.h5")],
            "verify": [str(small_source)], "advise": [], "inspect": []}[command]
    said = runner.invoke(app, [command, str(small_source), *args, *typed])
    assert said.exit_code != 0 and "Traceback" not in said.output, said.output
    call = getattr(layoutkit, command)
    with pytest.raises(InvalidOptionError) as bad:
        call(small_source, *(args or ()), **given) if command != "verify" else call(small_source, args, **given)
    assert "--" not in str(bad.value) and len(str(bad.value).splitlines()) == 1, str(bad.value)
    assert not (tmp_path / "out.zarr").exists() and not (tmp_path / "out.h5").exists()


def test_every_command_is_one_python_call_that_returns_what_it_did(small_source, tmp_path):
    """convert, reorder, verify, inspect and append from Python, with the command's names
    and values; each returns its summary or report."""
    assert layoutkit.ConvertOptions(chunk_size="8MiB") == layoutkit.ConvertOptions(chunk_bytes=8 * 1024**2)
    assert layoutkit.ConvertOptions(chunk_size="8MiB").chunk_size == 8 * 1024**2
    assert layoutkit.ReorderOptions(chunk_size="1MiB").chunk_bytes == 1024**2
    with pytest.raises(InvalidOptionError, match="named as an HDF5 file"):
        layoutkit.convert(small_source, tmp_path / "out.h5")
    with pytest.raises(InvalidOptionError, match="named as a Zarr store"):
        layoutkit.reorder(small_source, tmp_path / "out.zarr")
    summary = layoutkit.convert(small_source, tmp_path / "by-signal.zarr", layout="signal-major", chunk_size="1MiB")
    assert summary.arrays > 0 and (tmp_path / "by-signal.zarr" / "zarr.json").exists()
    paged = layoutkit.reorder(small_source, tmp_path / "by-shot.h5", by="shot", page_size="64KiB")
    assert paged.page_size == 64 * 1024
    report = layoutkit.verify(small_source, [tmp_path / "by-signal.zarr", tmp_path / "by-shot.h5"],
                              patterns="shot,signal", sample=2, repeat=1, workers="1,2")
    assert set(report.mismatches) == {"by-signal.zarr", "by-shot.h5"} and not any(report.mismatches.values())
    assert {r.workers for r in report.results} == {1, 2} and {r.pattern for r in report.results} == {"shot", "signal"}
    inspected = layoutkit.inspect(small_source, workers=1)
    assert inspected.arrays == len(layoutkit.open(small_source).arrays())
    # a second file of new shots, appended: only its shots are new
    import h5py

    more = tmp_path / "more.h5"
    with h5py.File(small_source) as f, h5py.File(more, "w") as g:
        for name, value in f.attrs.items():
            g.attrs[name] = value
        shot = sorted(f["shots"])[0]
        f.copy(f"shots/{shot}", g.require_group("shots"), name=f"{shot}9")
    added = layoutkit.convert(more, tmp_path / "by-signal.zarr", append=True)
    assert added.new_shots == 1
    with layoutkit.open(f"file://{tmp_path / 'by-signal.zarr'}") as archive:
        assert f"{shot}9" in archive.shots and len(archive.shots) == 4
    with pytest.raises(InvalidOptionError, match="leave out layout"):
        layoutkit.convert(more, tmp_path / "by-signal.zarr", append=True, layout="shot-major")


def test_a_dry_run_returns_the_plan_and_writes_nothing(small_source, tmp_path):
    """``dry_run=True`` is ``--dry-run``: the checked plan, nothing written; a run tells
    its plan before it starts (``on_plan``) and its progress in the plan's bytes."""
    planned = layoutkit.convert(small_source, tmp_path / "out.zarr", dry_run=True, layout="signal-major")
    assert planned.layout.name == "signal-major" and planned.batches == []
    assert planned.nbytes == planned.plan.nbytes > 0 and planned.inventory.arrays
    assert not (tmp_path / "out.zarr").exists()
    paged = layoutkit.reorder(small_source, tmp_path / "out.h5", dry_run=True, by="signal")
    assert paged.plan.order and paged.plan.options.by == "signal" and not (tmp_path / "out.h5").exists()
    seen, done = [], []
    summary = layoutkit.convert(small_source, tmp_path / "out.zarr", on_plan=seen.append, progress=done.append)
    assert [p.nbytes for p in seen] == [summary.logical_bytes] and sum(done) == summary.logical_bytes
    with pytest.raises(InvalidOptionError, match=r"leave out dry_run"):
        layoutkit.convert(small_source, tmp_path / "out.zarr", append=True, dry_run=True)
    with pytest.raises(InvalidOptionError, match=r"leave out batch_files"):
        layoutkit.append(small_source, tmp_path / "out.zarr", batch_files=2)
