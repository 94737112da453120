"""Whole arrays read from their one stored object (layoutkit.readers.zarr_direct) equal what zarr reads."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import assert_same_reads
from zarr.codecs import BloscCodec, BytesCodec, GzipCodec, ShardingCodec, TransposeCodec, ZstdCodec

from layoutkit.readers.zarr_direct import MAX_OBJECTS, ChecksumError, DirectRead, plan_direct_read


def _written(path: Path, data: np.ndarray, **kwargs) -> tuple[zarr.Array, DirectRead | None, list[bytes | None]]:
    """The array written with ``kwargs``, its plan, and the bytes of its objects (None
    for one not stored)."""
    z = zarr.create_array(path, shape=data.shape, dtype=data.dtype, **kwargs)
    z[...] = data
    doc = json.loads((path / "zarr.json").read_text())
    plan = plan_direct_read(doc, data.shape, np.dtype(data.dtype))
    objects = [path / key for key in plan.keys] if plan else []
    return z, plan, [p.read_bytes() if p.exists() else None for p in objects]


CASES = [
    pytest.param(np.arange(1000, dtype="f4"), {"chunks": (1000,), "compressors": None}, id="chunk-raw"),
    pytest.param(np.arange(1000, dtype="<i2"), {"chunks": (4096,), "compressors": ZstdCodec(level=3)}, id="chunk-zstd-padded"),
    pytest.param(np.arange(999, dtype="f8"), {"chunks": (999,), "compressors": GzipCodec(level=4)}, id="chunk-gzip"),
    pytest.param(np.arange(10_000, dtype="u1"), {"chunks": (1024,), "shards": (10_240,), "compressors": ZstdCodec(level=1)},
                 id="shard-zstd-partial"),
    pytest.param(np.arange(5000, dtype="f4"), {"chunks": (1000,), "shards": (5000,), "compressors": None}, id="shard-raw"),
    pytest.param(np.arange(60 * 70, dtype="i4").reshape(60, 70), {"chunks": (16, 32), "shards": (64, 96),
                 "compressors": GzipCodec(level=1)}, id="shard-2d-gzip"),
    pytest.param(np.arange(64, dtype="f4"), {"chunks": (64,), "compressors": None, "serializer": ShardingCodec(
                 chunk_shape=(8,), codecs=[BytesCodec(), ZstdCodec()], index_location="start")}, id="shard-index-first"),
    pytest.param(np.array([True, False] * 50), {"chunks": (100,), "compressors": None}, id="bool"),
    pytest.param((np.arange(40) + 1j).astype("c8"), {"chunks": (10,), "shards": (40,), "compressors": ZstdCodec()},
                 id="complex"),
    pytest.param(np.arange(100, dtype="<i4"), {"chunks": (30,), "compressors": ZstdCodec()}, id="four-chunks"),
    pytest.param(np.arange(1000, dtype="f8"), {"chunks": (64,), "shards": (256,), "compressors": ZstdCodec()},
                 id="four-shards-last-partial"),
    pytest.param(np.arange(130 * 50, dtype="f4").reshape(130, 50), {"chunks": (16, 16), "shards": (64, 32),
                 "compressors": GzipCodec(level=1)}, id="shards-2d-both-edges"),
    pytest.param(np.arange(45 * 7, dtype="u2").reshape(45, 7), {"chunks": (10, 4), "compressors": None},
                 id="chunks-2d"),
]


@pytest.mark.parametrize(("data", "kwargs"), CASES)
def test_a_whole_array_decodes_as_zarr_reads_it(tmp_path: Path, data: np.ndarray, kwargs: dict) -> None:
    z, plan, raws = _written(tmp_path / "a.zarr", data, **kwargs)
    assert plan is not None and None not in raws
    got = plan.decode(raws)
    np.testing.assert_array_equal(got, z[...])
    assert got.dtype == z.dtype and got.shape == z.shape
    got[...] = got.flat[0]  # writable, and the caller's own


def test_chunks_not_stored_come_back_as_the_fill_value(tmp_path: Path) -> None:
    data = np.zeros(4096, dtype="f4")
    data[1024:2048] = 7.5  # three of four inner chunks hold only the fill value: not stored
    z, plan, (raw,) = _written(tmp_path / "a.zarr", data, chunks=(1024,), shards=(4096,), fill_value=0.0,
                               compressors=ZstdCodec(), config={"write_empty_chunks": False})
    assert plan is not None and raw is not None
    index = np.frombuffer(raw[-(16 * 4 + 4):-4], dtype="<u8").reshape(4, 2)
    assert (index[:, 0] == 2**64 - 1).sum() == 3  # the case is the one meant
    np.testing.assert_array_equal(plan.decode([raw]), z[...])


def test_objects_not_stored_come_back_as_the_fill_value(tmp_path: Path) -> None:
    data = np.full((40, 6), -1, dtype="i2")
    data[10:20] = 3  # of four chunks, one holds data: the others are not written
    z, plan, raws = _written(tmp_path / "a.zarr", data, chunks=(10, 6), fill_value=-1, compressors=ZstdCodec(),
                             config={"write_empty_chunks": False})
    assert plan is not None and raws.count(None) == 3
    np.testing.assert_array_equal(plan.decode(raws), z[...])


def test_too_many_objects_are_left_to_zarr(tmp_path: Path) -> None:
    _, plan, _ = _written(tmp_path / "a.zarr", np.arange(MAX_OBJECTS + 1, dtype="u1"), chunks=(1,), compressors=None)
    assert plan is None
    _, plan, _ = _written(tmp_path / "b.zarr", np.arange(MAX_OBJECTS, dtype="u1"), chunks=(1,), compressors=None)
    assert plan is not None and len(plan.keys) == MAX_OBJECTS


def test_a_fill_value_zarr_spells_as_text_is_left_to_zarr(tmp_path: Path) -> None:
    data = np.full(4096, np.nan, dtype="f4")
    data[:1024] = 1.0
    _, plan, raws = _written(tmp_path / "a.zarr", data, chunks=(1024,), shards=(4096,), fill_value=np.nan,
                             compressors=None, config={"write_empty_chunks": False})
    assert plan is not None and None not in raws
    assert plan.decode(raws) is None


@pytest.mark.parametrize("kwargs", [
    pytest.param({"chunks": (100,), "compressors": BloscCodec()}, id="blosc"),
    pytest.param({"chunks": (100,), "compressors": None, "serializer": BytesCodec(endian="big")}, id="big-endian"),
])
def test_other_layouts_are_left_to_zarr(tmp_path: Path, kwargs: dict) -> None:
    _, plan, _ = _written(tmp_path / "a.zarr", np.arange(100, dtype="<i4"), **kwargs)
    assert plan is None


def test_a_transposed_array_is_left_to_zarr(tmp_path: Path) -> None:
    _, plan, _ = _written(tmp_path / "a.zarr", np.arange(12, dtype="f4").reshape(3, 4), chunks=(3, 4),
                          filters=[TransposeCodec(order=(1, 0))], compressors=None)
    assert plan is None


def test_a_damaged_shard_index_is_refused(tmp_path: Path) -> None:
    _, plan, (raw,) = _written(tmp_path / "a.zarr", np.arange(5000, dtype="f4"), chunks=(1000,), shards=(5000,),
                               compressors=None)
    assert plan is not None and raw is not None
    damaged = bytearray(raw)
    damaged[-10] ^= 0xFF  # inside the index, before its checksum
    with pytest.raises(ChecksumError, match="checksum"):
        plan.decode([bytes(damaged)])


@pytest.mark.parametrize("order", ["signal", "shot"])  # shot-packed sizes its own shards
def test_stores_of_many_small_shards_read_as_the_source(shot_file: Path, tmp_path: Path, order: str) -> None:
    """Shards of 16 KiB and chunks of 4 KiB: most arrays are several objects, read whole
    through the direct path, and every read of ``layoutkit.open`` equals the source's."""
    import layoutkit
    from layoutkit.convert import ConvertOptions, convert
    from layoutkit.options import parse_chunks, parse_shards

    store = tmp_path / "small-shards.zarr"
    convert(shot_file, store, ConvertOptions(layout=order, shards=parse_shards("16KiB"), chunk_bytes=4096, chunks=parse_chunks("auto")))
    with layoutkit.open(store) as variant, layoutkit.open(shot_file) as source:
        multi = [p for p, node in variant._nodes.items()
                 if (plan := variant._direct(p, ())) is not None and len(plan.keys) > 1]  # type: ignore[attr-defined]
        assert multi, "no array of several objects: the case is not the one meant"
        assert_same_reads(source, variant, slices=False)


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # forking is the point
def test_a_forked_child_decodes_with_a_pool_of_its_own(tmp_path: Path) -> None:
    """The decoding pool's threads do not survive a fork: the child starts its own (without
    the at-fork reset this test hangs, measured, and fails after 60 s)."""
    import os

    z, plan, raws = _written(tmp_path / "a.zarr", np.arange(4096, dtype="f4"), chunks=(512,), shards=(4096,),
                             compressors=ZstdCodec())
    assert plan is not None
    np.testing.assert_array_equal(plan.decode(raws), z[...])  # the parent's pool exists now
    pid = os.fork()
    if pid == 0:  # the child: decode again, with the pool, and report by exit code
        try:
            ok = np.array_equal(plan.decode(raws), np.arange(4096, dtype="f4"))
        finally:
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung decoding: it used the parent's pool, whose threads it does not have")


