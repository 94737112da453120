"""The raw reader decodes chunks itself; it must agree with HDF5 on every filter it takes."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import realdata_files

from layoutkit.inventory import read_inventory
from layoutkit.source import SourceReader, can_read_raw

FILTER_FILES = [p for p in realdata_files() if p.name in ("bitshuffle_datasets.hdf5", "lz4_datasets.hdf5")]


def check_raw_equals_h5py(path: Path) -> set[str]:
    inv = read_inventory(path)
    used: set[str] = set()
    with SourceReader(path, {a.path: a for a in inv.arrays}) as reader, h5py.File(path, "r") as f:
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

    from layoutkit.source import _inflater

    data = np.arange(1000, dtype="f8").tobytes()
    stream = zlib.compress(data, 4)
    assert _inflater(len(data))(stream) == data  # libdeflate, into the chunk's size
    assert _inflater(len(data) // 2)(stream) == data  # larger than assumed: zlib decodes it
    with pytest.raises(zlib.error):  # a damaged stream gets zlib's words
        _inflater(len(data))(stream[:2] + b"\x00" * 20 + stream[22:])


def test_gzip_chunks_layoutkit_encodes_are_zlib_streams_hdf5_reads(tmp_path: Path) -> None:
    import zlib

    from layoutkit.options import parse_compressor
    from layoutkit.writers.hdf5_paged import ChunkEncoder

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
    from layoutkit.inventory import check_source

    with pytest.raises(SourceNotFoundError, match=r"'s3://archive/shots\.h5' is a URL given as a local path.*as_source"):
        check_source(Path("s3://archive/shots.h5"))
