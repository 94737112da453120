"""The raw reader decodes chunks itself; it must agree with HDF5 on every filter it takes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import realdata_files

from layoutkit.errors import RawReadFallback
from layoutkit.hdf5.filters import can_read_raw
from layoutkit.hdf5.inventory import read_inventory
from layoutkit.hdf5.raw import RawReader, _ChunkIndex

FILTER_FILES = [p for p in realdata_files() if p.name in ("bitshuffle_datasets.hdf5", "lz4_datasets.hdf5")]


def check_raw_equals_h5py(path: Path) -> set[str]:
    inv = read_inventory(path)
    used: set[str] = set()
    with RawReader(path, {a.path: a for a in inv.arrays}) as reader, h5py.File(path, "r") as f:
        for a in inv.arrays:
            if not a.shape or not a.filters or not can_read_raw(a):
                continue
            used.update(flt.name for flt in a.filters)
            for region in (tuple((0, n) for n in a.shape), tuple((n // 3, max(n // 3 + 1, n - 1)) for n in a.shape)):
                got = reader.read(a.path, region)
                want = f[a.path][tuple(slice(x, y) for x, y in region)]
                np.testing.assert_array_equal(got, want, err_msg=f"{path.name}:{a.path} {region}")
    return used


def test_every_decoder_matches_hdf5(hard_cases: dict[str, Path]) -> None:
    used = check_raw_equals_h5py(hard_cases["filters"])
    # the raw path really was taken for each of these
    assert {"gzip", "shuffle", "lzf", "zstd", "blosc", "lz4", "bitshuffle"} <= used


@pytest.mark.realdata
@pytest.mark.parametrize("path", FILTER_FILES or [pytest.param(None, marks=pytest.mark.skip(reason="../shared/realdata is absent"))],
                         ids=lambda p: p.name if p else "absent")
def test_realdata_filter_variants(path: Path) -> None:
    assert check_raw_equals_h5py(path)


def test_deflate_decoding_falls_back_to_zlib_when_the_output_is_not_the_chunk() -> None:
    import zlib

    from layoutkit.hdf5.raw import _inflater

    data = np.arange(1000, dtype="f8").tobytes()
    stream = zlib.compress(data, 4)
    assert _inflater(len(data))(stream) == data  # libdeflate, into the chunk's size
    assert _inflater(len(data) // 2)(stream) == data  # larger than assumed: zlib decodes it
    with pytest.raises(zlib.error):  # a damaged stream gets zlib's words
        _inflater(len(data))(stream[:2] + b"\x00" * 20 + stream[22:])


def test_gzip_chunks_layoutkit_encodes_are_zlib_streams_hdf5_reads(tmp_path: Path) -> None:
    import zlib

    from layoutkit.layouts.hdf5_paged.write import ChunkEncoder
    from layoutkit.options import parse_compressor

    values = (np.sin(np.arange(20_000) / 50.0) * 1000).astype("i2")
    for text in ("gzip:0", "gzip:4", "shuffle+gzip:9"):
        spec = parse_compressor(text)
        encoded = ChunkEncoder(spec, values.dtype.itemsize).encode(values.tobytes())
        path = tmp_path / f"{text.replace(':', '_').replace('+', '_')}.h5"
        with h5py.File(path, "w") as f:
            ds = f.create_dataset("x", shape=values.shape, dtype=values.dtype, chunks=values.shape,
                                  compression="gzip", compression_opts=spec.level, shuffle=spec.shuffle)
            ds.id.write_direct_chunk((0,), encoded)
        with h5py.File(path, "r") as f:
            np.testing.assert_array_equal(f["x"][...], values)
        if not spec.shuffle:
            assert zlib.decompress(encoded) == values.tobytes()


def test_a_url_that_became_a_path_says_how_to_read_it_from_its_bucket():
    """Path("s3://b/k.h5") is "s3:/b/k.h5": not a local file, and not read from the bucket
    either; the sentence names the URL and the call that reads it."""
    from layoutkit.errors import SourceNotFoundError
    from layoutkit.hdf5.files import check_source

    with pytest.raises(SourceNotFoundError, match=r"'s3://archive/shots\.h5' is a URL given as a local path.*as_source"):
        check_source(Path("s3://archive/shots.h5"))


def _h5py_index(ds: h5py.Dataset) -> tuple:
    found: list = []
    ds.id.chunk_iter(lambda c: found.append((tuple(c.chunk_offset), c.byte_offset, c.size, c.filter_mask)))
    return tuple(found)


def test_the_walk_keeps_the_index_of_datasets_of_few_chunks(hard_cases: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "index.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("few", data=np.arange(1000.0), chunks=(100,), compression="gzip")
        f.create_dataset("many", data=np.arange(10000.0), chunks=(10,))
        f.create_dataset("unwritten", shape=(500,), chunks=(100,), dtype="i4")
        part = f.create_dataset("partly", shape=(500,), chunks=(100,), dtype="i4", fillvalue=-1)
        part[200:300] = 7
        f.create_dataset("flat", data=np.arange(10))
    for source in (path, hard_cases["filters"], hard_cases["scales"]):
        inv = read_inventory(source)
        with h5py.File(source, "r") as f:
            for a in inv.arrays:
                ds = f[a.path]
                assert a.storage_bytes == ds.id.get_storage_size(), a.path
                grid = np.prod([-(-n // c) for n, c in zip(a.shape, a.chunks or ())]) if a.shape else 0
                if a.layout == "chunked" and a.shape and grid <= 64:
                    assert a.chunk_entries == _h5py_index(ds), a.path
                else:
                    assert a.chunk_entries is None, a.path
    arrays = {a.path: a for a in read_inventory(path).arrays}
    assert arrays["/many"].chunk_entries is None  # 1,000 chunks: asked of the file when read
    assert arrays["/unwritten"].chunk_entries == ()
    assert [origin for origin, *_ in arrays["/partly"].chunk_entries] == [(200,)]
    assert arrays["/flat"].chunk_entries is None


def test_the_reader_uses_the_index_the_walk_kept(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "two.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(100, dtype="i4"), chunks=(100,))
        f.create_dataset("b", data=np.arange(100, 200, dtype="i4"), chunks=(100,))
    arrays = {a.path: a for a in read_inventory(path).arrays}

    def no_h5py(*args, **kwargs):  # noqa: ANN002, ANN003
        raise AssertionError("the index was asked of h5py")

    monkeypatch.setattr(_ChunkIndex, "read", no_h5py)
    with RawReader(path, arrays) as reader:
        np.testing.assert_array_equal(reader.read("/a", ((0, 100),)), np.arange(100))
        np.testing.assert_array_equal(reader.read("/b", ((10, 20),)), np.arange(110, 120))
    # a kept index that points elsewhere (a gets b's) fails the self-check: a is read
    # through HDF5, and the reader says so
    swapped = {**arrays, "/a": dataclasses.replace(arrays["/a"], chunk_entries=arrays["/b"].chunk_entries)}
    with RawReader(path, swapped) as reader, pytest.warns(RawReadFallback, match="/a .*self-check"):
        np.testing.assert_array_equal(reader.read("/a", ((0, 100),)), np.arange(100))
        assert "/a" in reader.untrusted and "/b" not in reader.untrusted


def test_a_bucket_source_is_recognised_in_one_read(shot_file) -> None:
    """Telling HDF5 from netCDF-3 costs one GET of the first bytes (it was one for the
    netCDF-3 magic, then one for the HDF5 signature: a round trip more per open)."""
    from layoutkit.hdf5.files import _check_object_source

    data = shot_file.read_bytes()

    class Object:  # an object in a bucket, as the check sees it
        reads: list[tuple[int, int]] = []

        def size(self) -> int:
            return len(data)

        def read_range(self, offset: int, size: int) -> bytes:
            self.reads.append((offset, size))
            return data[offset : offset + size]

    source = Object()
    assert _check_object_source(source) is source  # type: ignore[arg-type]
    assert source.reads == [(0, 8)]


def test_the_bytes_the_self_check_read_serve_the_copy(tmp_path: Path, monkeypatch) -> None:
    """The self-check reads a dataset's first and last chunks from the file to hold them
    against HDF5's own read; the copy that set it off takes those bytes instead of reading
    them again: a dataset of two chunks is read from the file once."""
    path = tmp_path / "two.h5"
    with h5py.File(path, "w") as f:
        for name in ("a", "b"):  # b: its kind's decoding already checked on a
            f.create_dataset(name, data=np.arange(200, dtype="i4"), chunks=(100,), compression="gzip")
    arrays = {a.path: a for a in read_inventory(path).arrays}
    import layoutkit.hdf5.raw as raw

    reads: list[tuple[int, int]] = []
    real_pread = raw.os.pread

    def counted(fd: int, size: int, offset: int) -> bytes:
        reads.append((offset, size))
        return real_pread(fd, size, offset)

    monkeypatch.setattr(raw.os, "pread", counted)
    with RawReader(path, arrays) as reader, h5py.File(path, "r") as f:
        reader.stored_chunks("/a", ((0, 200),))
        reads.clear()
        stored = reader.stored_chunks("/b", ((0, 200),))  # the check of b's index, then its chunks
        chunks = sorted((o, n) for o, n, _ in reader._index(arrays["/b"]).entries.values())  # noqa: SLF001
        assert sorted(reads) == chunks
        for origin, (data, mask) in stored.items():  # and they are the chunks
            assert (mask, data) == tuple(f["b"].id.read_direct_chunk(origin))
        reads.clear()  # held once: a second read of them goes to the file
        np.testing.assert_array_equal(reader.read("/b", ((0, 200),)), np.arange(200))
        assert sorted(reads) == chunks