def test_a_block_of_whole_chunks_is_planned_and_anything_else_is_left_to_zarr(tmp_path):
    data = np.arange(45 * 7 * 3, dtype="u2").reshape(45, 7, 3)
    z, plan, raw = _written(tmp_path / "a.zarr", data, chunks=(10, 4, 2), compressors=GzipCodec(level=1))
    by_key = dict(zip(plan.keys, raw))
    for sel in [(slice(0, 20), slice(0, 7), slice(0, 3)), (slice(40, 45), slice(4, 7), slice(2, 3)),
                (slice(10, 30), slice(0, 4), slice(0, 2)), (slice(None), slice(None), slice(None)), ()]:
        part = plan.part(sel)
        assert part is not None, sel
        np.testing.assert_array_equal(part.decode([by_key[k] for k in part.keys]), data[sel])
    for sel in [(slice(5, 20), slice(None), slice(None)), (slice(0, 20, 2), slice(None), slice(None)),
                (slice(0, 20), slice(None)), (3, slice(None), slice(None)), (slice(0, 25), slice(None), slice(None))]:
        assert plan.part(sel) is None, sel  # not on chunks' edges, strided, too few axes, an index
    _, sharded, _ = _written(tmp_path / "s.zarr", np.arange(100, dtype="f4"), chunks=(10,), shards=(50,), compressors=None)
    assert sharded.part((slice(0, 50),)) is None  # a shard's inner chunks are not objects


