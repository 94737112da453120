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
    ({"chunk_bytes": "4 parsecs"}, "chunk_bytes"),
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
    assert added.exit_code == 0 and "appended 1 of 1 sources" in " ".join(added.output.split()), added.output
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
