"""``convert --compressor source``: the source's stored chunks copied into Zarr as they are."""

from __future__ import annotations

import zlib
from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import pytest
import zarr
from roundtrip import LayoutRoundTrip
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.convert import ConvertOptions, convert
from layoutkit.equality import compare_zarr
from layoutkit.options import parse_chunks, parse_compressor, parse_shards

SOURCE = parse_compressor("source")
runner = CliRunner()


@pytest.fixture
def encoded_file(tmp_path: Path) -> Path:
    """Datasets in every pipeline that maps onto Zarr codecs, with edge chunks, a
    big-endian one, a sparse one with a fill value, and a chunk larger than its array."""
    rng = np.random.default_rng(7)
    path = tmp_path / "encoded.h5"
    values = np.cumsum(rng.normal(size=(70, 90)), axis=1).astype("<f4")
    with h5py.File(path, "w") as f:
        f.create_dataset("deflate_shuffle", data=values, chunks=(30, 40), compression="gzip",
                         compression_opts=6, shuffle=True)
        f.create_dataset("with_checksum", data=values, chunks=(30, 40), compression="gzip", shuffle=True,
                         fletcher32=True)
        f.create_dataset("big_endian", data=(values * 100).astype(">i4"), chunks=(16, 16), compression="gzip")
        f.create_dataset("zstd", data=values.astype("<f8"), chunks=(25, 25), **hdf5plugin.Zstd(clevel=5))
        f.create_dataset("blosc", data=(values * 10).astype("<i2"), chunks=(32, 32),
                         **hdf5plugin.Blosc(cname="lz4", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE))
        f.create_dataset("plain_chunks", data=values, chunks=(35, 45))
        sparse = f.create_dataset("sparse", shape=(70, 90), dtype="<f4", chunks=(30, 40), compression="gzip",
                                  fillvalue=-1.0)
        sparse[:20, :30] = values[:20, :30]
        f.create_dataset("wide_chunk", data=np.arange(50, dtype="<i8"), chunks=(100,), maxshape=(None,),
                         compression="gzip")
        f.create_dataset("scaled", data=values, chunks=(30, 40), scaleoffset=2)
        f.create_dataset("hdf5_lz4", data=values, chunks=(30, 40), **hdf5plugin.LZ4())
        f.create_dataset("contiguous", data=values)
        f.create_dataset("names", data=np.array([b"a", b"bc"]), chunks=(2,), compression="gzip")
    return path