def test_a_hyperslab_is_covered_by_the_whole_chunks_it_touches(tmp_path):
    data = np.arange(45 * 7 * 3, dtype="f4").reshape(45, 7, 3)
    _, plan, raw = _written(tmp_path / "a.zarr", data, chunks=(10, 4, 2), compressors=ZstdCodec())
    by_key = dict(zip(plan.keys, raw))
    for sel in [(slice(5, 23), slice(1, 6), slice(1, 3)), (12,), (slice(None), 3), (-1, slice(2, 3), -3),
                (slice(41, 45),), (), Ellipsis, 44]:
        block, inner = plan.cover(sel)
        assert len(block.keys) <= len(plan.keys)
        np.testing.assert_array_equal(block.decode([by_key[k] for k in block.keys])[inner], data[sel])
    assert len(plan.cover((slice(11, 12), slice(0, 1), slice(0, 1)))[0].keys) == 1  # one chunk touched: one read
    for sel in [(slice(0, 10, 2),), (45,), (slice(3, 3),), (0, 0, 0, 0), ([1, 2],)]:
        assert plan.cover(sel) is None, sel


def test_an_array_of_many_chunks_is_planned_in_parts_only(tmp_path):
    data = np.arange(40 * 30, dtype="i4").reshape(40, 30)
    z = zarr.create_array(tmp_path / "m.zarr", shape=data.shape, dtype=data.dtype, chunks=(2, 2), compressors=None)
    z[...] = data
    doc = json.loads((tmp_path / "m.zarr" / "zarr.json").read_text())
    assert plan_direct_read(doc, data.shape, data.dtype) is None  # 300 chunks: zarr reads it whole
    plan = plan_direct_read(doc, data.shape, data.dtype, any_size=True)
    assert plan is not None and plan.keys == () and plan.decode([]) is None  # no whole-array read
    block, inner = plan.cover((slice(3, 9), slice(5, 30)))
    raw = [(tmp_path / "m.zarr" / k).read_bytes() for k in block.keys]
    np.testing.assert_array_equal(block.decode(raw)[inner], data[3:9, 5:30])
    assert len(block.keys) == 4 * 13