def stored_chunks(path: Path, name: str) -> dict[tuple[int, ...], bytes]:
    """Every allocated chunk of ``name``: its grid index and its stored bytes."""
    with h5py.File(path, "r") as f:
        ds = f[name]
        out = {}
        for i in range(ds.id.get_num_chunks()):
            info = ds.id.get_chunk_info(i)
            index = tuple(o // c for o, c in zip(info.chunk_offset, ds.chunks))
            out[index] = ds.id.read_direct_chunk(info.chunk_offset)[1]
        return out


COPIED = ("deflate_shuffle", "with_checksum", "big_endian", "zstd", "blosc", "plain_chunks", "sparse", "wide_chunk")


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_chunks_are_the_stored_hdf5_chunks(encoded_file: Path, tmp_path: Path, zarr_format: int) -> None:
    """Every Zarr chunk object is byte for byte the HDF5 chunk ``read_direct_chunk`` gives,
    and zarr-python reads the values h5py reads."""
    dst = tmp_path / "copy.zarr"
    summary = convert(encoded_file, dst, ConvertOptions(zarr_format=zarr_format, compressor=SOURCE,
                                                        chunks=parse_chunks("source")))
    assert summary.copied == len(COPIED)
    group = zarr.open_group(dst, mode="r")
    for name in COPIED:
        chunks = stored_chunks(encoded_file, name)
        sep = "/" if zarr_format == 3 else "."
        for index, data in chunks.items():
            key = ("c/" if zarr_format == 3 else "") + sep.join(map(str, index))
            assert (dst / name / key).read_bytes() == data, (name, index)
        written = {p for p in (dst / name).rglob("*") if p.is_file() and not p.name.startswith((".z", "zarr"))}
        assert len(written) == len(chunks), name  # the sparse array's unwritten chunks stay absent
    with h5py.File(encoded_file, "r") as f:
        for name in f:
            np.testing.assert_array_equal(group[name][...], f[name][()])
    assert compare_zarr(encoded_file, dst) == []


def test_shards_are_built_from_stored_chunks(encoded_file: Path, tmp_path: Path) -> None:
    """With shards, each shard holds the stored chunks unchanged, placed by its index."""
    dst = tmp_path / "sharded.zarr"
    convert(encoded_file, dst, ConvertOptions(compressor=SOURCE, shards=parse_shards("16KiB")))
    meta = zarr.open_array(dst / "deflate_shuffle", mode="r").metadata
    shard = meta.chunk_grid.chunk_shape
    inner = meta.codecs[0].chunk_shape
    assert shard != inner  # it is sharded
    per = tuple(s // c for s, c in zip(shard, inner))
    for index, data in stored_chunks(encoded_file, "deflate_shuffle").items():
        shard_index = tuple(i // p for i, p in zip(index, per))
        blob = (dst / "deflate_shuffle" / "c" / "/".join(map(str, shard_index))).read_bytes()
        table = np.frombuffer(blob[-(16 * int(np.prod(per)) + 4):-4], dtype="<u8").reshape(*per, 2)
        offset, size = table[tuple(i % p for i, p in zip(index, per))]
        assert blob[offset:offset + size] == data
    assert compare_zarr(encoded_file, dst) == []


def test_a_chunk_stored_with_a_filter_skipped_is_reencoded(tmp_path: Path) -> None:
    """HDF5 may store a chunk with a filter skipped (its filter mask says which); that chunk
    is decoded and encoded with the array's codecs, the others are copied."""
    src = tmp_path / "masked.h5"
    values = np.arange(400, dtype="<i4").reshape(20, 20)
    with h5py.File(src, "w") as f:
        ds = f.create_dataset("x", shape=(20, 20), dtype="<i4", chunks=(10, 10), compression="gzip")
        ds[:10, :] = values[:10, :]
        ds.id.write_direct_chunk((10, 0), values[10:, :10].tobytes(), filter_mask=1)  # deflate skipped
        ds.id.write_direct_chunk((10, 10), zlib.compress(values[10:, 10:].tobytes()))
    dst = tmp_path / "masked.zarr"
    convert(src, dst, ConvertOptions(compressor=SOURCE))
    np.testing.assert_array_equal(zarr.open_array(dst / "x", mode="r")[...], values)
    assert zlib.decompress((dst / "x" / "c" / "1" / "0").read_bytes()) == values[10:, :10].tobytes()


def test_pipelines_without_zarr_codecs_are_reencoded_by_name(encoded_file: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["convert", str(encoded_file), str(tmp_path / "o.zarr"), "--compressor", "source"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"{len(COPIED)} arrays copied as stored, 4 re-encoded" in text
    assert "/scaled uses scaleoffset" in text and "/hdf5_lz4 uses lz4" in text
    assert "/contiguous has contiguous storage" in text and "/names holds fixed-bytes values" in text
    assert "stored" in text and "/s stored" in text


@pytest.mark.parametrize(
    "args, expected",
    [
        pytest.param(["convert", "--compressor", "source", "--chunks", "10,10"], "Expected --chunks source", id="chunks"),
        pytest.param(["convert", "--compressor", "source", "--layout", "signal-major"], "needs --layout shot-major", id="signal"),
        pytest.param(["reorder", "--compressor", "source"], "--compressor source is convert's", id="reorder"),
        pytest.param(["convert", "--compressor", "source:3"], "Compressor source takes no options", id="level"),
    ],
)
def test_source_compressor_refusals(encoded_file: Path, tmp_path: Path, args: list[str], expected: str) -> None:
    dst = tmp_path / "out"
    result = runner.invoke(app, [args[0], str(encoded_file), str(dst), *args[1:]])
    assert result.exit_code == 2
    assert expected in " ".join(result.output.split())
    assert "Traceback" not in result.output and not dst.exists()


class TestZarrSourceCopyRoundTrip(LayoutRoundTrip):
    """The shared round trips with every chunk that can be copied as stored (and small
    shards, so that shards assembled from stored chunks are exercised everywhere)."""

    layout = "zarr-mirror"
    options = ConvertOptions(compressor=SOURCE, chunks=parse_chunks("source"), shards=parse_shards("64KiB"))
